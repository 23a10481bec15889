"""Attacks on the warm path: a command runs in a sandbox started ahead of it (`Spares`), so
each test checks that what a fresh sandbox guarantees still holds when the sandbox was
waiting before the command came — nothing of one command reaches the next, a timed-out or
cancelled command's background processes die with it, a spare killed from outside is
replaced, the harness's environment stays out, and nothing is left running once the pool
closes. Each runs under real bubblewrap."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from toolkeeper import Harness, Principal, Proposal
from toolkeeper.executors.sandbox import ResourceLimits, Sandbox, SandboxUnavailable, Spares


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def spares() -> Iterator[Spares]:
    pool = Spares()
    yield pool
    pool.close()


def _warm(sandbox: Sandbox, spares: Spares, script: str, root: Path, timeout: float = 10):  # type: ignore[no-untyped-def]
    assert spares.ready(sandbox, root, timeout=30)
    return sandbox.run_blocking(["sh", "-c", script], cwd=root, timeout=timeout, spares=spares)


def _running(marker: str) -> list[int]:
    """Pids of processes (anywhere on the host) whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def _gone(marker: str, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while _running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _spare_pids() -> list[int]:
    """The bwrap processes this test process started: the pool's spares."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            if fields.get("Name") == "bwrap" and int(fields.get("PPid", "0")) == os.getpid():
                pids.append(int(entry))
    return pids


def _state(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "gone"
    return next(line.split()[1] for line in status.splitlines() if line.startswith("State:"))


def test_the_command_runs_in_the_spare_not_a_cold_sandbox(root: Path, spares: Spares) -> None:
    # The launcher is the command's parent: proof the warm path ran it.
    done = _warm(Sandbox(roots=(root,)), spares, "tr '\\0' ' ' < /proc/$PPID/cmdline", root)
    assert b"-I -S -c" in done.stdout and done.exit_code == 0


def test_a_background_sleeper_holding_stdout_dies_on_timeout(root: Path, spares: Spares) -> None:
    marker = f"{1000 + os.getpid() % 1000}.4242"
    started = time.monotonic()
    done = _warm(
        Sandbox(roots=(root,)), spares, f"sleep {marker} & sleep {marker}", root, timeout=1
    )
    assert done.timed_out and done.signal == signal.SIGKILL
    assert time.monotonic() - started < 10
    assert _gone(marker)


def test_a_background_sleeper_outliving_its_command_dies_with_it(
    root: Path, spares: Spares
) -> None:
    marker = f"{1000 + os.getpid() % 1000}.4343"
    done = _warm(Sandbox(roots=(root,)), spares, f"sleep {marker} & echo left", root)
    assert done.exit_code == 0 and done.stdout == b"left\n" and not done.timed_out
    assert _gone(marker)


def test_the_next_command_sees_nothing_of_the_previous_ones_tmp(root: Path, spares: Spares) -> None:
    sandbox = Sandbox(roots=(root,))
    first = _warm(sandbox, spares, "echo mine > /tmp/left-behind; ls /tmp", root)
    assert b"left-behind" in first.stdout
    second = _warm(sandbox, spares, "ls -A /tmp; cat /tmp/left-behind", root)
    assert b"left-behind" not in second.stdout and second.exit_code != 0


def test_a_process_of_one_command_is_not_visible_to_the_next(root: Path, spares: Spares) -> None:
    sandbox = Sandbox(roots=(root,))
    marker = f"{1000 + os.getpid() % 1000}.4444"
    _warm(sandbox, spares, f"(sleep {marker} &) ; echo started", root)
    seen = _warm(sandbox, spares, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '", root)
    assert marker.encode() not in seen.stdout


def test_a_spare_killed_from_outside_is_replaced_and_the_command_runs(
    root: Path, spares: Spares
) -> None:
    sandbox = Sandbox(roots=(root,))
    assert spares.ready(sandbox, root, timeout=30)
    killed = _spare_pids()  # with any spare of an earlier test not yet reaped
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in killed:  # dead (a zombie until reaped), not merely signalled
        while _state(pid) not in ("Z", "gone"):
            time.sleep(0.01)
    done = sandbox.run_blocking(["sh", "-c", "echo ran"], cwd=root, timeout=10, spares=spares)
    assert done.exit_code == 0 and done.stdout == b"ran\n"
    assert spares.ready(sandbox, root, timeout=30)  # a new spare took its place
    again = _warm(sandbox, spares, "tr '\\0' ' ' < /proc/$PPID/cmdline", root)
    assert b"-I -S -c" in again.stdout


def test_with_no_sandbox_possible_the_warm_path_fails_closed(root: Path, spares: Spares) -> None:
    sandbox = Sandbox(roots=(root,), bwrap="/nonexistent/bwrap")
    assert not spares.ready(sandbox, root, timeout=30)
    marker = root / "ran"
    with pytest.raises(SandboxUnavailable):
        sandbox.run_blocking(["touch", str(marker)], cwd=root, timeout=10, spares=spares)
    assert not marker.exists()


def test_the_harness_environment_is_unreadable(
    root: Path, spares: Spares, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLKEEPER_WARM_TOKEN", "tk-warm-secret-24680")
    script = "env; cat /proc/*/environ; cat /proc/$PPID/environ"
    done = _warm(Sandbox(roots=(root,)), spares, script, root)
    assert b"PATH=" in done.stdout and b"tk-warm-secret-24680" not in done.stdout


def test_each_command_gets_its_own_environment_from_a_shared_spec(
    root: Path, spares: Spares
) -> None:
    # Environments are handed per command, so two sandboxes differing only there share a
    # spare spec — and neither sees the other's variable.
    one = Sandbox(roots=(root,), environment={"TK_WHO": "one"})
    two = Sandbox(roots=(root,), environment={"TK_WHO": "two"})
    assert one.spare_key(root) == two.spare_key(root)
    assert _warm(one, spares, "echo $TK_WHO", root).stdout == b"one\n"
    assert _warm(two, spares, "echo $TK_WHO", root).stdout == b"two\n"


def test_the_command_holds_only_its_own_descriptors(root: Path, spares: Spares) -> None:
    done = _warm(Sandbox(roots=(root,)), spares, "ls /proc/self/fd", root)
    assert done.stdout.split() == [b"0", b"1", b"2", b"3"]  # 3: ls's own directory


def test_limits_set_at_spare_start_bind_the_command(root: Path, spares: Spares) -> None:
    sandbox = Sandbox(roots=(root,), limits=ResourceLimits(open_files=77, processes=32))
    assert spares.ready(sandbox, root, timeout=30)
    done = sandbox.run_blocking(
        ["bash", "-c", "ulimit -n; ulimit -u"], cwd=root, timeout=10, spares=spares
    )
    assert done.stdout == b"77\n32\n"


@pytest.mark.anyio
async def test_a_cancelled_command_is_killed_with_its_background(
    root: Path, spares: Spares
) -> None:
    sandbox = Sandbox(roots=(root,))
    marker = f"{1000 + os.getpid() % 1000}.4545"
    assert spares.ready(sandbox, root, timeout=30)
    with anyio.move_on_after(1):
        await sandbox.run(
            ["sh", "-c", f"sleep {marker} & sleep {marker}"],
            cwd=root,
            timeout=60,
            spares=spares,
        )
    assert _gone(marker)


def test_closing_the_pool_leaves_no_sandbox_running(root: Path) -> None:
    before = set(_spare_pids())  # an earlier test's pool may still be refilling
    pool = Spares()
    sandbox = Sandbox(roots=(root,))
    assert pool.ready(sandbox, root, timeout=30)
    mine = set(_spare_pids()) - before
    assert mine
    pool.close()
    assert _wait_for(lambda: not mine & set(_spare_pids()), within=5)


_EXIT_WHILE_STARTING = """
import sys, time
from pathlib import Path
from toolkeeper.executors.sandbox import Sandbox, Spares
root = Path(sys.argv[1])
pool = Spares()
pool.prepare(Sandbox(roots=(root,)), root)
time.sleep(float(sys.argv[2]))
pool.close()
"""


def test_a_process_exiting_while_a_spare_starts_leaves_no_sandbox_behind(root: Path) -> None:
    """A pool closed while its thread is half-way through starting a spare, by a process
    that exits right after: close waits for that start and kills the spare. Before, the
    interpreter exited with bwrap half set up, and its child in the new namespaces was left
    waiting forever (parent pid 1) about once in 60 exits."""
    pool = Spares()
    pool.prepare(Sandbox(roots=(root,)), root)
    starter = pool._tasks
    assert starter is not None
    pool.close()  # while its thread starts the spare
    assert not starter._thread.is_alive()  # close waited for that start to end
    assert _gone(str(root))

    source = str(Path(__file__).parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": source}
    for n in range(8):
        delay = (n % 8) * 0.002  # across bwrap's set-up: from before its clone to after
        subprocess.run(
            [sys.executable, "-c", _EXIT_WHILE_STARTING, str(root), str(delay)],
            env=env,
            check=True,
            timeout=60,
        )
        assert _gone(str(root)), n  # a half-set-up child would wait forever


def _wait_for(condition: Callable[[], bool], within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_closing_the_harness_ends_its_spares_and_using_it_again_restarts_them(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    before = set(_spare_pids())  # an earlier test's pool may still be refilling
    harness = Harness(home=tmp_path / ".toolkeeper")
    harness.register_shell(roots=[repo], timeout=30)
    assert _wait_for(lambda: bool(set(_spare_pids()) - before))  # started at registration
    first = set(_spare_pids()) - before
    harness.close()
    assert _wait_for(lambda: not first & set(_spare_pids()), within=5)
    done = harness.invoke_sync(
        Proposal("again", "shell", {"command": "echo back"}), principal=Principal("alice")
    )
    assert done.structured_content is not None
    assert done.structured_content["stdout"] == "back\n"
    assert _wait_for(lambda: bool(set(_spare_pids()) - before - first))
    again = set(_spare_pids()) - before - first
    harness.close()
    assert _wait_for(lambda: not again & set(_spare_pids()), within=5)


def test_a_background_process_detached_from_the_output_dies_as_the_command_returns(
    root: Path, spares: Spares
) -> None:
    # Nothing holds the output, so the run ends at the status: the launcher does not exit by
    # itself after reporting, the host kills the sandbox as it returns.
    marker = f"{1000 + os.getpid() % 1000}.4646"
    script = f"sleep {marker} </dev/null >/dev/null 2>&1 & echo detached"
    done = _warm(Sandbox(roots=(root,)), spares, script, root)
    assert done.exit_code == 0 and done.stdout == b"detached\n"
    assert _gone(marker)


def test_a_command_whose_launcher_dies_under_it_is_not_run_again(
    root: Path, spares: Spares
) -> None:
    # The launcher acknowledged the command (through its pipe) before running it, so the
    # host knows it may have run and reports the killed sandbox instead of running it cold.
    script = "echo ran >> runs; kill -9 $PPID; sleep 5"
    done = _warm(Sandbox(roots=(root,)), spares, script, root)
    assert done.signal == signal.SIGKILL and done.exit_code is None
    assert (root / "runs").read_text() == "ran\n"


def test_a_root_whose_parent_became_a_symlink_fails_closed_on_the_warm_path(
    tmp_path: Path, spares: Spares
) -> None:
    parent = tmp_path / "parent"
    (parent / "root").mkdir(parents=True)
    sandbox = Sandbox(roots=(parent / "root",))
    assert spares.ready(sandbox, parent / "root", timeout=30)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "root").mkdir(parents=True)
    parent.rename(tmp_path / "moved")
    parent.symlink_to(elsewhere)  # the root's path now leads to another directory
    marker = parent / "root" / "ran"
    with pytest.raises(SandboxUnavailable):
        sandbox.run_blocking(["touch", str(marker)], cwd=parent / "root", timeout=10, spares=spares)
    assert not (elsewhere / "root" / "ran").exists()
    assert not (tmp_path / "moved" / "root" / "ran").exists()


def test_a_working_directory_reached_through_a_symlink_is_resolved(
    root: Path, spares: Spares
) -> None:
    (root / "real").mkdir()
    (root / "link").symlink_to(root / "real")
    sandbox = Sandbox(roots=(root,))
    assert spares.ready(sandbox, root, timeout=30)
    done = sandbox.run_blocking(["pwd"], cwd=root / "link", timeout=10, spares=spares)
    assert done.stdout == f"{root / 'real'}\n".encode()
    assert b"-I -S -c" in _warm(sandbox, spares, "tr '\\0' ' ' < /proc/$PPID/cmdline", root).stdout


def test_arguments_and_environment_reach_the_command_byte_for_byte(
    root: Path, spares: Spares
) -> None:
    # The request separates fields with NUL bytes: empty arguments, newlines, '=' in values
    # and undecodable bytes must come through as they were given.
    odd = os.fsdecode(b"caf\xe9")
    sandbox = Sandbox(roots=(root,), environment={"TK_ODD": "a=b\nc", "TK_EMPTY": ""})
    assert spares.ready(sandbox, root, timeout=30)
    argv = ["printf", "[%s]\\n", "", "two words", "line\nbreak", odd, "x=y"]
    done = sandbox.run_blocking(argv, cwd=root, timeout=10, spares=spares)
    assert done.stdout == b"[]\n[two words]\n[line\nbreak]\n[caf\xe9]\n[x=y]\n"
    env = _warm(sandbox, spares, 'printf "%s|%s|" "$TK_ODD" "${TK_EMPTY-unset}"', root)
    assert env.stdout == b"a=b\nc||"


def test_a_nul_byte_or_a_bad_variable_name_is_refused_as_by_subprocess(
    root: Path, spares: Spares
) -> None:
    assert spares.ready(Sandbox(roots=(root,)), root, timeout=30)
    with pytest.raises(ValueError):
        Sandbox(roots=(root,)).run_blocking(
            ["touch", "ran\0x"], cwd=root, timeout=10, spares=spares
        )
    bad = Sandbox(roots=(root,), environment={"A=B": "c"})
    assert spares.ready(bad, root, timeout=30)
    with pytest.raises(ValueError):
        bad.run_blocking(["touch", "ran"], cwd=root, timeout=10, spares=spares)
    assert not (root / "ran").exists()
