"""Sandbox start overhead: one command under `Sandbox`, cold and warm, against a bare
`subprocess` of the same command (issue 14's goal: at most 2×).

For each command (``true``, ``ls -la /usr/bin``, ``git --version``) the sides alternate run
by run, so drift on a shared machine hits all alike:

- bare: ``subprocess.run(argv, capture_output=True)`` — fork, exec, wait, both pipes read;
- bwrap only: the same argv under bubblewrap with the sandbox's flags, started by
  ``subprocess.run`` (what bubblewrap itself costs: namespaces, mounts, teardown);
- cold: `Sandbox.run_blocking` without spares — bubblewrap started for the command, plus
  what toolkeeper adds (rlimits, the pids cgroup, the status pipe, the capped reader);
- warm: `Sandbox.run_blocking` with `Spares`, the shell tool's default path — the command
  handed to a sandbox started ahead; the replacement spare starts after it, untimed.

Before each warm run the benchmark waits (untimed) until the replacement spare is ready, and
counts the runs for which it was not ready yet when the run came: the other three sides
usually give it time. A spare costs a bwrap and a Python launcher idling in the background.

``--gap S`` sleeps S seconds (untimed) before every timed run, so each side starts on a
machine where the previous run's background work (the last sandbox's teardown, the next
spare's start) is over: how commands a model sends seconds apart see it.

Printed: the median and p90 of each in ms, and each median over bare's. No thresholds.

    python benchmarks/shell_sandbox.py [--runs 200] [--gap 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from toolkeeper.executors.sandbox import Sandbox, Spares

COMMANDS = (["true"], ["ls", "-la", "/usr/bin"], ["git", "--version"])


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def measure(
    argv: list[str], sandbox: Sandbox, spares: Spares, root: Path, runs: int, gap: float
) -> tuple[dict[str, list[float]], int]:
    bwrap = sandbox.command(argv, cwd=root)  # bwrap's flags, without toolkeeper's descriptors
    sides: dict[str, Callable[[], object]] = {
        "bare": lambda: subprocess.run(argv, capture_output=True, cwd=root, check=False),
        "bwrap only": lambda: subprocess.run(
            bwrap, capture_output=True, env=sandbox.env(), check=False
        ),
        "cold": lambda: sandbox.run_blocking(argv, cwd=root, timeout=30),
        "warm": lambda: sandbox.run_blocking(argv, cwd=root, timeout=30, spares=spares),
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    unready = 0
    for fn in sides.values():  # warm the page cache for every side first
        fn()
    for _ in range(runs):
        for name, fn in sides.items():
            if name == "warm" and not spares.ready(sandbox, root, timeout=0):
                unready += 1
                spares.ready(sandbox, root, timeout=30)
            time.sleep(gap)
            times[name].append(timed(fn))
    return times, unready


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.0)
    arguments = parser.parse_args()
    runs, gap = arguments.runs, arguments.gap
    spares = Spares()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            sandbox = Sandbox(roots=(root,))
            print(
                f"{runs} runs per side, alternating, {gap} s apart; {os.cpu_count()} CPUs; "
                "times in ms"
            )
            print(f"{'command':<22}{'side':<12}{'median':>8}{'p90':>8}{'× bare':>8}")
            for argv in COMMANDS:
                times, unready = measure(argv, sandbox, spares, root, runs, gap)
                bare = statistics.median(times["bare"])
                for name, values in times.items():
                    median = statistics.median(values)
                    print(
                        f"{' '.join(argv):<22}{name:<12}{median:8.2f}{p90(values):8.2f}"
                        f"{median / bare:8.2f}"
                    )
                print(f"{'':<22}(spare not ready yet before {unready} of {runs} warm runs)")
    finally:
        spares.close()


if __name__ == "__main__":
    main()
