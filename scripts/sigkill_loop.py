"""SIGKILL loop over HTTP: no acknowledged effect lost, no key applied twice.

Starts `toolkeeper serve CONFIG --http 127.0.0.1:0` over a tool whose effect is counted
outside the gateway (it appends ``TOKEN KEY`` to a file), drives keyed calls at it with the
official MCP SDK client (half the workers on 2025-11-25 sessions, half on the 2026-07-28
stateless protocol, the key in ``_meta["toolkeeper.dev/idempotency_key"]``), SIGKILLs the
gateway at random moments, restarts it (every other time after running
`toolkeeper ledger reconcile` against the dead gateway's ledger), and retries each call with
the same key until it gets a final answer. Then it counts:

- lost effects: calls acknowledged as succeeded whose token is not in the file;
- duplicate effects: tokens in the file more than once;
- effect_unknown left: ledger rows still unknown after a last reconciliation.

It exits 1 if anything was lost or duplicated. The defaults run in one to two minutes; raise
``--calls`` and ``--kills`` for a longer soak. The tool is `reversible` rather than
`committing` only because the shipped policy sends every committing call to a human and a
gateway configuration cannot lift that; the road is the same (intent written before the
effect, completion after, recovery and read-back on restart).

    python scripts/sigkill_loop.py                      # 300 calls, 10 kills
    python scripts/sigkill_loop.py --calls 3000 --kills 60 --workers 8
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import select
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

logging.getLogger("mcp").setLevel(logging.CRITICAL)  # a killed server's errors are expected

KEY_META = "toolkeeper.dev/idempotency_key"
TOKEN = "sigkill-loop-token"
ERAS = ("legacy", "2026-07-28")

TOOL_MODULE = '''"""The counted effect: one line per applied call, read back by token."""

import time
from pathlib import Path

from toolkeeper import ToolContext, tool

EFFECTS = Path({effects!r})
DELAY = {delay!r}


@tool(
    version="1.0.0",
    side_effect="reversible",
    idempotency="keyed",
    verifier="effect_applied",
    timeout=10,
    required_capabilities=["effects:write"],
)
def apply_effect(token: str, context: ToolContext) -> dict[str, str]:
    """Append TOKEN KEY to the effects file.

    Args:
        token: Names the logical call; appears once per applied effect.
    """
    time.sleep(DELAY)
    with EFFECTS.open("a") as out:
        out.write(f"{{token}} {{context.idempotency_key}}\\n")
    time.sleep(DELAY)
    return {{"token": token}}


def effect_applied(arguments: dict[str, str], context: ToolContext) -> bool:
    if not EFFECTS.exists():
        return False
    tokens = (line.split(" ")[0] for line in EFFECTS.read_text().splitlines())
    return arguments["token"] in tokens
'''

POLICY = """@id("sigkill.apply_effect")
permit (principal, action, resource is Toolkeeper::Tool)
when { resource.id == "apply_effect" };
"""

CONFIG = """home = {home!r}
tools = ["sigkill_tool"]
policies = ["policy.cedar"]

[principals.worker]
capabilities = ["effects:write"]
token = "{token}"

[http]
host = "127.0.0.1"
port = 0

[ledger]
reconcile_interval = {interval}
"""


@dataclass
class Gateway:
    """The gateway process of the current generation, and the moments the loop waits for."""

    config: Path
    log: Path
    process: subprocess.Popen[str] | None = None
    url: str = ""
    generation: int = 0
    up: anyio.Event | None = None
    """Set while the current generation serves; made anew (unset) at each kill."""

    def start(self) -> None:
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "toolkeeper",
                    "serve",
                    str(self.config),
                    "--http",
                    "127.0.0.1:0",
                    "--log-level",
                    "info",
                ],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        self.url = _await_url(self.process, self.log)
        self.generation += 1

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.up = anyio.Event()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _await_url(process: subprocess.Popen[str], log: Path) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.2)
        if ready:
            line = process.stdout.readline()
            if line.startswith("toolkeeper gateway listening on "):
                return line.rsplit(" ", 1)[-1].strip()
        if process.poll() is not None:
            break
    raise SystemExit(f"the gateway did not start; its log:\n{log.read_text()[-4000:]}")


@dataclass
class Tally:
    acknowledged: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)
    """Calls whose final answer was not success: token → status."""
    unanswered: set[str] = field(default_factory=set)
    """Calls that got no final answer before the deadline."""
    retries: int = 0
    kills: int = 0
    last: dict[str, str] = field(default_factory=dict)
    """Each call's last answer or error, to explain an unanswered one."""


@asynccontextmanager
async def _client(url: str, mode: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def _verdict(result: Any) -> str:
    """final (succeeded), refused:<status> (final, not success) or retry."""
    if not result.is_error:
        return "final"
    envelope = result.structured_content or {}
    status = envelope.get("status", "")
    if status == "succeeded":  # settled by reconciliation: confirmed, its output not recorded
        return "final"
    error = envelope.get("error") or {}
    if (
        status == "effect_unknown"
        or error.get("retryable")
        or error.get("effect_committed") is False
    ):
        return "retry"
    return f"refused:{status}"


async def _worker(
    number: int, gateway: Gateway, todo: list[int], tally: Tally, deadline_s: float
) -> None:
    """Take calls from `todo` and retry each with its key until it has a final answer, over
    one client per gateway generation (a new one after each kill)."""
    mode = ERAS[number % 2]
    current: tuple[str, str, float] | None = None  # token, key, deadline
    while current is not None or todo:
        assert gateway.up is not None
        await gateway.up.wait()
        try:
            async with _client(gateway.url, mode) as client:
                while current is not None or todo:
                    if current is None:
                        index = todo.pop()
                        deadline = time.monotonic() + deadline_s
                        current = (f"t{index:05d}", f"key-{index:05d}", deadline)
                    token, key, deadline = current
                    if time.monotonic() > deadline:
                        tally.unanswered.add(token)
                        current = None
                        continue
                    with anyio.fail_after(30):
                        result = await client.call_tool(
                            "apply_effect", {"token": token}, meta={KEY_META: key}
                        )
                    verdict = _verdict(result)
                    tally.last[token] = verdict
                    if verdict == "final":
                        tally.acknowledged.add(token)
                        current = None
                    elif verdict.startswith("refused:"):
                        tally.refused[token] = verdict.partition(":")[2]
                        current = None
                    else:
                        tally.retries += 1
                        await anyio.sleep(0.2)
        except Exception as exc:  # the gateway died under the call: retry with the same key
            if current is not None:
                tally.last[current[0]] = f"{type(exc).__name__}: {exc}"
            tally.retries += 1
            await anyio.sleep(0.05)


def _cli(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "toolkeeper", *args, "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"toolkeeper {' '.join(args)} failed:\n{done.stderr}")
    return json.loads(done.stdout)


async def _killer(
    gateway: Gateway,
    todo: list[int],
    busy: list[int],
    tally: Tally,
    args: argparse.Namespace,
    rng: random.Random,
) -> None:
    """Kill the gateway at random moments while calls remain; restart it each time."""
    while tally.kills < args.kills and (todo or busy[0]):
        await anyio.sleep(rng.uniform(args.min_gap, args.max_gap))
        if not (todo or busy[0]):
            break
        gateway.kill()
        tally.kills += 1
        if tally.kills % 2 == 0:
            # The dead gateway's ledger, reconciled from outside before it comes back.
            await anyio.to_thread.run_sync(
                _cli, "ledger", "reconcile", "--config", str(gateway.config)
            )
        await anyio.to_thread.run_sync(gateway.start)
        gateway.up.set()


async def _drive(gateway: Gateway, args: argparse.Namespace, tally: Tally) -> None:
    rng = random.Random(args.seed)
    todo = list(range(args.calls))
    rng.shuffle(todo)
    busy = [args.workers]
    gateway.up = anyio.Event()
    await anyio.to_thread.run_sync(gateway.start)
    gateway.up.set()

    async def work(number: int) -> None:
        try:
            await _worker(number, gateway, todo, tally, args.call_deadline)
        finally:
            busy[0] -= 1

    async with anyio.create_task_group() as tasks:
        for number in range(args.workers):
            tasks.start_soon(work, number)
        tasks.start_soon(_killer, gateway, todo, busy, tally, args, rng)


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="sigkill-loop-"))
    workdir.mkdir(parents=True, exist_ok=True)
    effects = workdir / "effects.txt"
    home = workdir / "home"
    (workdir / "sigkill_tool.py").write_text(
        TOOL_MODULE.format(effects=str(effects), delay=args.tool_delay)
    )
    (workdir / "policy.cedar").write_text(POLICY)
    config = workdir / "toolkeeper.toml"
    config.write_text(CONFIG.format(home=str(home), token=TOKEN, interval=args.interval))
    gateway = Gateway(config, workdir / "gateway.log")
    tally = Tally()
    started = time.monotonic()
    try:
        anyio.run(_drive, gateway, args, tally)
    finally:
        gateway.stop()
    final = _cli("ledger", "reconcile", "--config", str(config))
    with sqlite3.connect(home / "ledger.db") as db:  # what the kills left and how it settled
        unknown = db.execute(
            "SELECT COUNT(*) FROM invocations WHERE effect_state = 'unknown'"
        ).fetchone()[0]
        settled = dict(
            db.execute(
                "SELECT stage || ':' || kind, COUNT(*) FROM events "
                "WHERE stage IN ('recover', 'reconcile') GROUP BY stage, kind"
            ).fetchall()
        )
    lines = effects.read_text().splitlines() if effects.exists() else []
    applied = Counter(line.split(" ")[0] for line in lines)
    lost = sorted(t for t in tally.acknowledged if applied[t] == 0)
    duplicates = sorted(t for t, n in applied.items() if n > 1)
    return {
        "calls": args.calls,
        "kills": tally.kills,
        "acknowledged": len(tally.acknowledged),
        "refused": dict(Counter(tally.refused.values())),
        "unanswered": len(tally.unanswered),
        "retries": tally.retries,
        "effects": len(lines),
        "lost_effects": len(lost),
        "duplicate_effects": len(duplicates),
        "effect_unknown_left": unknown,
        "intents_recovered": settled.get("recover:effect_unknown", 0),
        "read_back_succeeded": settled.get("reconcile:succeeded", 0),
        "read_back_failed": settled.get("reconcile:failed", 0),
        "final_reconciliation": {
            k: final[k] for k in ("recovered", "succeeded", "failed", "unknown")
        },
        "unanswered_last": {t: tally.last.get(t, "") for t in sorted(tally.unanswered)[:20]},
        "lost": lost[:20],
        "duplicates": duplicates[:20],
        "seconds": round(time.monotonic() - started, 1),
        "workdir": str(workdir),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument(
        "--min-gap", type=float, default=0.1, help="seconds of serving before a kill, at least"
    )
    parser.add_argument(
        "--max-gap", type=float, default=1.0, help="seconds of serving before a kill, at most"
    )
    parser.add_argument(
        "--tool-delay",
        type=float,
        default=0.01,
        help="seconds the tool sleeps before and after its effect",
    )
    parser.add_argument(
        "--interval", type=float, default=2.0, help="the gateway's reconcile_interval"
    )
    parser.add_argument(
        "--call-deadline",
        type=float,
        default=120.0,
        help="seconds one call may take to get a final answer",
    )
    parser.add_argument("--workdir", help="keep the gateway's files here (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figures = run(args)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for name, value in figures.items():
            print(f"{name:>22}: {value}")
    return 1 if figures["lost_effects"] or figures["duplicate_effects"] else 0


if __name__ == "__main__":
    sys.exit(main())
