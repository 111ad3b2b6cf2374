"""The sender of job-end notifications: notices ended jobs, then sends what is due.

It runs on the server's housekeeping thread, never on the scheduler's or a request's:
a slow SMTP server or webhook receiver delays only other notifications. Each send
happens outside any transaction; its outcome is written after it, so a crash between
the two sends that one again after the restart (at least once; the receiver can tell a
repeat by ``X-Labq-Delivery``), and a row marked sent is never sent again.
"""

from __future__ import annotations

import logging
import smtplib
from collections.abc import Callable
from datetime import datetime, timedelta
from email.message import EmailMessage

from sqlalchemy import Engine

from labq.config import Notify
from labq.domain.notices import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    backoff,
    body_bytes,
    email_text,
    sign,
)
from labq.store import reading, transaction
from labq.store.notices import Outgoing

log = logging.getLogger("labq.outbox")

Clock = Callable[[], datetime]


class SendError(Exception):
    """One try failed; the message says why in one line."""


class Outbox:
    """Notices ended jobs and sends due notifications, one pass per :meth:`run_once`."""

    def __init__(
        self, engine: Engine, settings: Notify, clock: Clock, *, ui_base: str | None = None
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.clock = clock
        self.ui_base = ui_base  # the server's public URL, for the link to the job's page

    def run_once(self) -> tuple[int, int]:
        """One pass: ``(notifications queued, notifications sent)``."""
        return self.notice(), self.send_due()

    def notice(self) -> int:
        """Queue the notifications of jobs that ended since the last pass."""
        with reading(self.engine) as repo:
            candidates = repo.notices.unnoticed_ended_jobs()
        queued = 0
        for job_id in candidates:
            with transaction(self.engine) as repo:
                queued += repo.notices.notice_job(
                    job_id,
                    now=self.clock(),
                    email=self.settings.smtp.host is not None,
                    owner_domain=self.settings.smtp.owner_domain,
                    job_url=None if self.ui_base is None else f"{self.ui_base}/ui/jobs/{job_id}",
                )
        return queued

    def send_due(self) -> int:
        """Try every due notification once; how many went out."""
        with reading(self.engine) as repo:
            due = repo.notices.due_notifications(self.clock())
        sent = 0
        for item in due:
            try:
                self.send(item)
            except SendError as exc:
                self._failed(item, str(exc))
                continue
            with transaction(self.engine) as repo:
                sent += repo.notices.mark_sent(item.id, now=self.clock())
        return sent

    def send(self, item: Outgoing) -> None:
        """Send one notification; :class:`SendError` when it did not go out."""
        if item.kind == "email":
            self._email(item)
        else:
            self._post(item)

    def _failed(self, item: Outgoing, error: str) -> None:
        now = self.clock()
        tries = item.attempts + 1
        gone = item.kind == "webhook" and item.secret is None  # no retry brings it back
        retry_at = None
        if tries < self.settings.attempts and not gone:
            wait = backoff(tries, self.settings.backoff, self.settings.backoff_max)
            retry_at = now + timedelta(seconds=wait)
        log.warning(
            "job %d: %s to %s failed (try %d): %s",
            item.job_id,
            item.kind,
            item.target,
            tries,
            error,
        )
        with transaction(self.engine) as repo:
            repo.notices.mark_failed(item.id, error, retry_at=retry_at, now=now)

    def _email(self, item: Outgoing) -> None:
        smtp = self.settings.smtp
        if smtp.host is None:
            raise SendError("email is off (notify.smtp.host is not set)")
        subject, text = email_text(item.payload)
        message = EmailMessage()
        message["From"] = smtp.sender
        message["To"] = item.target.replace(",", ", ")
        message["Subject"] = subject
        message[DELIVERY_HEADER] = str(item.id)
        message.set_content(text)
        try:
            with smtplib.SMTP(smtp.host, smtp.port, timeout=smtp.timeout) as client:
                if smtp.starttls:
                    client.starttls()
                if smtp.username is not None:
                    client.login(smtp.username, smtp.password or "")
                client.send_message(message)
        except (OSError, smtplib.SMTPException) as exc:
            raise SendError(f"SMTP {smtp.host}:{smtp.port}: {_one_line(exc)}") from None

    def _post(self, item: Outgoing) -> None:
        if item.secret is None:
            raise SendError("the webhook was removed")
        body = body_bytes(item.payload)
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(item.secret, body),
            DELIVERY_HEADER: str(item.id),
            "User-Agent": "labq",
        }
        # imported when a webhook is posted: httpx (and the rich and pygments its own command
        # line imports) would be a fifth of a second of every server's start
        import httpx

        try:
            answer = httpx.post(
                item.target, content=body, headers=headers, timeout=self.settings.timeout
            )
        except httpx.HTTPError as exc:
            raise SendError(f"POST {item.target}: {_one_line(exc)}") from None
        if not 200 <= answer.status_code < 300:
            raise SendError(f"POST {item.target}: HTTP {answer.status_code}")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
