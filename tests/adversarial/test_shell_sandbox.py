"""Escape attempts against the shell sandbox, each run under real bubblewrap: writing outside
the roots (directly, through a symlink, through /proc), reaching the network, reading the
harness's secrets, signalling the harness, a fork bomb, endless output, sleeping past the
timeout and background processes outliving the command."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkeeper.errors import ConfigError
from toolkeeper.executors.sandbox import ResourceLimits, Sandbox, SandboxUnavailable


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    yield server
    server.close()


_FORKS = """
import os, time
forked = 0
for _ in range(500):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
    except OSError:
        break
    forked += 1
print(forked)
"""
"""Forks until the kernel refuses, and says how many it got."""


def _run(sandbox: Sandbox, script: str, root: Path, timeout: float = 10) -> bytes:
    done = sandbox.run_blocking(["sh", "-c", script], cwd=root, timeout=timeout)
    return done.stdout + done.stderr


def test_writes_outside_the_roots_fail(root: Path, tmp_path: Path) -> None:
    outside = Path("/var/tmp") / f"toolkeeper-escape-{os.getpid()}"
    script = f"echo x > {outside}; echo x > {tmp_path / 'beside'}; echo x > /etc/tk-escape"
    _run(Sandbox(roots=(root,)), script, root)
    assert not outside.exists()
    assert not (tmp_path / "beside").exists()  # the host's /tmp is not the sandbox's
    assert not Path("/etc/tk-escape").exists()


def test_a_symlink_in_a_root_does_not_lead_out(root: Path) -> None:
    target = Path("/var/tmp") / f"toolkeeper-link-{os.getpid()}"
    (root / "link").symlink_to(target)
    (root / "etc").symlink_to("/etc")
    out = _run(Sandbox(roots=(root,)), "echo x > link; echo x > etc/tk-escape", root)
    assert b"Read-only file system" in out
    assert not target.exists() and not Path("/etc/tk-escape").exists()


def test_proc_offers_no_way_to_the_host_filesystem(root: Path) -> None:
    # /proc/1/root is the namespace's own init: the same read-only view, not the host's.
    _run(Sandbox(roots=(root,)), "echo x > /proc/1/root/etc/tk-escape", root)
    assert not Path("/etc/tk-escape").exists()


def test_no_network_reaches_a_host_listener(root: Path, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    script = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    out = Sandbox(roots=(root,)).run_blocking(["bash", "-c", script], cwd=root, timeout=10)
    assert b"connected" not in out.stdout
    with pytest.raises(TimeoutError):
        listener.accept()


def test_allowed_network_does_reach_it(root: Path, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    script = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    out = Sandbox(roots=(root,), network=True).run_blocking(
        ["bash", "-c", script], cwd=root, timeout=10
    )
    assert out.stdout == b"connected\n"  # the probe above is a real one


def test_the_harness_environment_is_unreadable(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_ESCAPE_TOKEN", "tk-env-secret-98765")
    script = "env; cat /proc/*/environ; cat /proc/$PPID/environ"
    out = _run(Sandbox(roots=(root,)), script, root)
    assert b"tk-env-secret-98765" not in out


def test_the_harness_cannot_be_signalled(root: Path) -> None:
    # Our pid means nothing in the command's pid namespace; kill -1 reaches only its own.
    script = f"kill -9 {os.getpid()}; kill -9 {os.getppid()}; kill -9 -1; echo survived"
    _run(Sandbox(roots=(root,)), script, root)
    assert os.getpid() > 0  # still here: a SIGKILL would have ended this test process


def test_a_fork_bomb_is_capped_and_cleaned_up(root: Path) -> None:
    limits = ResourceLimits(processes=64)
    sandbox = Sandbox(roots=(root,), limits=limits)
    started = time.monotonic()
    done = sandbox.run_blocking(
        ["bash", "-c", "bomb() { bomb | bomb & }; bomb; sleep 5"], cwd=root, timeout=2
    )
    assert time.monotonic() - started < 10
    assert done.timed_out or done.exit_code is not None
    counted = sandbox.run_blocking(["python3", "-c", _FORKS], cwd=root, timeout=20)
    assert 0 < int(counted.stdout) < 64  # the cap held: forks beyond it failed


def test_endless_output_is_capped_in_memory(root: Path) -> None:
    sandbox = Sandbox(roots=(root,), capture_limit=1 << 20)
    done = sandbox.run_blocking(["yes"], cwd=root, timeout=1)
    assert done.timed_out
    assert len(done.stdout) == 1 << 20
    assert done.stdout_bytes > 1 << 20  # counted, though not kept


def test_sleeping_past_the_timeout_ends_at_the_timeout(root: Path) -> None:
    started = time.monotonic()
    done = Sandbox(roots=(root,)).run_blocking(
        ["sh", "-c", "trap '' TERM INT HUP; sleep 60"], cwd=root, timeout=1
    )
    assert done.timed_out and time.monotonic() - started < 5


def test_background_processes_do_not_outlive_the_command(root: Path) -> None:
    marker = root / "survivor"
    late = f"sleep 1.5; touch {marker}"
    script = f"({late}) & nohup sh -c '{late}' & setsid sh -c '{late}' & echo left"
    done = Sandbox(roots=(root,)).run_blocking(["sh", "-c", script], cwd=root, timeout=30)
    assert done.stdout == b"left\n" and done.duration < 1.5
    time.sleep(2.5)
    assert not marker.exists()


def test_background_processes_holding_stdout_do_not_hang_the_call(root: Path) -> None:
    started = time.monotonic()
    done = Sandbox(roots=(root,)).run_blocking(
        ["sh", "-c", "sleep 100 & echo done"], cwd=root, timeout=30
    )
    assert done.stdout == b"done\n" and done.exit_code == 0
    assert time.monotonic() - started < 5


def test_the_read_only_root_cannot_be_remounted(root: Path) -> None:
    # A process with capabilities (bwrap run by root leaves them by default) can remount a
    # read-only bind writable in its own mount namespace; the command holds none.
    probe = Path("/etc/tk-remount-probe")
    out = _run(
        Sandbox(roots=(root,)),
        f"grep CapEff /proc/self/status; mount -o remount,rw,bind /; touch {probe}",
        root,
    )
    assert b"CapEff:\t0000000000000000" in out
    assert not probe.exists()


def test_kernel_knobs_are_read_only(root: Path) -> None:
    # Only asked, never tried: a write that got through would change the host.
    out = _run(
        Sandbox(roots=(root,)),
        "for f in /proc/sys/vm/swappiness /proc/sys/kernel/hostname; do "
        "test -w $f && echo writable $f; done; echo checked",
        root,
    )
    assert out == b"checked\n"


def test_no_user_namespace_can_be_nested(root: Path) -> None:
    done = Sandbox(roots=(root,)).run_blocking(
        ["sh", "-c", "unshare -Ur id -u || echo refused"], cwd=root, timeout=10
    )
    assert done.stdout == b"refused\n"


def test_a_root_inside_another_is_refused(root: Path) -> None:
    # A command could swap the inner root for a symlink to /etc, which the next sandbox
    # would bind writable.
    (root / "inner").mkdir()
    with pytest.raises(ConfigError, match="lies inside writable root"):
        Sandbox(roots=(root, root / "inner"))


def test_a_root_swapped_for_a_symlink_runs_nothing(root: Path, tmp_path: Path) -> None:
    second = tmp_path / "second"
    second.mkdir()
    sandbox = Sandbox(roots=(root, second))
    second.rmdir()
    second.symlink_to("/etc")
    with pytest.raises(SandboxUnavailable, match="no longer the directory"):
        sandbox.run_blocking(["touch", str(second / "tk-escape")], cwd=root, timeout=10)
    assert not Path("/etc/tk-escape").exists()
