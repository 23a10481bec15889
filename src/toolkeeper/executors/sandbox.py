"""Running one argv under bubblewrap: the only place a shell command or a CLI tool touches
the host, and the one copy of toolkeeper's bubblewrap flags. `BwrapSpec` spells out one
bubblewrap command line from an explicit spec; every sandbox in toolkeeper is built from one:
a `Sandbox` (shell commands, CLI tools and, through `Sandbox.command`, sandboxed stdio
upstreams) and Code Mode's CPython tier (`toolkeeper.codemode.cpython`, which starts from
`minimal_root` instead of the host and adds a seccomp filter).

A `Sandbox` is the whole of what a command may do: the host's filesystem read-only, its
writable roots bound read-write, a private ``/tmp``, no network unless allowed, an
environment of a few fixed variables (nothing inherited: the harness's credentials live in
its environment), its own pid namespace (so it sees, and can signal, only its own
processes), rlimits, and a process count capped by a pids cgroup where one is writable.

Lifetime: the command is done when its main process exits, its time runs out or its caller
cancels. Whatever remains then — a background ``sleep 100 &``, a fork bomb's children — dies
with it: killing bwrap's outer process kills the namespace's init (``--die-with-parent``),
and the kernel kills every process of a pid namespace whose init dies.

Warm sandboxes: starting bubblewrap (namespaces, mounts) takes tens of milliseconds, and
tearing its namespaces down more, against a millisecond or two for the command itself. So
the shell runs each command in a sandbox started ahead (`Spares`): one spare per sandbox
spec, started and confined off the command's path, whose launcher is handed the argv, the
working directory, the environment and the command's own stdin, stdout and stderr over a
unix socket, and reports the exit status itself — the caller returns as soon as the output
has ended and the status is in, killing the sandbox as it does, and the sandbox is torn down
after, by a reaper thread, while the pool starts the next spare. A spare serves one command:
nothing of a command is in the sandbox the next one gets.

Fail closed: when bubblewrap cannot start (absent, no user namespaces, a root that does not
exist), nothing runs and `SandboxUnavailable` says why — unless the operator set
``unsandboxed_fallback=True``, in which case the command runs as a plain process group and
the result says ``sandboxed: false`` (seed 000 §8; Claude Code's sandbox fails open by
default, which is the hole this closes).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import queue
import resource
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import anyio
import anyio.to_thread

from toolkeeper.errors import ConfigError, ToolkeeperError

BWRAP = "/usr/bin/bwrap"
PATH = "/usr/local/bin:/usr/bin:/bin"
CAPTURE_LIMIT = 16 * 1024 * 1024
"""Bytes of each stream kept by default; the rest is counted and dropped, so a command that
writes without end cannot exhaust the harness's memory."""
_PIDS_CGROUP = Path("/sys/fs/cgroup/pids")
_POLL = 0.05
"""Seconds between checks of the deadline and the cancel flag while output is quiet."""
_READ = 65536
_LINGER = 2.0
"""Seconds to keep reading after the main process ended, for output still in the pipes."""


class SandboxUnavailable(ToolkeeperError):
    """Raised when bubblewrap cannot start the command, so nothing ran; `reason` says why."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ResourceLimits:
    """Per-command rlimits, set in the child before bubblewrap starts (and so inherited by
    everything the command runs). `processes` is also the pids cgroup's cap where one is
    writable: RLIMIT_NPROC counts per user and does not bind root."""

    cpu_seconds: int = 120
    memory_bytes: int = 4 * 1024**3
    file_bytes: int = 1024**3
    open_files: int = 1024
    processes: int = 512

    def rlimits(self) -> dict[str, int]:
        """The limits by their `resource` names, core dumps off: what `apply` sets, and what
        Code Mode's CPython runner sets on itself inside its sandbox (where toolkeeper is
        not importable, so it receives them as data)."""
        return {
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_AS": self.memory_bytes,
            "RLIMIT_FSIZE": self.file_bytes,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_CORE": 0,
        }

    def apply(self, pid: int | None = None) -> None:
        """Set the limits on process `pid`, or on the calling process when None (the
        fallback's child, between fork and exec)."""
        for name, value in self.rlimits().items():
            which = getattr(resource, name)
            if pid is None:
                resource.setrlimit(which, (value, value))
            else:
                resource.prlimit(pid, which, (value, value))


@dataclass(frozen=True, slots=True)
class Completed:
    """How one command ended. The exit code is what the command said; `timed_out` and
    `cancelled` say that we ended it (its `signal` is then SIGKILL)."""

    argv: tuple[str, ...]
    exit_code: int | None
    """None when the command was killed before it exited on its own."""
    signal: int | None
    """The signal that ended the main process. Under bubblewrap a status of 128+N is read as
    signal N, the convention shells use (bwrap reports a signalled child that way)."""
    duration: float
    stdout: bytes
    stderr: bytes
    stdout_bytes: int
    """Every byte the command wrote to stdout, kept or not."""
    stderr_bytes: int
    timed_out: bool = False
    cancelled: bool = False
    sandboxed: bool = True


MountKind = Literal["ro-bind", "ro-bind-try", "bind", "tmpfs", "symlink"]


@dataclass(frozen=True, slots=True)
class Mount:
    """One bubblewrap filesystem operation at `target`. A bind's `source` defaults to the
    target itself (the host's path shown at the same place); a symlink's `source` is what the
    link says. Mounts stack in order: a later one covers an earlier one at or above it."""

    kind: MountKind
    target: str
    source: str = ""

    def args(self) -> list[str]:
        """This mount as bwrap arguments."""
        if self.kind == "tmpfs":
            return ["--tmpfs", self.target]
        return [f"--{self.kind}", self.source or self.target, self.target]


HOST_ROOT: tuple[Mount, ...] = (Mount("ro-bind", "/"),)
"""The whole host, read-only: a shell command sees the programs and libraries it expects."""


def minimal_root() -> tuple[Mount, ...]:
    """``/usr`` read-only, and the top-level program and library directories as this host
    has them (a symlink into ``/usr`` where the host merged them, else a read-only bind):
    enough to run an installed program, and no host file outside them."""
    mounts = [Mount("ro-bind", "/usr")]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            mounts.append(Mount("symlink", top, os.readlink(top)))
        elif os.path.isdir(top):
            mounts.append(Mount("ro-bind", top))
    return tuple(mounts)


@dataclass(frozen=True, slots=True)
class BwrapSpec:
    """One bubblewrap command line, every choice explicit.

    Always, whatever the spec: a new session, death with the caller (``--die-with-parent``),
    a user namespace whose process has every capability dropped and may create no nested
    user namespace (as root, bwrap would otherwise leave the command its capabilities, and a
    capable process can remount a read-only root writable), its own pid, IPC, UTS and
    (where possible) cgroup namespaces, ``/dev``, ``/proc`` with the kernel's knobs
    (``/proc/sys``, ``/proc/sysrq-trigger``) read-only, and a private ``/tmp``. Everything
    else is the spec's: the filesystem it starts from (`base`), what is shown on top
    (`mounts`), the network, the uid, and the descriptors bwrap is handed.

    The environment is not part of the command line: a command line is readable by every
    local user in ``/proc/PID/cmdline``, so the caller starts bwrap with the command's whole
    environment (bwrap passes it on) and names in `unset` what bwrap drops from it.
    """

    base: tuple[Mount, ...]
    """The filesystem the sandbox starts from, mounted before ``/dev``, ``/proc`` and
    ``/tmp``: `HOST_ROOT` or `minimal_root()`."""
    mounts: tuple[Mount, ...] = ()
    """Mounted after the private ``/tmp``, in order (so a path under ``/tmp`` shows)."""
    network: bool = False
    uid: int | None = None
    """The uid and gid inside the user namespace (65534: nobody); None keeps the caller's."""
    tmp_bytes: int | None = None
    """The private ``/tmp``'s size; None: the kernel's default for a tmpfs."""
    remount_root_read_only: bool = False
    """Remount ``/`` read-only once everything is mounted: under `minimal_root` the root is
    a tmpfs bwrap made, writable until then."""
    chdir: str | None = None
    unset: tuple[str, ...] = ()
    seccomp_fd: int | None = None
    """A descriptor holding a classic-BPF program bwrap installs before it runs the command."""
    status_fd: int | None = None
    """bwrap reports the child's start and exit code there, as JSON lines."""
    block_fd: int | None = None
    """bwrap's child waits for a byte there before it runs anything."""
    command_is_init: bool = False
    """Run the command as the pid namespace's init (``--as-pid-1``) instead of under an init
    of bwrap's: one process fewer to start, for a command that starts no process itself. Such
    an init ignores every signal it has no handler for, but SIGKILL from outside the
    namespace (the parent-death signal, the kernel's hard limits)."""
    bwrap: str = BWRAP

    def argv(self, command: Sequence[str]) -> list[str]:
        """The bwrap command line that runs `command`."""
        args = [self.bwrap, "--die-with-parent", "--new-session"]
        args += ["--unshare-user", "--disable-userns"]
        if self.uid is not None:
            args += ["--uid", str(self.uid), "--gid", str(self.uid)]
        args += ["--cap-drop", "ALL"]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if self.command_is_init:
            args.append("--as-pid-1")
        if not self.network:
            args.append("--unshare-net")
        for mount in self.base:
            args += mount.args()
        args += ["--dev", "/dev", "--proc", "/proc"]
        # bwrap does not always cover the kernel's knobs; a uid-0 process may write them.
        args += ["--ro-bind", "/proc/sys", "/proc/sys"]
        args += ["--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
        if self.tmp_bytes is not None:
            args += ["--size", str(self.tmp_bytes)]
        args += ["--tmpfs", "/tmp"]
        for mount in self.mounts:
            args += mount.args()
        if self.remount_root_read_only:
            args += ["--remount-ro", "/"]
        for name in self.unset:
            args += ["--unsetenv", name]
        for flag, value in (
            ("--chdir", self.chdir),
            ("--json-status-fd", self.status_fd),
            ("--block-fd", self.block_fd),
            ("--seccomp", self.seccomp_fd),
        ):
            if value is not None:
                args += [flag, str(value)]
        return [*args, "--", *command]


def kill_process_tree(pid: int) -> None:
    """SIGKILL the process group `pid` leads (bwrap, started with ``start_new_session``).
    Under bwrap that ends the whole sandbox: its namespace's init dies with bwrap
    (``--die-with-parent``), and the kernel kills every process of a pid namespace whose
    init dies."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class Sandbox:
    """Where commands run: writable `roots`, `network` or not, `limits`, and a fixed
    environment (``PATH``, ``HOME``, ``LANG``, ``TMPDIR``, ``TERM`` plus `environment`).

    `hidden` paths (the user's home by default: keys, tokens, shell history) are covered by
    an empty tmpfs; a writable root inside one is bound again on top. `unsandboxed_fallback`
    is the operator's explicit opt-out of failing closed (see the module docstring).
    """

    roots: tuple[Path, ...]
    network: bool = False
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    environment: Mapping[str, str] = field(default_factory=dict)
    hidden: tuple[Path, ...] = field(default_factory=lambda: (Path.home(),))
    unsandboxed_fallback: bool = False
    bwrap: str = BWRAP
    capture_limit: int = CAPTURE_LIMIT
    readable: tuple[Path, ...] = ()
    """Paths under the private /tmp or a hidden path to show read-only (a program's
    installation in a temporary directory, say)."""

    def __post_init__(self) -> None:
        resolved = tuple(Path(os.path.realpath(root)) for root in self.roots)
        for root in resolved:
            outer = [other for other in resolved if other in root.parents]
            if outer:
                # A command could replace the inner root with a symlink, and the next
                # sandbox would bind whatever it points to writable.
                raise ConfigError(
                    f"writable root {root} lies inside writable root {outer[0]}; give only "
                    f"{outer[0]}",
                    key="roots",
                    value=str(root),
                )
        object.__setattr__(self, "roots", resolved)
        for name in ("hidden", "readable"):
            paths = tuple(Path(os.path.realpath(p)) for p in getattr(self, name))
            object.__setattr__(self, name, paths)
        object.__setattr__(self, "environment", dict(self.environment))

    def env(self, *, pty: bool = False) -> dict[str, str]:
        """The command's whole environment: nothing is inherited from the harness."""
        home = str(self.roots[0]) if self.roots else "/tmp"
        base = {
            "PATH": PATH,
            "HOME": home,
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
            "TERM": "xterm-256color" if pty else "dumb",
        }
        return base | dict(self.environment)

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: str | Path | None,
        status_fd: int | None = None,
        block_fd: int | None = None,
        unset: Sequence[str] = (),
    ) -> list[str]:
        """The bwrap command line that runs `argv` in `cwd` (None: where bwrap starts), to
        be started with `env()` as its environment (`unset` names bwrap drops from it).
        Given `status_fd`, bwrap reports the child's start and exit code there as JSON
        lines; given `block_fd`, its child waits for a byte there before it runs anything."""
        # Mounts stack in order: a hidden path outside the roots is covered before the roots
        # are bound (a root inside it shows through), one inside a root after (it stays
        # covered, e.g. the harness's ledger in a project directory).
        mounts: list[Mount] = []
        hidden = [p for p in self.hidden if p.is_dir() and p != Path("/")]
        for path in hidden:
            if not self._writable(path):
                mounts.append(Mount("tmpfs", str(path)))
        where = Path(os.path.realpath(cwd)) if cwd is not None else None
        shown = [*self.readable, *([where] if where is not None else [])]
        for path in shown:
            if not self._writable(path) and self._masked(path):
                mounts.append(Mount("ro-bind", str(path)))  # stays visible, read-only
        mounts += [Mount("bind", str(root)) for root in self.roots]
        mounts += [Mount("tmpfs", str(path)) for path in hidden if self._writable(path)]
        spec = BwrapSpec(
            base=HOST_ROOT,
            mounts=tuple(mounts),
            network=self.network,
            chdir=str(where) if where is not None else None,
            unset=tuple(unset),
            status_fd=status_fd,
            block_fd=block_fd,
            bwrap=self.bwrap,
        )
        return spec.argv(argv)

    def _check_roots(self) -> None:
        """Every root must still be the directory it was: bwrap binds whatever a path
        leads to, so a root replaced by a symlink (or a file) would bind that writable."""
        for root in self.roots:
            if not _intact(root):
                raise SandboxUnavailable(
                    f"writable root {root} is no longer the directory it was (missing, a "
                    "file or a symlink), so the command did not run",
                    reason=f"writable root {root} changed",
                )

    def _writable(self, path: Path) -> bool:
        return any(path == root or root in path.parents for root in self.roots)

    def _masked(self, path: Path) -> bool:
        covered = (Path("/tmp"), *self.hidden)
        return any(path == top or top in path.parents for top in covered)

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | Path,
        timeout: float,
        stdin: bytes | None = None,
        pty: bool = False,
        spares: Spares | None = None,
    ) -> Completed:
        """Run `argv` and wait for it, killing it (and everything it started) when
        `timeout` seconds pass or the caller is cancelled. Raises `SandboxUnavailable` when
        the sandbox cannot start and no fallback is allowed; nothing ran then. Given
        `spares`, the command runs in a sandbox started ahead (see `Spares`)."""
        cancel, finished = threading.Event(), threading.Event()

        def work() -> Completed:
            try:
                return self.run_blocking(
                    argv,
                    cwd=cwd,
                    timeout=timeout,
                    stdin=stdin,
                    pty=pty,
                    cancel=cancel,
                    spares=spares,
                )
            finally:
                finished.set()

        try:
            return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            # The worker kills the process tree at its next poll; the caller learns of the
            # cancellation only once nothing of the command is left running.
            cancel.set()
            with anyio.CancelScope(shield=True):
                while not finished.is_set():
                    await anyio.sleep(_POLL / 2)
            raise

    def run_blocking(
        self,
        argv: Sequence[str],
        *,
        cwd: str | Path,
        timeout: float,
        stdin: bytes | None = None,
        pty: bool = False,
        cancel: threading.Event | None = None,
        spares: Spares | None = None,
    ) -> Completed:
        """`run`, on the calling thread; `cancel` ends the command when set."""
        if not argv:
            raise ValueError("argv is empty; give the program and its arguments")
        try:
            if spares is not None:
                self._check_roots()
                where = _resolved(cwd)
                spare = spares.take(self, where, started=time.monotonic(), cancel=cancel)
                if spare is not None:
                    try:
                        done = self._run_warm(spare, argv, where, timeout, stdin, pty, cancel)
                    finally:
                        # Killed now; torn down and replaced off the command's path.
                        spares.replace(self, spare)
                    if done is not None:
                        return done
            return self._run(argv, cwd, timeout, stdin, pty, cancel, sandboxed=True)
        except SandboxUnavailable:
            if not self.unsandboxed_fallback:
                raise
            return self._run(argv, cwd, timeout, stdin, pty, cancel, sandboxed=False)

    def spare_key(self, cwd: str | Path) -> tuple[object, ...] | None:
        """What a spare sandbox for a command in `cwd` must have been started with — its
        bwrap command line (roots, network, hidden and shown paths), limits and launcher —
        or None when no spare can serve it: `cwd` needs a mount of its own (a directory
        under a hidden path or ``/tmp``), or no Python the sandbox can see runs the
        launcher."""
        where = Path(os.path.realpath(cwd))
        if not self._writable(where) and self._masked(where):
            return None
        python = self._launcher_python()
        if python is None:
            return None
        return (tuple(self.command([python], cwd=None)), self.limits)

    def _launcher_python(self) -> str | None:
        """An interpreter the sandbox shows for the launcher: this one, else the system's
        ``python3`` (a virtualenv or pyenv under the home is hidden in the sandbox)."""
        for path in _pythons():
            if self._writable(path) or not self._masked(path):
                return str(path)
        return None

    def _run_warm(
        self,
        spare: _Spare,
        argv: Sequence[str],
        where: str,
        timeout: float,
        stdin: bytes | None,
        pty: bool,
        cancel: threading.Event | None,
    ) -> Completed | None:
        """Run `argv` in `spare`: hand its launcher the argv, working directory `where`
        (resolved), environment, the command's own stdin, stdout and stderr and an
        acknowledgement pipe, read the output to its end and take the exit status the
        launcher reports. None when the spare died before accepting the command (nothing
        ran; the caller starts one cold). The spare is spent either way: the caller has it
        killed as this returns, and torn down and replaced off this path, once the result is
        built (`Spares.replace`), so neither competes with the command."""
        with contextlib.ExitStack() as stack:
            if stdin is None:
                input_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
                stack.callback(_close, input_fd)
            else:
                input_fd = stack.enter_context(_stdin_file(stdin)).fileno()
            if pty:
                out_read, out_write = os.openpty()
            else:
                out_read, out_write = os.pipe()
            err_read, err_write = os.pipe()
            ack_read, ack_write = os.pipe()
            for fd in (out_read, err_read, ack_read):
                stack.callback(_close, fd)
            request = _request(argv, where, self.env(pty=pty))
            started = time.monotonic()
            try:
                socket.send_fds(
                    spare.control, [request], [input_fd, out_write, err_write, ack_write]
                )
            except OSError:
                return None  # the launcher is gone: nothing was handed over
            finally:
                for fd in (out_write, err_write, ack_write):
                    _close(fd)
            reader = _WarmReader(spare, out_read, err_read, self.capture_limit)
            ended = reader.collect(started + timeout, cancel)
            duration = time.monotonic() - started
            accepted = _acknowledged(ack_read)
        if reader.failure is not None:
            raise SandboxUnavailable(
                f"the sandbox could not start the command, so it did not run: {reader.failure}",
                reason=reader.failure,
            )
        if not accepted:
            return None
        exit_code: int | None = None
        signal_number: int | None = None
        if ended is not None or reader.status is None:
            signal_number = int(signal.SIGKILL)  # we ended it, or the sandbox was killed
        elif reader.status < 0:
            signal_number = -reader.status
        else:
            exit_code = reader.status
        return _completed(argv, reader, ended, duration, exit_code, signal_number)

    def _run(
        self,
        argv: Sequence[str],
        cwd: str | Path,
        timeout: float,
        stdin: bytes | None,
        pty: bool,
        cancel: threading.Event | None,
        *,
        sandboxed: bool,
    ) -> Completed:
        if sandboxed:
            self._check_roots()
        if sandboxed and shutil.which(self.bwrap) is None:
            raise SandboxUnavailable(
                f"bubblewrap ({self.bwrap}) is not installed, so the command did not run; "
                "install bubblewrap (apt-get install bubblewrap)",
                reason="bwrap not found",
            )
        with contextlib.ExitStack() as stack:
            group = stack.enter_context(_ProcessGroup.create(self.limits.processes))
            input_file = stack.enter_context(_stdin_file(stdin))
            status_read, status_write = os.pipe()
            block_read, block_write = os.pipe()
            stack.callback(_close, status_read)
            stack.callback(_close, block_write)
            master = slave = None
            if pty:
                master, slave = os.openpty()
                stack.callback(_close, master)
            limits = self.limits

            def prepare() -> None:  # the fallback's child, between fork and exec
                limits.apply()
                group.join()

            if sandboxed:
                command = self.command(argv, cwd=cwd, status_fd=status_write, block_fd=block_read)
            else:
                command = list(argv)
            started = time.monotonic()
            try:
                # No preexec_fn under bwrap: it forces a full fork of this process (tens of
                # milliseconds); the limits are set on bwrap's child while it waits instead.
                process = subprocess.Popen(
                    command,
                    stdin=input_file,
                    stdout=slave if slave is not None else subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=None if sandboxed else cwd,
                    # The whole environment, given to bwrap (which passes it on) rather than
                    # as --setenv arguments: a command line is readable by every local user
                    # in /proc/PID/cmdline, and `environment` may hold a token.
                    env=self.env(pty=pty),
                    start_new_session=True,
                    pass_fds=(status_write, block_read) if sandboxed else (),
                    preexec_fn=None if sandboxed else prepare,
                )
            except OSError as exc:
                if sandboxed:
                    raise SandboxUnavailable(
                        f"bubblewrap could not be started ({exc}), so the command did not run",
                        reason=str(exc),
                    ) from exc
                raise
            finally:
                for fd in (status_write, block_read, slave):
                    if fd is not None:
                        _close(fd)
            early, released = b"", not sandboxed
            if sandboxed:
                early, released = _confine(
                    status_read, block_write, process.pid, limits, group, started + timeout
                )
            reader = _Reader(process, master, status_read, self.capture_limit, early)
            ended = reader.collect(started + timeout, cancel, group)
            duration = time.monotonic() - started
        code = process.returncode
        status = reader.status
        # The command did not run when bwrap's child was never released from the block fd,
        # or when bwrap reported no exit code and said why itself (its setup failed after
        # the release: a mount, the uid map). bwrap prints nothing once the command runs.
        unstarted = not released or reader.stderr.startswith(b"bwrap: ")
        if sandboxed and ended is None and "exit-code" not in status and unstarted:
            message = reader.stderr.decode("utf-8", "replace").strip() or (
                f"bwrap ended ({_described_status(code)}) before starting the command"
            )
            raise SandboxUnavailable(
                f"the sandbox could not start, so the command did not run: {message}",
                reason=message,
            )
        exit_code: int | None = None
        signal_number: int | None = None
        if ended is not None:
            signal_number = int(signal.SIGKILL)
        elif code is not None and code < 0:
            signal_number = -code
        elif code is not None:
            told = status.get("exit-code")
            reported = told if isinstance(told, int) else code
            if sandboxed and reported > 128:
                signal_number = reported - 128
            else:
                exit_code = reported
        return _completed(
            argv, reader, ended, duration, exit_code, signal_number, sandboxed=sandboxed
        )


def _completed(
    argv: Sequence[str],
    reader: _Output,
    ended: str | None,
    duration: float,
    exit_code: int | None,
    signal_number: int | None,
    *,
    sandboxed: bool = True,
) -> Completed:
    """What a run came to, from either path's reader: the cold and the warm run differ in how
    they learn the status, not in what they report."""
    return Completed(
        argv=tuple(argv),
        exit_code=exit_code,
        signal=signal_number,
        duration=duration,
        stdout=bytes(reader.stdout),
        stderr=bytes(reader.stderr),
        stdout_bytes=reader.stdout_bytes,
        stderr_bytes=reader.stderr_bytes,
        timed_out=ended == "timeout",
        cancelled=ended == "cancel",
        sandboxed=sandboxed,
    )


@functools.cache
def _pythons() -> tuple[Path, ...]:
    """This interpreter and the system's ``python3``, symlinks resolved: found once, as
    resolving them costs more than the rest of handing a command to a spare."""
    found = (sys.executable, shutil.which("python3", path=PATH))
    return tuple(Path(os.path.realpath(candidate)) for candidate in found if candidate)


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


@contextlib.contextmanager
def _stdin_file(data: bytes | None) -> Iterator[IO[bytes]]:
    """Stdin as a file, never a pipe we must feed: a command that never reads it cannot
    block us, and one that reads it all gets it all. None: ``/dev/null``."""
    if data is None:
        with open(os.devnull, "rb") as null:
            yield null
        return
    with tempfile.TemporaryFile() as handle:
        handle.write(data)
        handle.seek(0)
        yield handle


def _intact(root: Path) -> bool:
    """Whether `root` is still a directory reached through no symlink: opened without
    following a symlink at its end, the path the kernel gives for the open directory must
    be `root` itself (an intermediate symlink would show as its target). Three system calls,
    against one per path component for `os.path.realpath`, which stands in where the
    directory cannot be opened or ``/proc`` is not mounted."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except PermissionError:
        return os.path.realpath(root) == str(root) and root.is_dir() and not root.is_symlink()
    except OSError:  # gone, a symlink (ELOOP) or not a directory
        return False
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == str(root)
    except OSError:
        return os.path.realpath(root) == str(root) and root.is_dir() and not root.is_symlink()
    finally:
        os.close(fd)


def _resolved(path: str | Path) -> str:
    """`os.path.realpath(path)` for a path that exists, in three system calls (the kernel's
    name for the path opened) rather than one per component."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return os.path.realpath(path)
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    finally:
        os.close(fd)


def _request(argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> bytes:
    """What the launcher is sent: the working directory, the number of arguments, the
    arguments and the environment's ``NAME=value`` entries, separated by NUL bytes (which
    none of them can hold: the kernel's own argv and environment are NUL-terminated).
    Raises ValueError on a NUL or on ``=`` in a name, as `subprocess` does."""
    fields = [os.fsencode(cwd), str(len(argv)).encode()]
    fields += [os.fsencode(arg) for arg in argv]
    for name, value in env.items():
        if "=" in name or not name:
            raise ValueError(f"illegal environment variable name: {name!r}")
        fields.append(os.fsencode(f"{name}={value}"))
    if any(b"\0" in field for field in fields):
        raise ValueError("embedded null byte")
    return b"\0".join(fields)


def _acknowledged(ack: int) -> bool:
    """Whether the launcher wrote its acknowledgement into the pipe `ack` reads (it does
    before anything that could run the command); read once the command is over."""
    os.set_blocking(ack, False)
    try:
        return os.read(ack, 1) == b"A"
    except OSError:
        return False


def _described_status(code: int | None) -> str:
    if code is None:
        return "still running"
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def _confine(
    status: int,
    release: int,
    bwrap: int,
    limits: ResourceLimits,
    group: _ProcessGroup,
    deadline: float,
) -> tuple[bytes, bool]:
    """Wait for bwrap (pid `bwrap`) to report its child, which waits on the block fd before
    it runs anything; set the rlimits on it and move it into the pids cgroup — so everything
    the command starts inherits both — then release it. Returns the status bytes read (the
    reader parses them with the rest) and whether the child was released. A bwrap that dies
    first is never released, nor is a reported pid that is not bwrap's own child: limits
    are never set on another process, and an unreleased child never runs the command."""
    seen = b""
    while b"\n" not in seen:
        ready, _, _ = select.select([status], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            return seen, False
        chunk = os.read(status, _READ)
        if not chunk:
            return seen, False
        seen += chunk
    try:
        pid = int(json.loads(seen.split(b"\n", 1)[0])["child-pid"])
        if _parent_of(pid) != bwrap:
            return seen, False
        limits.apply(pid)
        group.add(pid)
        os.write(release, b"1")
    except (ValueError, KeyError, TypeError, OSError):
        return seen, False  # the child is gone already (bwrap's setup failed) or unreadable
    return seen, True


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class _ProcessGroup:
    """A pids cgroup capping how many processes one command may have, where the host lets
    us make one (cgroup v1 pids hierarchy, writable); otherwise only RLIMIT_NPROC holds."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._procs = os.fsencode(path / "cgroup.procs") if path else b""

    @classmethod
    @contextlib.contextmanager
    def create(cls, processes: int) -> Iterator[_ProcessGroup]:
        group = cls.make(processes)
        try:
            yield group
        finally:
            group.remove()

    @classmethod
    def make(cls, processes: int) -> _ProcessGroup:
        """A new group capped at `processes`, or an inert one where none can be made."""
        path = _PIDS_CGROUP / "toolkeeper" / uuid.uuid4().hex
        try:
            path.mkdir(parents=True)
            (path / "pids.max").write_text(str(processes))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return cls(None)
        return cls(path)

    def remove(self) -> None:
        """Kill every member and remove the group once they are gone."""
        if self.path is None:
            return
        self.kill()
        pause = 0.0005
        deadline = time.monotonic() + 2.0
        while True:
            try:
                self.path.rmdir()
                break
            except OSError:  # members still exiting: usually gone within a millisecond
                if time.monotonic() > deadline:
                    break  # an empty pids cgroup left behind costs nothing
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def join(self) -> None:
        """Move the calling process into the group (the fallback's child, before exec)."""
        if self._procs:
            fd = os.open(self._procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def add(self, pid: int) -> None:
        """Move process `pid` into the group; its later children are born in it."""
        if self._procs:
            with open(self._procs, "w") as procs:
                procs.write(str(pid))

    def kill(self) -> None:
        """SIGKILL every member: the backstop for the unsandboxed fallback, whose
        background processes no pid namespace ends."""
        if self.path is None:
            return
        with contextlib.suppress(OSError):
            for line in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(line), signal.SIGKILL)


class _Output:
    """A command's captured stdout and stderr, at most `limit` bytes of each, with how many
    bytes each stream carried in all: what the cold and the warm reader share."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.stdout_bytes = 0
        self.stderr_bytes = 0

    def _keep(self, name: str, chunk: bytes) -> None:
        buffer = self.stdout if name == "stdout" else self.stderr
        room = self.limit - len(buffer)
        if room > 0:
            buffer += chunk[:room]
        if name == "stdout":
            self.stdout_bytes += len(chunk)
        else:
            self.stderr_bytes += len(chunk)


class _Reader(_Output):
    """Drains stdout, stderr and bwrap's status pipe until the command and everything that
    holds its output are gone, keeping at most `limit` bytes of each stream."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        master: int | None,
        status: int,
        limit: int,
        early: bytes = b"",
    ) -> None:
        super().__init__(limit)
        self.process = process
        self.status: dict[str, Any] = {}
        self._status = bytearray(early)
        self._selector = selectors.DefaultSelector()
        stdout: IO[bytes] | int | None = master if master is not None else process.stdout
        assert stdout is not None and process.stderr is not None
        self._streams: dict[int, str] = {}
        for stream, name in ((stdout, "stdout"), (process.stderr, "stderr"), (status, "status")):
            fd = stream if isinstance(stream, int) else stream.fileno()
            os.set_blocking(fd, False)
            self._selector.register(fd, selectors.EVENT_READ)
            self._streams[fd] = name

    def collect(
        self, deadline: float, cancel: threading.Event | None, group: _ProcessGroup
    ) -> str | None:
        """Read until every stream closes; None when the command ended by itself, else
        ``"timeout"`` or ``"cancel"`` (and the whole process tree was killed)."""
        ended: str | None = None
        linger: float | None = None  # when to stop waiting for streams once the main ends
        try:
            while self._streams:
                now = time.monotonic()
                if ended is None and linger is None:
                    if cancel is not None and cancel.is_set():
                        ended = self._kill("cancel", group)
                    elif now >= deadline:
                        ended = self._kill("timeout", group)
                if linger is None and (ended is not None or self.process.poll() is not None):
                    # The main process is gone (or killed): whatever it left behind goes
                    # with it. Under bwrap the namespace is dead already; this also ends
                    # the fallback's process group.
                    kill_process_tree(self.process.pid)
                    group.kill()
                    linger = now + _LINGER
                if linger is not None and now >= linger:
                    break  # a descendant that escaped every kill still holds a stream
                for key, _ in self._selector.select(_POLL):
                    self._drain(int(key.fd))
        finally:
            if self.process.poll() is None:
                self._kill("cancel", group)
            self.process.wait()
            self._selector.close()
            for stream in (self.process.stdout, self.process.stderr):
                if stream is not None:
                    stream.close()
        self._parse_status()
        return ended

    def _kill(self, why: str, group: _ProcessGroup) -> str:
        kill_process_tree(self.process.pid)
        group.kill()
        return why

    def _drain(self, fd: int) -> None:
        name = self._streams[fd]
        try:
            chunk = os.read(fd, _READ)
        except BlockingIOError:
            return
        except OSError:  # EIO: a PTY whose last writer closed
            chunk = b""
        if not chunk:
            self._forget(fd)
            return
        if name == "status":
            self._status += chunk
            return
        self._keep(name, chunk)

    def _forget(self, fd: int) -> None:
        if fd in self._streams:
            del self._streams[fd]
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(fd)

    def _parse_status(self) -> None:
        # bwrap writes one JSON object per line: the child's pid, then its exit code.
        for line in self._status.decode("utf-8", "replace").splitlines():
            with contextlib.suppress(ValueError):
                value = json.loads(line)
                if isinstance(value, dict):
                    self.status.update(value)


_SPARE_START = 10.0
"""Seconds a spare sandbox may take to start; one slower is given up (the command that
wanted it starts cold)."""

_LAUNCHER = r"""
import os, sys, _signal, _socket
control = int(sys.argv[1])
os.closerange(3, control)
os.closerange(control + 1, os.sysconf("SC_OPEN_MAX"))
os.set_inheritable(control, False)
channel = _socket.socket(fileno=control)
channel.send(b"R")
try:
    data, ancillary, flags, _ = channel.recvmsg(
        1 << 18, _socket.CMSG_SPACE(4 * 4), _socket.MSG_CMSG_CLOEXEC
    )
except OSError:
    os._exit(0)
fds = []
for level, kind, body in ancillary:
    if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
        fds += memoryview(body[: len(body) - len(body) % 4]).cast("i").tolist()
if not data:
    os._exit(0)
try:
    if len(fds) != 4 or flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC):
        raise ValueError("the request was cut short")
    os.write(fds[3], b"A")
    os.close(fds[3])
    fields = data.split(b"\0")
    count = int(fields[1])
    argv = fields[2 : 2 + count]
    env = dict(item.split(b"=", 1) for item in fields[2 + count :])
    os.chdir(fields[0])
    os.environb[b"PATH"] = env.get(b"PATH", os.defpath.encode())
    pid = os.posix_spawnp(
        argv[0],
        argv,
        env,
        file_actions=[(os.POSIX_SPAWN_DUP2, fds[n], n) for n in range(3)],
        setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
    )
except Exception as exc:
    channel.send(b"E" + str(exc).encode("utf-8", "replace"))
    os._exit(127)
for fd in fds[:3]:
    os.close(fd)
_, status = os.waitpid(pid, 0)
channel.send(b"X%d" % os.waitstatus_to_exitcode(status))
channel.recv(1)
os._exit(0)
"""
"""The launcher a spare sandbox runs (``python -I -S -c``: toolkeeper is not importable
inside, and it imports only modules built into the interpreter, as ``json``, ``socket`` and
``signal`` more than doubled its start-up CPU). It closes every descriptor but its control
socket, says it is ready (``R``), and waits for one request (`_request`: the working
directory, the argv and the environment) with four descriptors attached, received
close-on-exec (``socket.recv_fds`` drops that flag, so it reads the message itself): the
command's stdin, stdout and stderr, and the write end of an acknowledgement pipe. It writes
``A`` there before it does anything — so the host knows whether a command it handed over may
have run, without being woken for it — changes directory, spawns the command with the three
stdio descriptors and the default disposition of the signals Python ignores, and reports how
it ended (``X`` and the exit code, negative for a signal), or why it could not start it
(``E``). It spawns rather than execs so that the exit status comes straight from it: through
bwrap it would take two more process hops. Once it has reported, it waits to be killed (the
host kills the sandbox as it returns), so neither its exit nor the namespace's teardown runs
while the host reads the result."""


class _Spare:
    """One sandbox started ahead of its command: bwrap running the launcher, already
    confined (rlimits set and the pids cgroup joined before it was released), its own
    stdio on ``/dev/null``, waiting on `control`. It serves exactly one command."""

    def __init__(
        self,
        sandbox: Sandbox,
        key: tuple[object, ...],
        process: subprocess.Popen[bytes],
        control: socket.socket,
        group: _ProcessGroup,
        status: int,
    ) -> None:
        self.sandbox = sandbox
        self.key = key
        self.process = process
        self.control = control
        self.group = group
        self._status = status
        self._retired = False

    @classmethod
    def start(cls, sandbox: Sandbox, key: tuple[object, ...]) -> _Spare:
        """Start a spare for `sandbox` and wait until its launcher is ready. Raises
        `SandboxUnavailable` when it cannot start (nothing is left running then)."""
        python = sandbox._launcher_python()
        if python is None:
            raise SandboxUnavailable("no Python the sandbox shows", reason="no launcher")
        deadline = time.monotonic() + _SPARE_START
        group = _ProcessGroup.make(sandbox.limits.processes)
        control, inner = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        status_read, status_write = os.pipe()
        block_read, block_write = os.pipe()
        launcher = [python, "-I", "-S", "-c", _LAUNCHER, str(inner.fileno())]
        command = sandbox.command(launcher, cwd=None, status_fd=status_write, block_fd=block_read)
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                # Nothing of the harness's environment: each command brings its own.
                env={},
                start_new_session=True,
                pass_fds=(inner.fileno(), status_write, block_read),
            )
        except OSError as exc:
            for fd in (status_read, block_write):
                _close(fd)
            control.close()
            group.remove()
            raise SandboxUnavailable(f"bwrap could not be started: {exc}", reason=str(exc)) from exc
        finally:
            inner.close()
            _close(status_write)
            _close(block_read)
        spare = cls(sandbox, key, process, control, group, status_read)
        try:
            _, released = _confine(
                status_read, block_write, process.pid, sandbox.limits, group, deadline
            )
            if not released:
                spare.kill()  # before the block fd closes, which would let the child go on
        finally:
            _close(block_write)
        ready = released and select.select([control], [], [], deadline - time.monotonic())[0]
        if not ready or control.recv(1) != b"R":
            spare.retire()
            raise SandboxUnavailable("the spare sandbox did not start", reason="spare failed")
        return spare

    def alive(self) -> bool:
        """Whether the launcher still waits: bwrap is running and the control socket has
        neither data nor a hang-up to read (a dead launcher's end reads as end of file)."""
        if self.process.poll() is not None:
            return False
        readable, _, _ = select.select([self.control], [], [], 0)
        return not readable

    def kill(self) -> None:
        """End the whole sandbox now: bwrap, the namespace's init with it, and so every
        process of the pid namespace; the pids cgroup's members too."""
        kill_process_tree(self.process.pid)
        self.group.kill()

    def retire(self) -> None:
        """Tear the sandbox down off the caller's path: a thread kills what is left of
        it, reaps bwrap and removes the pids cgroup."""
        if self._retired:
            return
        self._retired = True
        _REAPER.put(self._teardown)

    def _teardown(self) -> None:
        self.kill()
        self.control.close()
        self.process.wait()
        _close(self._status)
        self.group.remove()


_PLACES = 1024
"""Working directories whose fitness for a spare one pool remembers per sandbox."""


@dataclass(slots=True)
class _Known:
    """What a pool remembers of one sandbox: its spare key while the hidden paths that
    exist are `shown`, and whether a spare may serve each working directory seen."""

    sandbox: Sandbox
    shown: tuple[bool, ...]
    key: tuple[object, ...] | None
    places: dict[str, bool]


class Spares:
    """Sandboxes started ahead, at most one per sandbox spec (`Sandbox.spare_key`), so a
    command does not wait for bubblewrap to start: it takes the spare whose spec matches
    (else runs cold, as without spares) and a replacement is started after it, off its
    path. Every command still gets a sandbox of its own; a spare serves one command only.

    Spares are started by one long-lived thread of the pool, not by the caller's: bwrap's
    ``--die-with-parent`` follows the thread that started it, so a spare started by a
    short-lived worker thread would die with it. The pool is thread-based and so
    independent of any event loop. `close` ends the idle spares and that thread (and with
    the thread, any sandbox it started that still runs); the pool starts again if used
    after. Every open pool is closed when the interpreter exits, and if it is killed
    instead the kernel ends the spares (``--die-with-parent``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[tuple[object, ...], _Spare] = {}
        self._starting: dict[tuple[object, ...], threading.Event] = {}
        self._tasks: _Tasks | None = None
        self._keys: dict[int, _Known] = {}
        _POOLS.add(self)

    def prepare(self, sandbox: Sandbox, cwd: str | Path) -> None:
        """Start a spare for commands of `sandbox` in `cwd` unless one is ready or
        starting."""
        key = self._key(sandbox, cwd)
        if key is not None:
            self.refill(sandbox, key)

    def ready(self, sandbox: Sandbox, cwd: str | Path, *, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a spare for commands of `sandbox` in `cwd` to
        be ready (starting one if none is), and say whether one is."""
        key = self._key(sandbox, cwd)
        if key is None:
            return False
        self.refill(sandbox, key)
        with self._lock:
            starting = self._starting.get(key)
        if starting is not None:
            starting.wait(timeout)
        with self._lock:
            return key in self._ready

    def take(
        self,
        sandbox: Sandbox,
        cwd: str | Path,
        *,
        started: float,
        cancel: threading.Event | None = None,
    ) -> _Spare | None:
        """The ready spare for a command of `sandbox` in `cwd` (a resolved path), now the
        caller's; None when there is none (one is then started for the next command). A
        spare still starting is waited for: it started before any cold one would."""
        key = self._key(sandbox, cwd, resolved=True)
        if key is None:
            return None
        with self._lock:
            spare = self._ready.pop(key, None)
            starting = self._starting.get(key)
            # A spare of this sandbox under another key was started before its mounts
            # changed (a hidden directory created since, say): it would serve no command.
            stale = [k for k, s in self._ready.items() if s.sandbox is sandbox and k != key]
            retired = [self._ready.pop(k) for k in stale]
        for old in retired:
            old.retire()
        if spare is None and starting is not None:
            while not starting.wait(_POLL):
                if cancel is not None and cancel.is_set():
                    return None
                if time.monotonic() > started + _SPARE_START:
                    return None
            with self._lock:
                spare = self._ready.pop(key, None)
        if spare is not None and not spare.alive():
            spare.retire()  # killed from outside, or died: replaced below
            spare = None
        if spare is None:
            self.refill(sandbox, key)
        return spare

    def _key(
        self, sandbox: Sandbox, cwd: str | Path, *, resolved: bool = False
    ) -> tuple[object, ...] | None:
        """`sandbox.spare_key(cwd)`, remembered per sandbox while the hidden paths that
        exist stay the same (building the command line is most of a warm command's
        overhead on the host), with whether a spare may serve each working directory seen
        (a sandbox's roots and hidden paths are fixed, so that never changes). The sandbox
        is held with its key, so its id is not reused. `resolved`: `cwd` has had its
        symlinks resolved already."""
        where = str(cwd) if resolved else os.path.realpath(cwd)
        with self._lock:
            known = self._keys.get(id(sandbox))
        if known is not None and known.sandbox is not sandbox:
            known = None
        served = known.places.get(where) if known is not None else None
        if served is None:
            place = Path(where)
            served = sandbox._writable(place) or not sandbox._masked(place)
            if known is not None:
                with self._lock:
                    if len(known.places) >= _PLACES:
                        known.places.clear()
                    known.places[where] = served
        if not served:
            return None
        shown = tuple(os.path.isdir(path) for path in sandbox.hidden)
        if known is not None and known.shown == shown:
            return known.key
        key = sandbox.spare_key(where)
        with self._lock:
            self._keys[id(sandbox)] = _Known(sandbox, shown, key, {where: True})
        return key

    def refill(self, sandbox: Sandbox, key: tuple[object, ...]) -> None:
        """Start a spare for `key` unless one is ready or starting."""
        with self._lock:
            if key in self._ready or key in self._starting:
                return
            if self._tasks is None:
                self._tasks = _Tasks(self)
            self._starting[key] = threading.Event()
            self._tasks.put((sandbox, key, None))

    def replace(self, sandbox: Sandbox, spent: _Spare) -> None:
        """Kill the spare a command of `sandbox` has used — one signal, so nothing it left
        runs on — and have the pool's thread hand it to the reaper and start its
        replacement: one wake-up of one thread, the last thing a warm run does, so the
        teardown and the next spare's start do not compete with the command."""
        kill_process_tree(spent.process.pid)
        key = spent.key
        with self._lock:
            wanted = key not in self._ready and key not in self._starting
            if self._tasks is None:
                self._tasks = _Tasks(self)
            if wanted:
                self._starting[key] = threading.Event()
            self._tasks.put((sandbox, key if wanted else None, spent))

    def close(self) -> None:
        """End the idle spares and the thread that started them, waiting for a spare it is
        still starting: that one is killed once started. Not waiting would let the
        interpreter exit with bwrap half set up — its outer process then dies with the
        thread (``--die-with-parent``) before its child in the new namespaces has armed its
        own parent-death signal, and that child waits forever for a signal its parent will
        never send (an orphaned bwrap, parent pid 1)."""
        with self._lock:
            tasks, self._tasks = self._tasks, None
            ready = list(self._ready.values())
            self._ready.clear()
            starting = list(self._starting.values())
            self._starting.clear()
        for spare in ready:
            spare.kill()  # now, not from the reaper's thread: the interpreter may be exiting
            spare.retire()
        for event in starting:
            event.set()
        if tasks is not None:
            tasks.put(None)
            tasks.join(_SPARE_START)

    def _started(self, tasks: _Tasks, key: tuple[object, ...], spare: _Spare | None) -> None:
        with self._lock:
            current = self._tasks is tasks
            event = self._starting.pop(key, None) if current else None
            if current and spare is not None:
                self._ready[key] = spare
                spare = None
        if spare is not None:
            spare.kill()  # the pool was closed meanwhile: now, the interpreter may be exiting
            spare.retire()
        if event is not None:
            event.set()


_Task = tuple[Sandbox, tuple[object, ...] | None, _Spare | None]
"""What the pool's thread is asked to do: retire a spent spare (when one is given), then
start a spare of the sandbox for the key (when one is given)."""


class _Tasks:
    """The thread that starts one pool's spares, in order, and hands spent ones to the
    reaper, until told to stop (None)."""

    def __init__(self, pool: Spares) -> None:
        self._pool = weakref.ref(pool)
        self._queue: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="toolkeeper-spares", daemon=True)
        self._thread.start()

    def put(self, task: _Task | None) -> None:
        self._queue.put(task)

    def join(self, timeout: float) -> None:
        """Wait for the thread to finish what it was doing (unless this is that thread)."""
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _work(self) -> None:
        while True:
            task = self._queue.get()
            if task is not None and task[2] is not None:
                task[2].retire()
            pool = self._pool()
            if task is None or pool is None:
                return
            sandbox, key, _ = task
            if key is None:
                continue
            spare: _Spare | None
            try:
                spare = _Spare.start(sandbox, key)
            except Exception:
                # Whatever it was, the command starts cold and reports it; this thread must
                # live on, as the spares it started die with it.
                spare = None
            pool._started(self, key, spare)
            del pool


class _Reaper:
    """One thread for the whole process tearing spent spares down in order: starting a
    thread per command would put its start on the command's path."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def put(self, teardown: Callable[[], None]) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                thread = threading.Thread(
                    target=self._work, name="toolkeeper-sandbox-reaper", daemon=True
                )
                try:
                    thread.start()
                except RuntimeError:  # the interpreter is shutting down: tear down here
                    teardown()
                    return
                self._thread = thread
        self._queue.put(teardown)

    def _work(self) -> None:
        while True:
            teardown = self._queue.get()
            with contextlib.suppress(OSError):
                teardown()


_REAPER = _Reaper()
_POOLS: weakref.WeakSet[Spares] = weakref.WeakSet()


def _close_pools() -> None:
    for pool in list(_POOLS):
        pool.close()


atexit.register(_close_pools)


class _WarmReader(_Output):
    """Drains a warm command's stdout and stderr and reads its launcher's control socket
    until the command has ended and nothing holds its output, keeping at most `limit`
    bytes of each stream."""

    def __init__(self, spare: _Spare, stdout: int, stderr: int, limit: int) -> None:
        super().__init__(limit)
        self.spare = spare
        self.status: int | None = None
        """The launcher's report: the exit code, or minus the signal that ended it."""
        self.failure: str | None = None
        self._control = spare.control.fileno()
        self._open: dict[int, str] = {
            stdout: "stdout",
            stderr: "stderr",
            self._control: "control",
        }
        self._poll = select.poll()
        for fd in self._open:
            os.set_blocking(fd, False)
            self._poll.register(fd, select.POLLIN)

    def collect(self, deadline: float, cancel: threading.Event | None) -> str | None:
        """Read until the command is over; None when it ended by itself, else
        ``"timeout"`` or ``"cancel"`` (and the whole sandbox was killed)."""
        ended: str | None = None
        linger: float | None = None
        while self._waiting():
            now = time.monotonic()
            if ended is None and linger is None:
                if cancel is not None and cancel.is_set():
                    ended = "cancel"
                elif now >= deadline:
                    ended = "timeout"
            if linger is None and (ended is not None or self._over()):
                # The command is over, or we end it: whatever still holds its output (a
                # background process) dies with the sandbox.
                self.spare.kill()
                linger = now + _LINGER
            if linger is not None and now >= linger:
                break  # a descendant that escaped every kill still holds a stream
            for fd, _ in self._poll.poll(_POLL * 1000):
                self._drain(fd)
        return ended

    def _over(self) -> bool:
        return (
            self.status is not None or self.failure is not None or self._control not in self._open
        )

    def _waiting(self) -> bool:
        streams = [name for name in self._open.values() if name != "control"]
        return bool(streams) or not self._over()

    def _drain(self, fd: int) -> None:
        name = self._open.get(fd)
        if name is None:
            return
        try:
            chunk = os.read(fd, _READ)
        except BlockingIOError:
            return
        except OSError:  # EIO: a PTY whose last writer closed
            chunk = b""
        if not chunk:
            del self._open[fd]
            self._poll.unregister(fd)
            return
        if name == "control":
            self._message(chunk)
            return
        self._keep(name, chunk)

    def _message(self, message: bytes) -> None:
        kind, body = message[:1], message[1:]
        if kind == b"X":
            with contextlib.suppress(ValueError):
                self.status = int(body)
        elif kind == b"E":
            self.failure = body.decode("utf-8", "replace") or "the launcher failed"
