"""Real receivers for notifications: a local SMTP server (aiosmtpd) and an HTTP server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Mailbox:
    """What the SMTP server received: (envelope recipients, parsed message) per mail."""

    port: int = 0
    mails: list[tuple[list[str], Message]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.mails.append((list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 OK"


@contextmanager
def smtp_server() -> Iterator[Mailbox]:
    """An SMTP server on a free local port, for the test's length."""
    box = Mailbox(port=free_port())
    controller = Controller(box, hostname="127.0.0.1", port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


@dataclass
class Hooks:
    """What the HTTP receiver got: (headers, raw body) per POST; ``status`` is its answer."""

    url: str = ""
    status: int = 200
    posts: list[tuple[dict[str, str], bytes]] = field(default_factory=list)


@contextmanager
def http_receiver() -> Iterator[Hooks]:
    """An HTTP server that records every POST and answers ``hooks.status``."""
    hooks = Hooks()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            hooks.posts.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(hooks.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hooks.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hooks
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
