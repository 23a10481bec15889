"""One principal floods the gateway with oversized and large requests: how fast is another
principal's small call? (issue 9, item 7: one 4 MB request once stalled everyone 17–44 s)

`toolkeeper serve --http` runs in its own process. The victim principal (this process, the MCP
SDK's `Client` over Streamable HTTP, protocol 2026-07-28) calls a trivial read, `ping`, one
call after another. The hostile principal is a second process sending prebuilt bodies with
httpx, as an attacker would (no client-side serialization), round robin:

  body     4.6 MB, 200k keys: over message_bytes, refused unread (HTTP 413, JSON-RPC error)
  keys     2.0 MB, 150k keys, just under message_bytes: the SDK parses it (on the event
           loop: the costliest body the gateway accepts), then argument_items refuses it
  deep     100k levels of nesting: the SDK's parser refuses it (JSON-RPC parse error)
  string   900 KB in one string: allowed; validated and digested on a worker thread
  wide     9,000 keys (~180 KB): allowed; the same, with 9,000 keys to walk

Phases alternate, victim alone (the baseline) and victim under attack (the hostile process is
paused with SIGSTOP during the baseline), for `--rounds` rounds of `--calls` calls, each phase
bounded by `--seconds`. Two gateways take turns: the defaults, and one with offloading off
(``offload_bytes`` = 1 GiB), to show what moving the work to a thread changes. Prints p50/p99
of each phase and p99 under attack / p99 alone. POSIX only (SIGSTOP).

    python benchmarks/oversize_p99.py [--calls 200] [--rounds 5] [--seconds 30]
    python benchmarks/oversize_p99.py --only-default   # also runs against code without [limits]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

VICTIM, HOSTILE = "victim-token", "hostile-token"
TOOLS = '''
from typing import Any
from toolkeeper import tool

@tool(side_effect="none", idempotency="natural")
def ping(n: int) -> dict[str, int]:
    """Answer at once."""
    return {"n": n}

@tool(side_effect="none", idempotency="natural")
def store(data: dict[str, Any]) -> dict[str, int]:
    """Count what it was given."""
    return {"keys": len(data)}
'''
CONFIG = f"""
home = "home"
tools = ["bench_tools"]
policies = ["policy.cedar"]

[principals.victim]
token = "{VICTIM}"

[principals.hostile]
token = "{HOSTILE}"
"""
NO_OFFLOAD = "\n[limits]\noffload_bytes = 1073741824\n"
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "hostile", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@contextmanager
def gateway(directory: Path, extra: str) -> Iterator[str]:
    """`toolkeeper serve --http 127.0.0.1:0` over the bench tools; yields its URL."""
    directory.mkdir()
    (directory / "bench_tools.py").write_text(TOOLS)
    (directory / "policy.cedar").write_text("permit(principal, action, resource);")
    (directory / "toolkeeper.toml").write_text(CONFIG + extra)
    process = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper", "serve", "toolkeeper.toml", "--http", "127.0.0.1:0"],
        cwd=directory,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield _url_of(process)
    finally:
        process.terminate()
        process.wait(10)


def _url_of(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if select.select([process.stdout], [], [], 0.5)[0]:
            line = process.stdout.readline()
            if line.startswith("toolkeeper gateway listening on "):
                return line.rsplit(" ", 1)[-1].strip()
        if process.poll() is not None:
            break
    raise SystemExit("the gateway did not start")


@contextmanager
def hostile_client(url: str) -> Iterator[subprocess.Popen[bytes]]:
    """This script in --hostile mode, against `url`; started paused."""
    process = subprocess.Popen([sys.executable, __file__, "--hostile", url])
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield process
    finally:
        process.terminate()
        os.kill(process.pid, signal.SIGCONT)
        process.wait(10)


def hostile_bodies() -> list[tuple[str, bytes]]:
    def call(arguments: object) -> bytes:
        params = {"_meta": META, "name": "store", "arguments": arguments}
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        return json.dumps(message, separators=(",", ":")).encode()  # as compact as clients

    many = {f"k{i:06d}": "v" * 10 for i in range(200_000)}
    dense = {f"k{i:06d}": 1 for i in range(150_000)}
    deep = call({"data": "DEEP"}).replace(b'"DEEP"', b"[" * 100_000 + b"]" * 100_000)
    return [
        ("body", call({"data": many})),
        ("keys", call({"data": dense})),
        ("deep", deep),
        ("string", call({"data": {"text": "x" * 900_000}})),
        ("wide", call({"data": {f"k{i:05d}": "v" * 10 for i in range(9_000)}})),
    ]


async def hostile(url: str) -> None:
    """Send the bodies round robin, forever; on SIGTERM, report what each kind was answered
    and how long it took (the parent pauses this process and ends it)."""
    bodies = hostile_bodies()
    answers: dict[str, list[tuple[str, float]]] = {kind: [] for kind, _ in bodies}

    def report(*_: object) -> None:
        for kind, seen in answers.items():
            outcomes = sorted({outcome for outcome, _ in seen})
            median = statistics.median(ms for _, ms in seen) if seen else 0.0
            print(
                f"  hostile {kind:<7} sent {len(seen):>4}, answered {', '.join(outcomes)}; "
                f"median {median:.0f} ms",
                file=sys.stderr,
            )
        os._exit(0)

    signal.signal(signal.SIGTERM, report)
    headers = {
        "Authorization": f"Bearer {HOSTILE}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "store",
    }
    async with httpx2.AsyncClient(headers=headers, timeout=300) as http:
        while True:
            for kind, body in bodies:
                start = time.perf_counter()
                response = await http.post(url, content=body)
                answers[kind].append((_outcome(response), (time.perf_counter() - start) * 1000))


def _outcome(response: httpx2.Response) -> str:
    try:
        message = response.json()
    except ValueError:
        return f"HTTP {response.status_code}"
    if "error" in message:
        return f"HTTP {response.status_code} JSON-RPC {message['error']['code']}"
    result = message.get("result", {})
    if result.get("isError"):
        return f"tool error {result['structuredContent']['error']['category']}"
    return "succeeded"


async def victim_phase(client: Client, calls: int, seconds: float) -> list[float]:
    """Milliseconds of each sequential ping, up to `calls` of them or `seconds` in all."""
    latencies = []
    deadline = time.perf_counter() + seconds
    for n in range(calls):
        start = time.perf_counter()
        result = await client.call_tool("ping", {"n": n})
        latencies.append((time.perf_counter() - start) * 1000)
        assert not result.is_error, result
        if time.perf_counter() > deadline:
            break
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(urls: dict[str, str], calls: int, rounds: int, seconds: float) -> None:
    samples = {(label, side): [] for label in urls for side in ("alone", "attacked")}
    with ExitStack() as stack:
        attackers = {label: stack.enter_context(hostile_client(url)) for label, url in urls.items()}
        headers = {"Authorization": f"Bearer {VICTIM}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=300) as http,
            AsyncExitStack() as sessions,
        ):
            clients = {
                label: await sessions.enter_async_context(
                    Client(streamable_http_client(url, http_client=http), mode=MODERN)
                )
                for label, url in urls.items()
            }
            for client in clients.values():
                await victim_phase(client, 50, seconds)  # warm up
            for _ in range(rounds):
                for label, client in clients.items():
                    samples[label, "alone"] += await victim_phase(client, calls, seconds)
                    os.kill(attackers[label].pid, signal.SIGCONT)
                    await anyio.sleep(1)  # let the attack reach full speed
                    samples[label, "attacked"] += await victim_phase(client, calls, seconds)
                    os.kill(attackers[label].pid, signal.SIGSTOP)
                    await anyio.sleep(2)  # let the gateway finish what it was sent
    print(f"victim: sequential ping calls; {rounds} rounds, up to {calls} calls per phase\n")
    print(f"{'gateway':<28}{'phase':<10}{'calls':>7}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for label in urls:
        alone, attacked = samples[label, "alone"], samples[label, "attacked"]
        for side, values in (("alone", alone), ("attacked", attacked)):
            print(
                f"{label:<28}{side:<10}{len(values):>7}{statistics.median(values):>10.1f}"
                f"{percentile(values, 0.99):>10.1f}{max(values):>10.1f}"
            )
        ratio = percentile(attacked, 0.99) / percentile(alone, 0.99)
        median = statistics.median(attacked) / statistics.median(alone)
        print(f"{label:<28}p99 attacked / alone = {ratio:.2f}   p50: {median:.2f}\n")


def main(args: argparse.Namespace) -> None:
    if args.hostile:
        anyio.run(hostile, args.hostile)
        return
    setups = {"defaults": ""}
    if not args.only_default:
        setups["offload off"] = NO_OFFLOAD
    with tempfile.TemporaryDirectory(prefix="tk-oversize-") as tmp, ExitStack() as stack:
        urls = {
            label: stack.enter_context(gateway(Path(tmp) / str(index), extra))
            for index, (label, extra) in enumerate(setups.items())
        }
        anyio.run(measure, urls, args.calls, args.rounds, args.seconds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--only-default", action="store_true")
    parser.add_argument("--hostile", metavar="URL", help=argparse.SUPPRESS)
    main(parser.parse_args())
