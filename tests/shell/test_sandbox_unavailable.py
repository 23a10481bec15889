"""The "sandbox unavailable" bypass class (issue 14), kept as data in
`sandbox_unavailable_corpus.jsonl`: every way bubblewrap can fail to start — absent, not
runnable, failing silently, exiting 0 without running anything, no user namespaces, a root
gone, dying by a signal, hanging — and through the pipeline nothing runs, unless the operator
opted out of failing closed, in which case it runs and says it ran unsandboxed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import ErrorCategory, Principal, Proposal, Status
from toolkeeper.executors.sandbox import BWRAP
from toolkeeper.runtime.harness import Harness

CORPUS = [
    json.loads(line)
    for line in (Path(__file__).parent / "sandbox_unavailable_corpus.jsonl")
    .read_text()
    .splitlines()
    if line.strip()
]
# A fake bwrap learns the status descriptor bubblewrap would have been told about.
PREAMBLE = """#!/bin/sh
for arg; do [ "$prev" = --json-status-fd ] && status_fd=$arg; prev=$arg; done
"""


def fake_bwrap(case: dict[str, Any], tmp_path: Path) -> str:
    kind = case["bwrap"]
    path = tmp_path / "bwrap"
    if kind == "real":
        return BWRAP
    if kind == "directory":
        path.mkdir()
    elif kind == "not executable":
        path.write_text("#!/bin/sh\nexit 0\n")
    elif kind == "script":
        script = case["script"].replace(">&3", '>&"$status_fd"')
        path.write_text(PREAMBLE + script + "\n")
        path.chmod(0o755)
    return str(path)


def setup(case: dict[str, Any], tmp_path: Path, fallback: bool) -> Harness:
    root, second = tmp_path / "root", tmp_path / "second"
    root.mkdir()
    second.mkdir()
    harness = Harness(home=tmp_path / "tk")
    harness.register_shell(
        roots=[root, second],
        timeout=2,
        bwrap=fake_bwrap(case, tmp_path),
        unsandboxed_fallback=fallback,
    )
    # The second root goes after registration; the first stays the working directory, so
    # the analysis passes and the sandbox is asked.
    if case.get("root") == "removed":
        os.rmdir(second)
    elif case.get("root") == "replaced by a file":
        os.rmdir(second)
        second.write_text("not a directory any more")
    elif case.get("root") == "replaced by a symlink":
        os.rmdir(second)
        (tmp_path / "elsewhere").mkdir()
        second.symlink_to(tmp_path / "elsewhere")
    return harness


@pytest.mark.parametrize("case", CORPUS, ids=[case["id"] for case in CORPUS])
def test_nothing_runs_without_the_sandbox(case: dict[str, Any], tmp_path: Path) -> None:
    harness = setup(case, tmp_path, fallback=False)
    alice = Principal("alice")
    # Read-only, so no approval stands between the proposal and the sandbox; the proof of
    # running is the output.
    done = harness.invoke_sync(
        Proposal("c1", "shell", {"command": "echo ran-unsandboxed"}), principal=alice
    )
    assert done.status is Status.FAILED, done
    timeout = case["expect"] == "timeout"
    expected = ErrorCategory.TIMEOUT if timeout else ErrorCategory.UNAVAILABLE
    assert done.error.category is expected, done.error
    assert done.error.effect_committed is False
    assert "ran-unsandboxed" not in json.dumps(done.model_dump(mode="json"))


@pytest.mark.parametrize(
    "case",
    [c for c in CORPUS if c["expect"] == "unavailable" and not c.get("root")],
    ids=lambda case: case["id"],
)
def test_the_opt_out_runs_and_says_so(case: dict[str, Any], tmp_path: Path) -> None:
    harness = setup(case, tmp_path, fallback=True)
    done = harness.invoke_sync(
        Proposal("c1", "shell", {"command": "echo ran-unsandboxed"}), principal=Principal("a")
    )
    assert done.status is Status.SUCCEEDED, done
    assert done.structured_content["stdout"] == "ran-unsandboxed\n"
    assert done.structured_content["sandboxed"] is False
    assert "WITHOUT the sandbox" in done.summary
