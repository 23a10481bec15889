"""Containment of Code Mode's CPython tier (issue 13, goal "Containment"): a program that tries
to escape — host files, /proc, the network, the host's secrets, new processes, resource
exhaustion, the host channel used to forge a call — fails closed. Each test is one attempt,
run in the real sandbox; the program reports what it could do, and the test asserts it could
not."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.codemode.cpython import MAX_FRAME_BYTES, Sandbox, run_cpython
from toolkeeper.codemode.program import Abort, CodeLimits, HostCall, ProgramOutcome

MIB = 1024 * 1024
LIMITS = CodeLimits(
    wall_seconds=30,
    cpu_seconds=10,
    memory_bytes=512 * MIB,
    output_bytes=64 * 1024,
    max_inner_calls=20,
)
SECRET = f"tk-secret-{uuid.uuid4().hex}"


class Host:
    """The host callback: records every call it is asked to make."""

    def __init__(self) -> None:
        self.calls: list[HostCall] = []

    async def __call__(self, call: HostCall) -> Any:
        self.calls.append(call)
        return "ok"


def sandbox(
    code: str,
    functions: Sequence[str] = ("lookup",),
    host: Callable[[HostCall], Awaitable[Any]] | None = None,
    **limits: Any,
) -> ProgramOutcome:
    chosen = CodeLimits(**(LIMITS.__dict__ | limits))
    call = host or Host()
    return asyncio.run(run_cpython(code, functions=functions, call=call, limits=chosen))


def attempt(
    code: str, host: Callable[[HostCall], Awaitable[Any]] | None = None, **limits: Any
) -> Any:
    """The value of a program that must end normally, reporting what its attempt met."""
    outcome = sandbox(code, host=host, **limits)
    assert outcome.error is None, outcome
    return outcome.value


def error_of(statement: str) -> str:
    """A program that runs `statement` and returns the name of the exception it raised."""
    indented = "\n".join("    " + line for line in statement.splitlines())
    return (
        f"try:\n{indented}\n    met = None\nexcept BaseException as exc:\n"
        "    met = type(exc).__name__\nmet"
    )


@pytest.fixture(autouse=True)
def host_secret(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A secret in the host's environment, which no program may ever see."""
    monkeypatch.setenv("TOOLKEEPER_TEST_SECRET", SECRET)
    yield


# Files outside the private /tmp


HOST_FILES = [
    "/etc/shadow",
    "/etc/passwd",
    "/etc/hostname",
    str(Path(__file__).resolve()),
    str(Path(__file__).resolve().parents[2] / "pyproject.toml"),
    str(Path.home() / ".bashrc"),
]


@pytest.mark.parametrize("path", HOST_FILES)
def test_host_files_are_not_there(path: str) -> None:
    assert attempt(error_of(f"open({path!r}).read()")) == "FileNotFoundError"


def test_the_host_files_tried_exist_on_the_host() -> None:
    # Otherwise "not found in the sandbox" would prove nothing.
    assert sum(Path(path).is_file() for path in HOST_FILES) >= 4


def test_the_host_working_tree_is_not_there() -> None:
    listing = repr(sorted(os.listdir(Path(__file__).parents[2])))
    assert attempt(error_of(f"os_listing = __import__('os').listdir({listing!r})")) in (
        "FileNotFoundError",
        "OSError",
    )
    here = str(Path(__file__).resolve())
    assert attempt(error_of(f"open({here!r})")) == "FileNotFoundError"


def test_only_the_interpreter_installation_is_visible_under_root() -> None:
    prefix = os.path.realpath(sys.base_prefix)
    code = f"""
import os
inside, outside = 0, []
for top in ('/root', '/home', '/work', '/etc', '/var', '/opt', '/srv', '/mnt', '/run', '/sys'):
    for folder, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            if path.startswith({prefix + "/"!r}):
                inside += 1
            else:
                outside.append(path)
[inside, outside]
"""
    inside, outside = attempt(code)
    assert outside == []
    if prefix.startswith(("/root/", "/home/", "/opt/")):
        assert inside > 0, "the interpreter's own files should be visible"


@pytest.mark.parametrize("path", ["/usr/evil", "/evil", sys.base_prefix + "/evil", "/proc/evil"])
def test_the_root_is_read_only(path: str) -> None:
    assert attempt(error_of(f"open({path!r}, 'w').write('x')")) in (
        "OSError",
        "PermissionError",
        "FileNotFoundError",
    )


def test_tmp_is_private_and_writable() -> None:
    name = f"tk-private-{uuid.uuid4().hex}"
    code = f"open('/tmp/{name}', 'w').write('inside')\nopen('/tmp/{name}').read()"
    assert attempt(code) == "inside"
    assert not Path("/tmp", name).exists()


def test_tmp_is_bounded() -> None:
    code = """
import os
written = 0
try:
    for i in range(40):
        with open(f'/tmp/fill{i}', 'wb') as f:
            f.write(os.urandom(4 * 1024 * 1024))
        written += 4
except OSError as exc:
    stopped = exc.errno
[written, stopped]
"""
    written, errno = attempt(code)
    assert written < 160 and errno == 28  # ENOSPC: the tmpfs is full at 64 MiB


def test_a_file_larger_than_the_file_size_limit_cannot_be_written() -> None:
    code = error_of(
        "f = open('/tmp/big', 'wb')\nf.seek(65 * 1024 * 1024)\nf.write(b'x')\nf.close()"
    )
    assert attempt(code) == "OSError"  # EFBIG: RLIMIT_FSIZE


def test_a_symlink_to_a_host_file_leads_nowhere() -> None:
    code = "import os\nos.symlink('/etc/shadow', '/tmp/link')\n" + error_of("open('/tmp/link')")
    assert attempt(code) == "FileNotFoundError"


def test_proc_root_links_show_only_the_sandbox() -> None:
    code = """
import os
[sorted(os.listdir('/proc/1/root')), sorted(os.listdir('/proc/self/root'))]
"""
    for listing in attempt(code):
        assert "work" not in listing and "etc" not in listing and "home" not in listing


def test_hard_links_out_of_the_read_only_tree_are_refused() -> None:
    python = os.path.realpath(sys.executable)
    assert attempt(error_of(f"__import__('os').link({python!r}, '/tmp/python')")) in (
        "OSError",
        "PermissionError",
    )


def test_sys_and_host_devices_are_absent() -> None:
    code = "import os\n[os.path.exists('/sys/kernel'), sorted(os.listdir('/dev'))]"
    sys_exists, devices = attempt(code)
    assert not sys_exists
    assert not [d for d in devices if d.startswith(("sd", "nvme", "vd", "loop", "mem", "kmsg"))]


def test_no_controlling_terminal_for_tiocsti() -> None:
    assert attempt(error_of("open('/dev/tty', 'rb')")) == "OSError"  # ENXIO


# /proc and the host's processes


def test_proc_shows_no_host_process() -> None:
    # The interpreter is its pid namespace's init: the only process there is.
    code = "import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit())"
    assert attempt(code) == [1]


def test_signals_cannot_reach_the_host() -> None:
    code = f"""
import os, signal
met = []
for target in ({os.getpid()}, {os.getppid()}):
    try:
        os.kill(target, signal.SIGKILL)
        met.append('sent')
    except ProcessLookupError:
        met.append('no such process')
os.kill(os.getpid(), signal.SIGKILL)  # itself, its namespace's init: ignored from inside
met
"""
    assert attempt(code) == ["no such process", "no such process"]


def test_kill_everything_reaches_only_the_sandbox() -> None:
    # kill(-1) signals every process the program may signal; the host test process survives.
    code = error_of("import os, signal\nos.kill(-1, signal.SIGKILL)")
    assert attempt(code) == "ProcessLookupError"  # nothing else in the sandbox to signal


def test_ptrace_is_refused() -> None:
    code = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
[libc.ptrace(16, 1, 0, 0), ctypes.get_errno(), libc.ptrace(0, 0, 0, 0), ctypes.get_errno()]
"""
    assert attempt(code) == [-1, 1, -1, 1]  # PTRACE_ATTACH, PTRACE_TRACEME: EPERM


def test_another_process_memory_cannot_be_read() -> None:
    code = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
buffer = ctypes.create_string_buffer(16)
iov = (ctypes.c_void_p * 2)(ctypes.cast(buffer, ctypes.c_void_p), 16)
[libc.process_vm_readv(1, iov, 1, iov, 1, 0), ctypes.get_errno()]
"""
    assert attempt(code) == [-1, 1]


def test_the_host_environment_is_invisible_even_through_proc() -> None:
    code = """
import os
texts = [repr(dict(os.environ))]
for pid in (p for p in os.listdir('/proc') if p.isdigit()):
    try:
        texts.append(open(f'/proc/{pid}/environ', 'rb').read().decode('latin-1'))
    except OSError:
        pass
texts
"""
    texts = attempt(code)
    assert len(texts) >= 2
    assert not any(SECRET in text or "TOOLKEEPER_TEST_SECRET" in text for text in texts)


def test_the_environment_is_the_minimal_one() -> None:
    assert set(attempt("dict(__import__('os').environ)")) <= {
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "PWD",
    }


def test_no_capabilities_and_no_root() -> None:
    code = """
import os
status = open('/proc/self/status').read()
caps = [line.split()[1] for line in status.splitlines() if line.startswith(('CapEff', 'CapPrm'))]
try:
    os.setuid(0)
    became = 'root'
except OSError:  # uid 0 is not even mapped in the sandbox's user namespace
    became = 'refused'
[os.getuid(), caps, became]
"""
    assert attempt(code) == [65534, ["0000000000000000", "0000000000000000"], "refused"]


def test_namespaces_and_mounts_cannot_be_created() -> None:
    code = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
unshare = libc.unshare(0x10000000)  # CLONE_NEWUSER
unshare_errno = ctypes.get_errno()
mount = libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)
[unshare, unshare_errno != 0, mount]
"""
    assert attempt(code) == [-1, True, -1]


# Network


def test_no_network_outside() -> None:
    code = error_of("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)")
    assert attempt(code) in ("OSError", "ConnectionRefusedError", "TimeoutError")


def test_the_hosts_loopback_is_not_the_sandboxs() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = error_of(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 2)")
        assert attempt(code) == "ConnectionRefusedError"


def test_the_hosts_abstract_unix_sockets_are_not_reachable() -> None:
    name = f"\0tk-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(name)
        server.listen()
        code = error_of(f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({name!r})")
        assert attempt(code) == "ConnectionRefusedError"


def test_only_the_loopback_interface_exists() -> None:
    assert attempt("import socket\nsocket.if_nameindex()") == [[1, "lo"]]


# Processes


@pytest.mark.parametrize(
    "statement",
    [
        "import os\nos.fork()",
        "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'true'])",
        "import os\nos.posix_spawn('/bin/true', ['true'], {})",
        "import os\nos.system('true') and (_ for _ in ()).throw(PermissionError())",
        "import multiprocessing\np = multiprocessing.Process(target=print)\np.start()",
    ],
)
def test_no_new_process(statement: str) -> None:
    assert attempt(error_of(statement)) == "PermissionError"


def test_a_fork_bomb_stops_at_the_first_fork() -> None:
    code = """
import os
forks = 0
try:
    while True:
        os.fork()
        forks += 1
except PermissionError:
    pass
forks
"""
    assert attempt(code) == 0


def test_threads_work_but_a_thread_bomb_is_bounded_by_memory() -> None:
    code = """
import threading, time
started = 0
stop = threading.Event()
try:
    for _ in range(5000):
        threading.Thread(target=stop.wait, daemon=True).start()
        started += 1
except RuntimeError:
    pass
stop.set()
started
"""
    started = attempt(code, memory_bytes=256 * MIB)
    assert 1 <= started < 5000


def _sandbox_processes(*, with_bwrap: bool = False) -> set[int]:
    """Host pids of processes running toolkeeper's sandbox bootstrap (and their bwrap)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"exec(marshal.loads(code))" in cmdline and (
                with_bwrap or b"--seccomp" not in cmdline
            ):
                found.add(int(entry.name))
    return found


def test_the_whole_sandbox_dies_on_timeout() -> None:
    before = _sandbox_processes(with_bwrap=True)
    seen: list[set[int]] = []

    async def look(call: HostCall) -> str:
        seen.append(_sandbox_processes(with_bwrap=True) - before)
        return "ok"

    outcome = sandbox("lookup()\nwhile True:\n    pass", host=look, wall_seconds=2)
    assert outcome.error_type == "WallTimeLimitExceeded"
    assert len(seen[0]) >= 2  # bubblewrap, the interpreter (its namespace's init)
    assert not (_sandbox_processes(with_bwrap=True) & seen[0])


def test_the_whole_sandbox_dies_when_the_caller_is_cancelled() -> None:
    before = _sandbox_processes(with_bwrap=True)
    seen: list[set[int]] = []

    async def scenario() -> None:
        reached = asyncio.Event()

        async def look(call: HostCall) -> str:
            seen.append(_sandbox_processes(with_bwrap=True) - before)
            reached.set()
            return "ok"

        task = asyncio.create_task(
            run_cpython(
                "lookup()\nimport time\ntime.sleep(60)",
                functions=["lookup"],
                call=look,
                limits=LIMITS,
            )
        )
        await reached.wait()
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert len(seen[0]) >= 2  # bubblewrap, the interpreter (its namespace's init)
    assert not (_sandbox_processes(with_bwrap=True) & seen[0])


def test_the_whole_sandbox_dies_on_abort() -> None:
    before = _sandbox_processes(with_bwrap=True)
    seen: list[set[int]] = []

    async def pause(call: HostCall) -> str:
        seen.append(_sandbox_processes(with_bwrap=True) - before)
        raise Abort

    with pytest.raises(Abort):
        sandbox("lookup()\nwhile True:\n    pass", host=pause)
    assert len(seen[0]) >= 2
    assert not (_sandbox_processes(with_bwrap=True) & seen[0])


@pytest.mark.parametrize("delay", [0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1])
def test_cancelling_at_any_point_of_the_start_leaves_no_process(delay: float) -> None:
    before = _sandbox_processes(with_bwrap=True)

    async def scenario() -> None:
        task = asyncio.create_task(
            run_cpython("import time\ntime.sleep(30)", functions=[], call=Host(), limits=LIMITS)
        )
        await asyncio.sleep(delay)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert _sandbox_processes(with_bwrap=True) - before == set()


# Resource exhaustion


def test_a_memory_bomb_is_stopped() -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))"
    outcome = sandbox(code, memory_bytes=256 * MIB)
    assert outcome.error_type == "MemoryLimitExceeded"


def test_an_infinite_loop_is_stopped_by_the_cpu_limit() -> None:
    outcome = sandbox("while True:\n    pass", cpu_seconds=1)
    assert outcome.error_type == "CpuTimeLimitExceeded"


def test_a_program_stuck_in_one_c_call_is_killed_at_the_cpu_hard_stop() -> None:
    # The interpreter is its namespace's init, so SIGXCPU reaches it only through the
    # runner's handler, which runs between bytecodes; the hard limit's SIGKILL comes anyway.
    outcome = sandbox("sum(range(10**15))", cpu_seconds=1)
    assert outcome.error_type == "ProgramKilled"
    assert outcome.error is not None and "CodeLimits.cpu_seconds" in outcome.error


def test_ignoring_sigxcpu_does_not_buy_more_cpu() -> None:
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"
    outcome = sandbox(code, cpu_seconds=1)
    assert outcome.error_type == "ProgramKilled"
    assert outcome.error is not None and "CodeLimits.cpu_seconds" in outcome.error


def test_raising_the_rlimits_is_refused() -> None:
    code = error_of(
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))"
    )
    assert attempt(code) == "ValueError"  # not allowed to raise the maximum limit


def test_huge_output_is_bounded() -> None:
    code = "import sys\nfor _ in range(200):\n    sys.stdout.write('y' * 1024 * 1024)\n'done'"
    outcome = sandbox(code, output_bytes=4096)
    assert outcome.truncated and len(outcome.stdout) == 4096 and outcome.value == "done"


# The host channel


def _raw(frame: bytes) -> str:
    """Program text that writes `frame` raw onto the host channel, then exits."""
    return f"import os, sys\nos.write(int(sys.argv[1]), {frame!r})\nos._exit(0)"


def _framed(text: str) -> bytes:
    data = text.encode()
    return len(data).to_bytes(4, "big") + data


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (b"garbage!garbage!", "a frame of"),
        (_framed("not json"), "not JSON"),
        (_framed("[1, 2]"), "not a JSON object"),
        (_framed("[" * 200000), "not JSON"),
        (_framed('{"op": "grant", "tool": "delete_all"}'), "unknown op"),
        (
            _framed('{"op": "call", "id": 0, "name": "delete_all", "args": [], "kwargs": {}}'),
            "not an offered function",
        ),
        (
            _framed('{"op": "call", "id": 7, "name": "lookup", "args": [], "kwargs": {}}'),
            "where 0 was next",
        ),
        (
            _framed(
                '{"op": "call", "id": 0, "name": "lookup", "args": [], "kwargs": {}, '
                '"grant": "g-1"}'
            ),
            "missing or extra fields",
        ),
        (
            _framed('{"op": "call", "id": 0, "name": "lookup", "args": {}, "kwargs": []}'),
            "not a list",
        ),
        (
            _framed('{"op": "call", "id": true, "name": "lookup", "args": [], "kwargs": {}}'),
            "with id True",
        ),
        (_framed('{"op": "raised", "type": 1, "message": 2}'), "malformed final report"),
        (b"\x00\x00\x00\x10{}", "a truncated frame"),
    ],
)
def test_a_forged_or_malformed_frame_stops_the_program(frame: bytes, reason: str) -> None:
    host = Host()
    outcome = sandbox(_raw(frame), host=host, wall_seconds=20)
    assert outcome.error_type == "SandboxProtocolError", outcome
    assert outcome.error is not None and reason in outcome.error
    assert host.calls == []


def test_a_huge_frame_header_is_refused_before_reading() -> None:
    host = Host()
    outcome = sandbox(_raw((2**31).to_bytes(4, "big")), host=host)
    assert outcome.error_type == "SandboxProtocolError"
    assert outcome.error is not None and str(MAX_FRAME_BYTES) in outcome.error


def test_a_frame_over_the_limit_written_raw_is_refused_unread() -> None:
    host = Host()
    code = (
        f"import os, sys\nbody = b'x' * {MAX_FRAME_BYTES + 1}\n"
        "os.write(int(sys.argv[1]), len(body).to_bytes(4, 'big'))\n"
        "os.write(int(sys.argv[1]), body)\nos._exit(0)"
    )
    outcome = sandbox(code, host=host)
    assert outcome.error_type == "SandboxProtocolError" and host.calls == []
    assert outcome.error is not None and f"a frame of {MAX_FRAME_BYTES + 1} bytes" in outcome.error


def test_arguments_over_the_frame_limit_are_refused_in_the_program() -> None:
    host = Host()
    code = error_of("lookup('x' * (5 * 1024 * 1024))")
    assert attempt(code, host=host) == "ValueError"
    assert host.calls == []


def test_a_value_over_the_frame_limit_is_a_clear_error() -> None:
    outcome = sandbox("'x' * (5 * 1024 * 1024)")
    assert outcome.error_type == "ValueError"
    assert outcome.error is not None and "return a summary" in outcome.error


def test_raw_frames_cannot_bypass_the_inner_call_limit() -> None:
    code = """
import os, sys, json
for i in range(50):
    data = json.dumps({"op": "call", "id": i, "name": "lookup", "args": [i], "kwargs": {}})
    os.write(int(sys.argv[1]), len(data).to_bytes(4, "big") + data.encode())
import time
time.sleep(30)
"""
    host = Host()
    outcome = sandbox(code, host=host, max_inner_calls=3)
    assert outcome.error_type == "InnerCallLimitExceeded"
    assert len(host.calls) <= 3


def test_closing_the_host_channel_ends_the_program_without_hanging() -> None:
    code = "import os, sys\nos.close(int(sys.argv[1]))\nos.close(int(sys.argv[2]))\n'value'"
    started = time.monotonic()
    outcome = sandbox(code, wall_seconds=20)
    assert outcome.error_type == "ProgramCrashed"
    assert time.monotonic() - started < 15


def test_closing_the_channel_then_looping_is_stopped_by_the_wall_limit() -> None:
    code = "import os, sys, time\nos.close(int(sys.argv[1]))\nwhile True:\n    time.sleep(1)"
    assert sandbox(code, wall_seconds=2).error_type in ("WallTimeLimitExceeded", "ProgramCrashed")


def test_closing_stdout_still_reports_the_value() -> None:
    outcome = sandbox("import os\nos.close(1)\nos.close(2)\n41 + 1")
    assert outcome.value == 42 and outcome.error is None


def test_a_lone_surrogate_argument_reaches_the_host_as_text() -> None:
    host = Host()
    outcome = sandbox("lookup('\\ud800 key')", host=host)
    assert outcome.value == "ok"
    assert host.calls == [HostCall("lookup", ("\ud800 key",), {})]


def test_toolkeeper_and_the_hosts_packages_cannot_be_imported() -> None:
    code = (
        "["
        + ", ".join(
            f"__import__('importlib.util').util.find_spec({name!r}) is None"
            for name in ("toolkeeper", "mcp", "pydantic")
        )
        + "]"
    )
    assert attempt(code) == [True, True, True]


def test_signals_to_the_sandbox_pid_from_the_program_do_not_stop_the_host() -> None:
    outcome = sandbox(f"import os\nos.kill(1, {int(signal.SIGTERM)})\n'still here'")
    assert outcome.value == "still here"


def test_a_recursion_bomb_ends_the_program_not_the_host() -> None:
    code = "import sys\nsys.setrecursionlimit(10**8)\ndef down(n):\n    return down(n + 1)\ndown(0)"
    # Millions of frames fill the memory limit; unwinding them is CPU work the CPU limit ends.
    outcome = sandbox(code, cpu_seconds=2, memory_bytes=256 * MIB, wall_seconds=120)
    assert outcome.error_type in (
        "RecursionError",
        "SystemError",
        "MemoryLimitExceeded",
        "CpuTimeLimitExceeded",
        "ProgramKilled",
        "ProgramCrashed",
    )
    assert outcome.value is None


def test_a_spare_sandbox_holds_nothing_of_an_earlier_program() -> None:
    async def scenario() -> list[Any]:
        first, second = await Sandbox.start(), await Sandbox.start()
        values = []
        for sandbox in (first, second):
            code = (
                "import os\nseen = sorted(os.listdir('/tmp'))\n"
                "open('/tmp/left-behind', 'w').write('x')\nseen"
            )
            outcome = await run_cpython(
                code, functions=[], call=Host(), limits=LIMITS, sandbox=sandbox
            )
            values.append(outcome.value)
        return values

    assert asyncio.run(scenario()) == [[], []]
