"""`Sandbox`: real bubblewrap runs — writable roots only, a fixed environment, exit codes and
signals, stdin, PTY, timeouts and cancellation, and failing closed when bwrap cannot start."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import anyio
import pytest

from toolkeeper.executors.sandbox import ResourceLimits, Sandbox, SandboxUnavailable


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def test_the_command_runs_in_its_working_directory_and_writes_its_root(root: Path) -> None:
    done = Sandbox(roots=(root,)).run_blocking(
        ["sh", "-c", "pwd; echo made > out.txt"], cwd=root, timeout=10
    )
    assert done.exit_code == 0 and done.signal is None
    assert done.stdout.decode().strip() == str(root)
    assert (root / "out.txt").read_text() == "made\n"
    assert done.sandboxed


def test_stdout_and_stderr_are_kept_apart_with_the_exit_code(root: Path) -> None:
    done = Sandbox(roots=(root,)).run_blocking(
        ["sh", "-c", "echo out; echo err >&2; exit 7"], cwd=root, timeout=10
    )
    assert (done.exit_code, done.stdout, done.stderr) == (7, b"out\n", b"err\n")
    assert (done.stdout_bytes, done.stderr_bytes) == (4, 4)


def test_a_signalled_command_reports_the_signal_not_an_exit_code(root: Path) -> None:
    done = Sandbox(roots=(root,)).run_blocking(["sh", "-c", "kill -TERM $$"], cwd=root, timeout=10)
    assert done.exit_code is None
    assert done.signal == signal.SIGTERM


def test_the_rest_of_the_filesystem_is_read_only(root: Path) -> None:
    done = Sandbox(roots=(root,)).run_blocking(
        ["sh", "-c", "touch /usr/toolkeeper-probe"], cwd=root, timeout=10
    )
    assert done.exit_code != 0
    assert b"Read-only file system" in done.stderr
    assert not Path("/usr/toolkeeper-probe").exists()


def test_the_environment_is_fixed_and_inherits_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLKEEPER_PROBE_TOKEN", "tk-secret-value-123")
    sandbox = Sandbox(roots=(root,), environment={"GIT_AUTHOR_NAME": "Ada"})
    done = sandbox.run_blocking(["env"], cwd=root, timeout=10)
    names = {line.split("=", 1)[0] for line in done.stdout.decode().splitlines()}
    assert names == {"PATH", "HOME", "LANG", "TMPDIR", "TERM", "PWD", "GIT_AUTHOR_NAME"}
    assert b"tk-secret-value-123" not in done.stdout


def test_environment_values_stay_off_the_command_line(root: Path) -> None:
    # /proc/PID/cmdline is readable by every local user; an environment may hold a token.
    sandbox = Sandbox(roots=(root,), environment={"GITHUB_TOKEN": "ghp_tk_secret_42"})
    assert "ghp_tk_secret_42" not in " ".join(sandbox.command(["env"], cwd=root))
    done = sandbox.run_blocking(["env"], cwd=root, timeout=10)
    assert b"GITHUB_TOKEN=ghp_tk_secret_42\n" in done.stdout


def test_stdin_is_closed_unless_given(root: Path) -> None:
    sandbox = Sandbox(roots=(root,))
    assert sandbox.run_blocking(["cat"], cwd=root, timeout=10).stdout == b""
    given = sandbox.run_blocking(["wc", "-c"], cwd=root, timeout=10, stdin=b"x" * 300_000)
    assert given.stdout.strip() == b"300000"


def test_a_pty_makes_stdout_a_terminal_and_keeps_stderr_apart(root: Path) -> None:
    script = "test -t 1 && echo tty; test -t 2 || echo pipe >&2"
    sandbox = Sandbox(roots=(root,))
    with_pty = sandbox.run_blocking(["sh", "-c", script], cwd=root, timeout=10, pty=True)
    assert with_pty.stdout.replace(b"\r", b"") == b"tty\n"
    assert with_pty.stderr == b"pipe\n"
    without = sandbox.run_blocking(["sh", "-c", script], cwd=root, timeout=10)
    assert without.stdout == b""


def test_a_command_past_its_timeout_is_killed(root: Path) -> None:
    started = time.monotonic()
    done = Sandbox(roots=(root,)).run_blocking(["sleep", "30"], cwd=root, timeout=0.5)
    assert done.timed_out and done.signal == signal.SIGKILL and done.exit_code is None
    assert time.monotonic() - started < 10


@pytest.mark.anyio
async def test_cancelling_the_caller_kills_the_command(root: Path) -> None:
    marker = root / "late"
    with anyio.move_on_after(0.5):
        await Sandbox(roots=(root,)).run(
            ["sh", "-c", f"sleep 3; touch {marker}"], cwd=root, timeout=60
        )
    await anyio.sleep(3.5)
    assert not marker.exists()


def test_network_is_off_unless_allowed(root: Path) -> None:
    probe = ["sh", "-c", "cat /sys/class/net/*/operstate 2>/dev/null | sort -u; ls /sys/class/net"]
    closed = Sandbox(roots=(root,)).run_blocking(probe, cwd=root, timeout=10)
    assert closed.stdout.split()[-1:] == [b"lo"]  # only a loopback, in its own namespace
    opened = Sandbox(roots=(root,), network=True).run_blocking(probe, cwd=root, timeout=10)
    assert set(opened.stdout.split()) == set(
        subprocess.run(probe, capture_output=True, check=True).stdout.split()
    )


def test_hidden_paths_are_empty_inside(root: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("machine example.com password hunter2")
    sandbox = Sandbox(roots=(root,), hidden=(home,))
    done = sandbox.run_blocking(["ls", "-A", str(home)], cwd=root, timeout=10)
    assert done.exit_code == 0 and done.stdout == b""


def test_a_writable_root_inside_a_hidden_path_stays_visible(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    (home / "secret").write_text("s")
    done = Sandbox(roots=(project,), hidden=(home,)).run_blocking(
        ["sh", "-c", "ls -A ..; echo ok > made"], cwd=project, timeout=10
    )
    assert done.exit_code == 0
    assert done.stdout.split() == [b"project"]
    assert (project / "made").read_text() == "ok\n"


def test_the_tmp_directory_is_private(root: Path, tmp_path: Path) -> None:
    (tmp_path / "sibling.txt").write_text("beside the root, under the host's /tmp")
    done = Sandbox(roots=(root,)).run_blocking(
        ["sh", "-c", f"ls {tmp_path}; echo x > /tmp/toolkeeper-private-probe"],
        cwd=root,
        timeout=10,
    )
    assert done.exit_code == 0
    assert done.stdout == b"root\n"  # only the bound root shows; its sibling does not
    assert not Path("/tmp/toolkeeper-private-probe").exists()


def test_an_absent_bwrap_fails_closed(root: Path) -> None:
    sandbox = Sandbox(roots=(root,), bwrap=str(root / "no-bwrap"))
    with pytest.raises(SandboxUnavailable, match="not installed") as raised:
        sandbox.run_blocking(["touch", "ran"], cwd=root, timeout=10)
    assert raised.value.reason == "bwrap not found"
    assert not (root / "ran").exists()


def test_a_sandbox_that_cannot_set_up_fails_closed(root: Path, tmp_path: Path) -> None:
    # bwrap itself fails while mounting: a path to show read-only is not there.
    sandbox = Sandbox(roots=(root,), readable=(tmp_path / "missing",))
    with pytest.raises(SandboxUnavailable, match="could not start") as raised:
        sandbox.run_blocking(["touch", str(root / "ran")], cwd=root, timeout=10)
    assert "Can't find source path" in raised.value.reason
    assert not (root / "ran").exists()


def test_a_root_that_is_gone_fails_closed_before_bwrap(root: Path, tmp_path: Path) -> None:
    sandbox = Sandbox(roots=(root, tmp_path / "missing"))
    with pytest.raises(SandboxUnavailable, match="no longer the directory"):
        sandbox.run_blocking(["touch", str(root / "ran")], cwd=root, timeout=10)
    assert not (root / "ran").exists()


def test_the_operator_can_opt_out_of_failing_closed(root: Path) -> None:
    sandbox = Sandbox(roots=(root,), bwrap=str(root / "no-bwrap"), unsandboxed_fallback=True)
    done = sandbox.run_blocking(["sh", "-c", "touch ran; echo $TERM"], cwd=root, timeout=10)
    assert done.exit_code == 0 and not done.sandboxed
    assert (root / "ran").exists()
    assert done.stdout == b"dumb\n"  # the fixed environment still applies


def test_the_fallback_still_ends_background_processes(root: Path) -> None:
    sandbox = Sandbox(roots=(root,), bwrap=str(root / "no-bwrap"), unsandboxed_fallback=True)
    started = time.monotonic()
    done = sandbox.run_blocking(
        ["sh", "-c", f"(sleep 2; touch {root / 'late'}) & echo started"], cwd=root, timeout=30
    )
    assert done.stdout == b"started\n" and time.monotonic() - started < 5
    time.sleep(2.5)
    assert not (root / "late").exists()


def test_rlimits_bind_inside(root: Path) -> None:
    limits = ResourceLimits(file_bytes=4096, open_files=64)
    done = Sandbox(roots=(root,), limits=limits).run_blocking(
        ["sh", "-c", "ulimit -n; head -c 100000 /dev/zero > big"], cwd=root, timeout=10
    )
    assert done.stdout.strip() == b"64"
    assert (root / "big").stat().st_size == 4096
    assert done.exit_code != 0 or done.signal == signal.SIGXFSZ


def test_no_descriptor_of_the_harness_leaks_in(root: Path) -> None:
    keep = os.open(str(root), os.O_RDONLY)  # inheritable descriptors are not passed
    os.set_inheritable(keep, True)
    try:
        done = Sandbox(roots=(root,)).run_blocking(
            ["sh", "-c", "ls /proc/self/fd"], cwd=root, timeout=10
        )
    finally:
        os.close(keep)
    # 0-2 and the descriptor ls opens to list the directory: nothing else.
    assert done.stdout.split() == [b"0", b"1", b"2", b"3"]
