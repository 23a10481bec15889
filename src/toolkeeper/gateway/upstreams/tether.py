"""Ties a stdio upstream's process group to the gateway's life (Linux).

The SDK starts each stdio server in a session of its own and kills that group when the
gateway closes the link — but a gateway killed outright (SIGKILL, OOM) closes nothing, and a
server that ignores end-of-file on stdin lives on as an orphan. The gateway therefore starts
``python -I tether.py GATEWAY_PID COMMAND ARGS...``: this script asks the kernel for a signal
when the gateway dies (``PR_SET_PDEATHSIG``), starts the command in its own process group
(inheriting stdin, stdout and stderr), and on that signal kills the whole group. The command
gets the same request, so killing the tether alone takes the command with it.

Standard library only, run by file path: the upstream's environment is the operator's, not the
gateway's, and need not be able to import toolkeeper.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from types import FrameType

_PR_SET_PDEATHSIG = 1
_GATEWAY_DIED = signal.SIGUSR1
"""The signal the kernel sends the tether when the gateway dies (one the command never sees
from the SDK, which sends SIGTERM and SIGKILL)."""


def _die_with_parent(sig: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def main(argv: list[str]) -> int:
    gateway, command = int(argv[0]), argv[1:]

    def kill_group(_signum: int, _frame: FrameType | None) -> None:
        os.killpg(os.getpgid(0), signal.SIGKILL)

    signal.signal(_GATEWAY_DIED, kill_group)
    _die_with_parent(_GATEWAY_DIED)
    if os.getppid() != gateway:  # it died before the request took effect
        return 1
    # The command shares the tether's group (the SDK's own session), so the SDK's killpg on
    # a normal close reaches it too; it also dies if the tether is killed.
    child = subprocess.Popen(command, preexec_fn=lambda: _die_with_parent(signal.SIGKILL))
    signal.signal(signal.SIGTERM, lambda signum, _frame: child.send_signal(signum))
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
