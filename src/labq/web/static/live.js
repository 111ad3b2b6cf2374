// Live updates: every element with data-live="URL" fetches that HTML fragment every
// two seconds and puts it in place, without reloading the page. A job page stops
// once the fragment says the job is finished (data-live-status="finished"); the
// queue keeps going (data-keep-polling). Nothing is fetched while the tab is hidden.
(function () {
  "use strict";
  var PERIOD_MS = 2000;

  function finished(box) {
    if (box.hasAttribute("data-keep-polling")) {
      return false;
    }
    var status = box.querySelector("[data-live-status]");
    return status !== null && status.getAttribute("data-live-status") === "finished";
  }

  function follow(box) {
    var url = box.getAttribute("data-live");

    function stop(reason) {
      box.setAttribute("data-live-stopped", reason);
      if (reason === "finished") {
        // Actions such as "cancel" make no sense once the job has finished.
        var actions = document.querySelectorAll("[data-until-finished]");
        for (var i = 0; i < actions.length; i += 1) {
          actions[i].hidden = true;
        }
      }
      var pulse = box.querySelector(".pulse");
      if (pulse && reason !== "finished") {
        pulse.textContent = "stale: reload";
      }
    }

    function poll() {
      if (document.hidden) {
        window.setTimeout(poll, PERIOD_MS);
        return;
      }
      fetch(url, {
        headers: { "X-Labq-Live": "1" },
        credentials: "same-origin",
        cache: "no-store",
        redirect: "error"
      })
        .then(function (response) {
          if (!response.ok) {
            throw new Error("HTTP " + response.status);
          }
          return response.text();
        })
        .then(function (html) {
          box.innerHTML = html;
          box.setAttribute("data-live-updated", String(Date.now()));
          if (finished(box)) {
            stop("finished");
          } else {
            window.setTimeout(poll, PERIOD_MS);
          }
        })
        .catch(function () {
          stop("failed");
        });
    }

    if (finished(box)) {
      return;
    }
    window.setTimeout(poll, PERIOD_MS);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var boxes = document.querySelectorAll("[data-live]");
    for (var i = 0; i < boxes.length; i += 1) {
      follow(boxes[i]);
    }
  });
})();
