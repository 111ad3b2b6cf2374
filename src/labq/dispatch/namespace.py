"""A PID namespace made from inside Python, as ``unshare --pid --fork --kill-child
--mount-proc`` makes one (containment's ``pidns`` mode for a forked supervisor).

:func:`run_as_init` unshares a PID and a mount namespace, forks, and runs the
given function as process 1 of the new namespace, with ``/proc`` mounted afresh
so it sees its own processes only. The calling process stays behind as the
*keeper*: the process the dispatcher knows. It passes SIGTERM, SIGINT and SIGHUP
on to its child (the dispatcher signals the keeper alone, so that a task forked a
moment ago, still in the supervisor's process group, is not hit), waits, and ends
as its child ended. If the keeper dies, even by SIGKILL, the kernel kills its child
(``PR_SET_PDEATHSIG``), and when process 1 of a namespace dies the kernel kills
every other process in it: nothing of the set outlives its supervisor.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Final

CLONE_NEWNS: Final = 0x00020000
CLONE_NEWPID: Final = 0x20000000
MS_NOSUID: Final = 2
MS_NODEV: Final = 4
MS_NOEXEC: Final = 8
MS_REC: Final = 16384
MS_PRIVATE: Final = 1 << 18
PR_SET_PDEATHSIG: Final = 1
_PASSED: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_UNCATCHABLE: Final = (signal.SIGKILL, signal.SIGSTOP)


class NamespaceError(OSError):
    """The namespace could not be made (not root, or the host forbids it)."""


def run_as_init(child: Callable[[], int]) -> int:
    """Run ``child`` as process 1 of a new PID namespace; the keeper's exit status.

    Returns only in the keeper; the child ends with ``os._exit(child())``. A child
    killed by a signal makes the keeper kill itself by the same signal, so its
    parent sees what it would have seen of the child.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    _check(libc.unshare(CLONE_NEWPID | CLONE_NEWNS), "unshare")
    # our /proc mount must not show through to the host's mount namespace
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    for sig in _PASSED:
        signal.signal(sig, signal.SIG_IGN)  # before the fork: no window where one kills us
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            for sig in _PASSED:
                signal.signal(sig, signal.SIG_DFL)
            flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
            _check(libc.mount(b"proc", b"/proc", b"proc", flags, None), "mount /proc")
            code = child()
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def pass_on(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for sig in _PASSED:
        signal.signal(sig, pass_on)
    _, status = os.waitpid(pid, 0)  # a signal handled meanwhile does not end the wait (PEP 475)
    if os.WIFSIGNALED(status):
        return _die_by(os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status)


def _die_by(signum: int) -> int:
    """End the keeper by ``signum``, as its child ended; the shell's ``128 + signum`` in
    the odd case where that signal's default action does not end a process."""
    if signum not in _UNCATCHABLE:  # SIGKILL's disposition cannot be set, nor need be
        signal.signal(signum, signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signum)
    return 128 + signum


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise NamespaceError(errno, f"{what}: {os.strerror(errno)}")
