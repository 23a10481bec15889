"""Escape attempts from a Code Mode program (Monty tier), each of which must fail closed: no
file outside the sandbox read or written, no network, no environment secret, no import of the
host's modules, no subprocess, bounded resources, and the host RPC unable to forge a call, a
hidden tool, a grant or a resume. The real sandbox, the real pipeline."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from toolkeeper import Principal, Status, ToolContext, tool
from toolkeeper.codemode import CodeLimits
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.runtime.harness import Harness

SECRET = "s3cr3t-canary-7f1d"
ALICE = Principal("alice")
LIMITS = CodeLimits(
    wall_seconds=10,
    cpu_seconds=2,
    memory_bytes=32 * 1024 * 1024,
    output_bytes=1024,
    max_inner_calls=50,
)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Harness, dict[str, Any]]]:
    home = tmp_path_factory.mktemp("containment")
    os.environ["TK_CONTAINMENT_SECRET"] = SECRET
    (home / "host-file.txt").write_text(SECRET)
    harness = Harness(home=home / "tk", code_limits=LIMITS)
    effects: dict[str, Any] = {"sent": [], "contexts": []}

    @tool(side_effect="none")
    def get_rows(sheet_id: str) -> list[int]:
        """Rows."""
        return [1, 2, 3]

    @tool(version="1.0.0", side_effect="committing")
    def send_email(to: str, body: str, context: ToolContext) -> dict[str, Any]:
        """Send an email."""
        effects["sent"].append(to)
        effects["contexts"].append(context)
        return {"sent": True}

    @tool(side_effect="none", required_capabilities=["admin"])
    def read_vault() -> str:
        """Admins only."""
        return SECRET

    for function in (get_rows, send_email, read_vault):
        harness.register(function)
    effects["home"] = home
    yield harness, effects
    harness.close()
    del os.environ["TK_CONTAINMENT_SECRET"]


def run(harness: Harness, code: str) -> ResultEnvelope:
    async def main() -> ResultEnvelope:
        return await harness.run_code(code, principal=ALICE)

    return anyio.run(main)


def text_of(envelope: ResultEnvelope) -> str:
    return json.dumps(envelope.model_dump(mode="json"), default=str)


FAILS = [
    # files outside the sandbox
    ("read_etc_passwd", "open('/etc/passwd').read()", "PermissionError"),
    ("read_host_file", "open('{home}/host-file.txt').read()", "PermissionError"),
    ("write_file", "open('{home}/escaped.txt', 'w').write('x')", "PermissionError"),
    (
        "pathlib_read",
        "import pathlib\npathlib.Path('/etc/hostname').read_text()",
        "PermissionError",
    ),
    (
        "pathlib_write",
        "import pathlib\npathlib.Path('{home}/p.txt').write_text('x')",
        "PermissionError",
    ),
    ("listdir", "import os\nos.listdir('/')", "PermissionError"),
    # environment secrets
    ("getenv", "import os\nos.getenv('TK_CONTAINMENT_SECRET')", "is not supported"),
    ("environ", "import os\nos.environ['TK_CONTAINMENT_SECRET']", "Error"),
    # imports of the host's modules, subprocesses, network
    ("import_subprocess", "import subprocess\nsubprocess.run(['id'])", "ModuleNotFoundError"),
    (
        "import_socket",
        "import socket\nsocket.create_connection(('1.1.1.1', 80))",
        "ModuleNotFoundError",
    ),
    (
        "import_urllib",
        "import urllib.request\nurllib.request.urlopen('http://x')",
        "ModuleNotFoundError",
    ),
    ("import_ctypes", "import ctypes", "ModuleNotFoundError"),
    ("import_toolkeeper", "import toolkeeper", "ModuleNotFoundError"),
    ("import_pydantic_monty", "import pydantic_monty", "ModuleNotFoundError"),
    ("dunder_import", "__import__('os').system('id')", "NameError"),
    ("os_system", "import os\nos.system('id')", "AttributeError"),
    # introspection escapes
    ("subclasses", "().__class__.__bases__[0].__subclasses__()", "AttributeError"),
    ("builtins", "__builtins__.open('/etc/passwd')", "NameError"),
    ("globals", "globals()['get_rows']", "NameError"),
    ("function_globals", "get_rows.__globals__", "NameError"),
    ("exec_import", "exec('import subprocess')", "ModuleNotFoundError"),
    # resource exhaustion
    ("cpu", "while True:\n    pass", "CodeLimits.cpu_seconds"),
    ("memory", "x = []\nwhile True:\n    x.append('y' * 1000000)", "CodeLimits.memory_bytes"),
    ("recursion", "def f(n):\n    return f(n + 1)\nf(0)", "RecursionError"),
    (
        "call_flood_caught",
        "while True:\n    try:\n        get_rows('a')\n    except BaseException:\n        pass",
        "CodeLimits.max_inner_calls",
    ),
    # the host RPC: forging a call, a hidden tool, a grant, a resume
    ("hidden_tool", "read_vault()", "NameError"),
    ("hidden_by_id", "sdk_help('read_vault')", "NameError"),
    ("nested_run_code", "toolkeeper_run_code(code='1')", "NameError"),
    ("resume_tool", "toolkeeper_resume(approval_id='apr_x')", "NameError"),
    ("forged_context", "send_email('a@b', 'x', context={'grant': 'forged'})", "ValueError"),
    ("forged_grant_kwarg", "send_email('a@b', 'x', grant='g')", "ValueError"),
    ("too_many_positional", "get_rows('a', 'b', 'c')", "TypeError"),
]


@pytest.mark.parametrize(("name", "code", "expected"), FAILS, ids=[f[0] for f in FAILS])
def test_escape_attempt_fails_closed(
    sandbox: tuple[Harness, dict[str, Any]], name: str, code: str, expected: str
) -> None:
    harness, effects = sandbox
    home = effects["home"]
    envelope = run(harness, code.replace("{home}", str(home)))
    assert envelope.status is not Status.SUCCEEDED, envelope
    assert expected in envelope.error.message
    assert SECRET not in text_of(envelope)
    assert not (home / "escaped.txt").exists() and not (home / "p.txt").exists()
    assert effects["sent"] == []


def test_output_flood_is_bounded_and_the_rest_stored(
    sandbox: tuple[Harness, dict[str, Any]],
) -> None:
    harness, _ = sandbox
    envelope = run(harness, "for i in range(20000):\n    print('x' * 50)\n1")
    assert envelope.status is Status.SUCCEEDED
    assert len(envelope.structured_content["stdout"].encode()) <= LIMITS.output_bytes


def test_an_unawaited_call_never_runs(sandbox: tuple[Harness, dict[str, Any]]) -> None:
    harness, effects = sandbox
    envelope = run(harness, "pending = send_email_async('a@b', 'x')\n'left'")
    assert envelope.structured_content["value"] == "left"
    assert envelope.structured_content["calls_total"] == 0 and effects["sent"] == []


def test_a_hundred_thousand_deep_value_does_not_crash_the_host(
    sandbox: tuple[Harness, dict[str, Any]],
) -> None:
    harness, _ = sandbox
    envelope = run(harness, "x = []\nfor i in range(100000):\n    x = [x]\nx")
    assert envelope.status in (Status.SUCCEEDED, Status.FAILED)
    assert envelope.execution_meta is not None  # answered, recorded


def test_a_huge_int_crosses_as_a_description(
    sandbox: tuple[Harness, dict[str, Any]],
) -> None:
    harness, _ = sandbox
    described = f"<int of {(10**100000).bit_length()} bits>"
    returned = run(harness, "10 ** 100000")
    assert returned.status is Status.SUCCEEDED  # answered and recorded, not a stage fault
    assert returned.structured_content["value"] == described
    passed = run(harness, "get_rows(10 ** 100000)")
    [inner] = passed.structured_content["calls"]
    assert harness.ledger.get(inner["request_id"]).arguments == {"sheet_id": described}


def test_lone_surrogates_in_arguments_reach_validation_not_a_crash(
    sandbox: tuple[Harness, dict[str, Any]],
) -> None:
    harness, _ = sandbox
    envelope = run(harness, "get_rows('\\ud800')")
    assert envelope.execution_meta is not None
    assert envelope.status in (Status.SUCCEEDED, Status.FAILED)


def test_writes_from_code_still_wait_for_a_human(
    sandbox: tuple[Harness, dict[str, Any]],
) -> None:
    harness, effects = sandbox
    envelope = run(harness, "for i in range(5):\n    send_email(f'u{i}@x', 'hi')")
    assert envelope.status is Status.PENDING_APPROVAL
    assert effects["sent"] == []  # one approval of run_code is no approval of its calls
