"""Crash reliability with real processes (INV-2, INV-5): SIGKILL a child at random moments
while it performs committing, keyed invocations; after restarts, recovery and
reconciliation, every invocation is accounted for and no key produced two effects."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from toolkeeper.ledger.sqlite import SQLiteLedger

CHILD = Path(__file__).with_name("reliability_child.py")
COUNT = 500


def run_child(home: Path, effects: Path, kill_after: float | None) -> int | None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(home), str(effects), str(COUNT)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        proc.wait(timeout=kill_after)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return None
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert proc.returncode == 0, err
    return proc.returncode


@pytest.mark.invariant("INV-5")
@pytest.mark.invariant("INV-2")
def test_sigkill_at_random_moments_loses_nothing_and_never_doubles(tmp_path: Path) -> None:
    home, effects = tmp_path / "tk", tmp_path / "effects.txt"
    rng = random.Random(2048)
    kills = 0
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        # import time dominates the first ~0.6 s; kill windows span it and the work
        if run_child(home, effects, kill_after=rng.uniform(0.3, 2.5)) is not None:
            break
        kills += 1
    else:
        pytest.fail("the child never completed its 500 invocations")
    # a last clean run recovers and reconciles whatever the final kill left behind
    run_child(home, effects, kill_after=None)
    assert kills >= 3, "the test must actually kill the child several times"

    lines = effects.read_text().splitlines()
    per_line = Counter(lines)
    assert [line for line, n in per_line.items() if n > 1] == [], "a key produced two effects"

    ledger = SQLiteLedger(home / "ledger.db")
    records = ledger.query(limit=1_000_000)
    assert ledger.in_flight() == []
    statuses = Counter(r.status for r in records)
    assert set(statuses) <= {"succeeded", "failed"}, statuses
    succeeded_keys = {
        r.idempotency_key for r in records if r.status == "succeeded" and r.idempotency_key
    }
    replayed = {
        r.request_id
        for r in records
        if r.envelope and r.envelope["execution_meta"].get("replay_of")
    }
    effects_by_key = {f"key-{line.removeprefix('line-')}" for line in lines}
    assert succeeded_keys == effects_by_key == {f"key-{i}" for i in range(COUNT)}
    originals = [r for r in records if r.status == "succeeded" and r.request_id not in replayed]
    assert len(originals) == len(lines) == COUNT
