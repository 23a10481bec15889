"""Crash reliability with real processes (INV-2, INV-5): SIGKILL a child at random moments
while it performs committing, keyed invocations; after restarts, recovery and
reconciliation, every invocation is accounted for and no key produced two effects.

The kill moments follow the child's own progress, not wall time, so a fast machine gets as
many kills as a slow one: each run is killed at a random moment inside the call after a
randomly chosen call index (later each run), and one run is killed at a random moment of its
start-up, while it recovers and reconciles what the kill before it left."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolkeeper import Principal
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.runtime.stages import scope_idempotency_key

CHILD = Path(__file__).with_name("reliability_child.py")
COUNT = 500
KILLS = 10


@dataclass(frozen=True)
class Kill:
    after: str
    """The progress line the child prints: `start`, or the index of a finished call."""
    within: float | None = None
    """Seconds after that line within which the kill lands, at random; by default about two
    of the child's calls at the pace it has just shown."""


def run_child(home: Path, effects: Path, log: Path, kill: Kill | None, rng: random.Random) -> float:
    """Run the child to the end, or SIGKILL it at a random moment after it printed
    `kill.after`. Return how long the child took from `start` to its first call."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with log.open("a") as err:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(home), str(effects), str(COUNT)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        assert proc.stdout is not None
        started = startup = last = 0.0
        pace = 0.0  # the child's recent seconds per call, from its own progress lines
        for line in proc.stdout:
            step, now = line.strip(), time.monotonic()
            if step == "start":
                started = now
            elif step == "0":
                startup = now - started
            else:
                pace = now - last if pace == 0.0 else 0.8 * pace + 0.2 * (now - last)
            last = now
            if kill is not None and step == kill.after:
                time.sleep(rng.uniform(0, kill.within or 2 * pace))
                proc.kill()
                break
        proc.wait()
        proc.stdout.close()
    if kill is None:
        assert proc.returncode == 0, log.read_text()
    else:
        assert proc.returncode == -signal.SIGKILL, f"ended before {kill}: {log.read_text()}"
    return startup


@pytest.mark.invariant("INV-5")
@pytest.mark.invariant("INV-2")
def test_sigkill_at_random_moments_loses_nothing_and_never_doubles(tmp_path: Path) -> None:
    home, effects, log = tmp_path / "tk", tmp_path / "effects.txt", tmp_path / "child.log"
    rng = random.Random(2048)
    calls = sorted(rng.sample(range(COUNT - 50), KILLS - 1))
    start_kill = rng.randrange(1, KILLS)  # after a kill that left work to recover
    startup = run_child(home, effects, log, Kill(str(calls.pop(0))), rng)
    for n in range(1, KILLS):
        if n == start_kill:
            run_child(home, effects, log, Kill("start", startup), rng)
        else:
            startup = run_child(home, effects, log, Kill(str(calls.pop(0))), rng)
    # a last clean run recovers and reconciles whatever the final kill left behind
    run_child(home, effects, log, None, rng)

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
    # The ledger holds each caller's key scoped to its principal and tool.
    worker = Principal("worker")

    def held(key: str) -> str:
        return scope_idempotency_key(worker, "append_line", key)

    effects_by_key = {held(f"key-{line.removeprefix('line-')}") for line in lines}
    assert succeeded_keys == effects_by_key == {held(f"key-{i}") for i in range(COUNT)}
    originals = [r for r in records if r.status == "succeeded" and r.request_id not in replayed]
    assert len(originals) == len(lines) == COUNT
    ledger.close()
