"""The agent's log uploads by offset, against the server's own append (labq.api.agent.append_at)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labq.agent.link import Unreachable
from labq.agent.uploader import LogUploader
from labq.api.agent import append_at


class Server:
    """The server's side of ``PUT …/logs``, with a network that can lose answers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls = 0
        self.lose_answers = 0  # the next n calls are applied, but their answer is lost
        self.refuse = 0  # the next n calls never arrive

    def send(self, rel: str, offset: int, chunk: bytes) -> int:
        self.calls += 1
        if self.refuse:
            self.refuse -= 1
            raise Unreachable("cut")
        size = append_at(self.root / rel, offset, chunk)
        if self.lose_answers:
            self.lose_answers -= 1
            raise Unreachable("the answer was lost")
        return size

    def text(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as f:
        f.write(data)


@pytest.fixture
def dirs(tmp_path):
    return tmp_path / "agent", Server(tmp_path / "server")


def test_growing_files_are_sent_in_chunks_from_where_the_server_is(dirs):
    local, server = dirs
    write(local / "supervisor.log", b"one\n")
    write(local / "h1" / "task-1-t.log", b"0123456789" * 3)
    up = LogUploader(local, server.send, chunk=7)
    assert up.upload()
    assert server.text("h1/task-1-t.log") == b"0123456789" * 3
    write(local / "h1" / "task-1-t.log", b"more\n")
    write(local / "supervisor.log", b"two\n")
    calls = server.calls
    assert up.upload()
    assert server.text("h1/task-1-t.log") == b"0123456789" * 3 + b"more\n"
    assert server.text("supervisor.log") == b"one\ntwo\n"
    assert server.calls == calls + 2  # only the new bytes went
    assert up.upload()
    assert server.calls == calls + 2


def test_an_empty_log_is_made_on_the_server_once(dirs):
    local, server = dirs
    write(local / "h1" / "task-2-quiet.log", b"")
    up = LogUploader(local, server.send)
    assert up.upload()
    assert up.upload()
    assert server.text("h1/task-2-quiet.log") == b""
    assert server.calls == 1


def test_a_lost_answer_or_a_cut_line_neither_loses_nor_doubles_a_byte(dirs):
    local, server = dirs
    write(local / "a.log", b"abcdefghij")
    up = LogUploader(local, server.send, chunk=4)
    server.lose_answers = 1
    with pytest.raises(Unreachable):
        up.upload()
    server.refuse = 1
    with pytest.raises(Unreachable):
        up.upload()
    assert up.upload()
    assert server.text("a.log") == b"abcdefghij"


def test_a_restarted_agent_knowing_no_offsets_skips_what_the_server_has(dirs):
    local, server = dirs
    write(local / "a.log", b"x" * 1000)
    assert LogUploader(local, server.send, chunk=100).upload()
    write(local / "a.log", b"tail")
    again = LogUploader(local, server.send, chunk=100)
    calls = server.calls
    assert again.upload()
    assert server.text("a.log") == b"x" * 1000 + b"tail"
    assert server.calls - calls == 2  # one chunk to learn the server's size, one with the tail


def test_a_server_that_lost_its_copy_gets_it_again_from_the_start(dirs):
    local, server = dirs
    write(local / "a.log", b"first\n")
    up = LogUploader(local, server.send)
    assert up.upload()
    (server.root / "a.log").unlink()
    write(local / "a.log", b"second\n")
    assert up.upload()  # refused as a gap, answered size 0: sent again from there
    assert server.text("a.log") == b"first\nsecond\n"


def test_collected_logs_wait_for_the_end_and_masking_files_are_never_sent(dirs):
    local, server = dirs
    write(local / "h1" / "task-1-t.log", b"t\n")
    write(local / "h1" / "collected" / "messages", b"secret-to-be-masked\n")
    write(local / "h1" / "guests" / "g1" / "collected" / "dmesg", b"d\n")
    write(local / "h1" / "collected" / ".messages.masking", b"half")
    up = LogUploader(local, server.send)
    assert up.upload()
    assert not (server.root / "h1" / "collected").exists()
    assert not (server.root / "h1" / "guests").exists()
    (local / "h1" / "collected" / ".messages.masking").replace(local / "h1/collected/messages")
    assert up.upload(final=True)
    assert server.text("h1/collected/messages") == b"half"
    assert server.text("h1/guests/g1/collected/dmesg") == b"d\n"
    assert not (server.root / "h1" / "collected" / ".messages.masking").exists()


def test_symbolic_links_are_not_followed(dirs, tmp_path):
    local, server = dirs
    write(tmp_path / "elsewhere" / "private", b"not a log")
    local.mkdir()
    (local / "link.log").symlink_to(tmp_path / "elsewhere" / "private")
    assert LogUploader(local, server.send).upload(final=True)
    assert not (server.root / "link.log").exists()


steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(["a.log", "h/b.log"]), st.binary(max_size=40)),
        st.tuples(st.just("upload"), st.integers(0, 2), st.integers(0, 2)),
        st.tuples(st.just("restart"), st.none(), st.none()),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(steps=steps, chunk=st.integers(1, 16))
def test_whatever_fails_the_server_ends_with_the_local_bytes(tmp_path_factory, steps, chunk):
    root = tmp_path_factory.mktemp("u")
    local, server = root / "agent", Server(root / "server")
    local.mkdir()
    up = LogUploader(local, server.send, chunk=chunk)
    for kind, a, b in steps:
        if kind == "write":
            write(local / a, b)
        elif kind == "upload":
            server.lose_answers, server.refuse = a, b
            with contextlib.suppress(Unreachable):
                up.upload()
        else:
            up = LogUploader(local, server.send, chunk=chunk)
    server.lose_answers = server.refuse = 0
    assert up.upload(final=True)
    for rel, path in up.files(final=True):
        assert server.text(rel) == path.read_bytes()
