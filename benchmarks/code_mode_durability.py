"""Durability of a paused Code Mode program under SIGKILL, over several seeds.

Each seed runs a program making W writes, each gated by an approval, in a child process
(tests/codemode/durability_child.py). The seed decides, at every inner-call boundary, whether
the process is killed right after answering (the program paused, its state in the ledger) or
inside the write (the effect on disk, the ledger not yet told). After each kill a fresh
process approves and resumes. Counted over all seeds: duplicate writes, lost writes (an
approved write neither done nor reported), and interrupted writes reconciled or reported
``effect_unknown``. Goal: 0 duplicates, 0 lost, every interrupted write reported.

    python benchmarks/code_mode_durability.py [--seeds 5] [--writes 4]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from toolkeeper.runtime.harness import Harness

ROOT = Path(__file__).resolve().parent.parent
CHILD = ROOT / "tests" / "codemode" / "durability_child.py"


def child(home: Path, mode: str, target: str, kill: str) -> dict[str, Any] | None:
    done = subprocess.run(
        [sys.executable, str(CHILD), str(home), mode, target, kill],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = done.stdout.splitlines()
    return json.loads(lines[-1]) if lines else None


def one_seed(seed: int, writes: int, home: Path) -> dict[str, int]:
    rng = random.Random(seed)
    kills = {"after_answer": 0, "in_write": 0}
    answer = child(home, "run", str(writes), "after_answer")
    kills["after_answer"] += 1
    interrupted = 0
    while answer is not None and answer["status"] == "pending_approval":
        approval_id = answer["approval_id"]
        with Harness(home=home) as harness:
            harness.approvals.decide(approval_id, "approve", by="bench")
        kill = rng.choice(("after_answer", "in_write", "none"))
        if kill != "none":
            kills[kill] += 1
        answer = child(home, "resume", approval_id, kill)
        if kill == "in_write":
            interrupted += 1
            break  # the program's state was taken: it is reported, never continued
    effects_path = home / "effects.txt"
    lines = effects_path.read_text().splitlines() if effects_path.exists() else []
    with Harness(home=home) as harness:  # recovers what the dead process left in flight
        records = [r for r in harness.ledger.query(limit=1000) if r.tool == "append_line@1.0.0"]
    done = {r.request_id: r for r in records}.values()
    committed = sum(1 for r in done if r.status == "succeeded")
    unknown = sum(1 for r in done if r.status == "effect_unknown")
    duplicates = len(lines) - len(set(lines))
    # Every line on disk is a write the ledger reports as committed or unknown.
    lost = max(0, len(set(lines)) - committed - unknown)
    return {
        "writes_on_disk": len(lines),
        "duplicates": duplicates,
        "lost": lost,
        "interrupted": interrupted,
        "reported_unknown": unknown,
        "kills": sum(kills.values()),
        "completed": int(answer is not None and answer["status"] == "succeeded"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--writes", type=int, default=4)
    args = parser.parse_args()
    totals: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="tk-durability-") as tmp:
        for seed in range(args.seeds):
            result = one_seed(seed, args.writes, Path(tmp) / f"seed{seed}")
            print(f"seed {seed}: {result}")
            for key, value in result.items():
                totals[key] = totals.get(key, 0) + value
    print(f"total over {args.seeds} seeds: {totals}")
    print(
        f"duplicates {totals['duplicates']} (goal 0), lost {totals['lost']} (goal 0), "
        f"interrupted writes reported effect_unknown {totals['reported_unknown']}/"
        f"{totals['interrupted']}"
    )


if __name__ == "__main__":
    main()
