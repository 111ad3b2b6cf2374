"""What a job's end tells people: who is written to, the signed webhook body, when to retry.

Pure: no clock, no I/O. The store queues what this decides; the server's sender sends it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from labq.errors import InputError

SIGNATURE_HEADER: Final = "X-Labq-Signature"  # ``sha256=<hex HMAC of the raw body>``
DELIVERY_HEADER: Final = "X-Labq-Delivery"  # the notification's id: the same on every retry
EVENT: Final = "job.ended"
MAX_URL: Final = 2000
# one address: enough to refuse a typo, not a full RFC 5322 parser
_ADDRESS: Final = re.compile(r"[^@\s,<>]+@[^@\s,<>]+")


def new_secret() -> str:
    """A webhook's signing secret: shown to its creator once."""
    return "whsec_" + secrets.token_urlsafe(32)


def body_bytes(payload: Mapping[str, Any]) -> bytes:
    """The exact bytes POSTed (and signed): compact JSON, keys sorted."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def sign(secret: str, body: bytes) -> str:
    """The signature header's value for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is the signature of ``body`` under ``secret`` (in constant time)."""
    return header is not None and hmac.compare_digest(sign(secret, body), header)


def check_url(url: str) -> str:
    """A webhook URL: http or https with a host; refused in one line otherwise."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or len(url) > MAX_URL:
        raise InputError(
            f"a webhook URL is http:// or https:// with a host (at most {MAX_URL} characters),"
            f" not {url[:80]!r}",
            place="url",
        )
    return url.strip()


def recipients(owner: str, metadata: Mapping[str, Any], owner_domain: str | None) -> list[str]:
    """Who a job's end is emailed to: its owner (when an address is known) and its cc's.

    ``metadata.cc`` is Beaker's ``<notify><cc>`` (and the native form's); Teuthology's
    ``email`` may be one address or several, comma-separated. Each address once, in order;
    a value that is not an address is left out.
    """
    found: list[str] = []
    if "@" in owner:
        found.append(owner)
    elif owner_domain:
        found.append(f"{owner}@{owner_domain}")
    cc = metadata.get("cc")
    if isinstance(cc, list):
        found += [c for c in cc if isinstance(c, str)]
    email = metadata.get("email")
    if isinstance(email, str):
        found += email.split(",")
    elif isinstance(email, list):
        found += [e for e in email if isinstance(e, str)]
    out: dict[str, None] = {}
    for address in found:
        address = address.strip()
        if _ADDRESS.fullmatch(address):
            out.setdefault(address)
    return list(out)


def backoff(attempts: int, base: float, cap: float) -> float:
    """Seconds before the next try after ``attempts`` failed ones: doubling from ``base``."""
    return min(base * 2.0 ** max(attempts - 1, 0), cap)


def email_text(payload: Mapping[str, Any]) -> tuple[str, str]:
    """The subject and body of a job-end email."""
    job = payload["job"]
    result = f": {job['result']}" if job.get("result") else ""
    board = f" {job['whiteboard']}" if job.get("whiteboard") else ""
    subject = f"[labq] job {job['id']} {job['state']}{result}{board}"
    lines = [
        f"Job {job['id']} ({job['owner']}) ended {job['state']}{result}.",
        f"Whiteboard: {job.get('whiteboard') or '-'}",
        f"Submitted: {job['submitted_at']}",
    ]
    if job.get("url"):
        lines.append(f"Details: {job['url']}")
    return subject, "\n".join(lines) + "\n"
