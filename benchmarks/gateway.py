"""Gateway overhead: sequential ``tools/call`` round trips per second over Streamable HTTP.

One trivial read-only tool (``echo``), served three ways, each by its own process on 127.0.0.1:

  a. `toolkeeper serve --http`: the full governed pipeline, SQLite ledger, bearer token
  b. a plain MCP SDK `MCPServer`: no governance at all, SSE responses (the SDK's default)
  j. the same `MCPServer` with JSON responses, toolkeeper's default (like for like)
  c. FastMCP's proxy in front of (b): the usual "gateway" hop (``pip install '.[bench]'``)

One client per target (the MCP SDK's `Client`) calls sequentially, in each protocol era; the
targets take turns in interleaved rounds, and every loop is bounded by a call count and a time
budget. Prints calls/s and the ratios a/b, a/j and a/c.

    python benchmarks/gateway.py [--calls 1000] [--seconds 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

TOKEN = "bench-token"
ERAS = ("legacy", "2026-07-28")
TOOLS = '''
from toolkeeper import tool
@tool(side_effect="none", idempotency="natural")
def echo(text: str) -> str:
    """Return the text."""
    return text
'''
CONFIG = f"""
home = "home"
tools = ["bench_tools"]

[principals.bench]
token = "{TOKEN}"
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_plain(port: int, json_response: bool) -> None:
    """Targets (b) and (j): the SDK's MCPServer with the same tool."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("plain", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    server.run("streamable-http", host="127.0.0.1", port=port, json_response=json_response)


def serve_proxy(port: int, target: str) -> None:
    """Target (c): FastMCP's proxy to `target`."""
    from fastmcp.server import create_proxy

    proxy = create_proxy(target, name="proxy")
    proxy.run("http", host="127.0.0.1", port=port, show_banner=False, log_level="WARNING")


@contextmanager
def process(argv: list[str], cwd: Path) -> Iterator[None]:
    child = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def await_port(port: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on port {port} after {seconds} s")


@asynccontextmanager
async def connect(url: str, mode: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


async def calls_per_second(
    urls: dict[str, str], mode: str, calls: int, budget: float, rounds: int
) -> dict[str, float]:
    """Sequential calls per second for each target, measured in interleaved rounds so that a
    change in the machine's load during the run weighs on every target alike."""
    async with AsyncExitStack() as stack:
        clients = {
            name: await stack.enter_async_context(
                connect(url, mode, TOKEN if name == "toolkeeper" else None)
            )
            for name, url in urls.items()
        }
        for client in clients.values():
            await client.list_tools()
            for _ in range(20):  # warm up: first-call costs are not the steady state
                await client.call_tool("echo", {"text": "warm"})
        done = dict.fromkeys(clients, 0)
        spent = dict.fromkeys(clients, 0.0)
        for _ in range(rounds):
            for name, client in clients.items():
                started = time.perf_counter()
                for _ in range(calls // rounds):
                    if spent[name] + time.perf_counter() - started > budget:
                        break
                    result = await client.call_tool("echo", {"text": "hello"})
                    assert not result.is_error, result
                    done[name] += 1
                spent[name] += time.perf_counter() - started
        return {name: done[name] / spent[name] for name in clients}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per target and era")
    parser.add_argument("--seconds", type=float, default=20.0, help="time budget per target/era")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per era")
    parser.add_argument("--serve", choices=("plain", "json", "proxy"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve in ("plain", "json"):
        serve_plain(args.port, json_response=args.serve == "json")
        return
    if args.serve == "proxy":
        serve_proxy(args.port, args.target)
        return

    ports = {name: free_port() for name in ("toolkeeper", "plain", "json", "proxy")}
    urls = {name: f"http://127.0.0.1:{port}/mcp" for name, port in ports.items()}
    me = [sys.executable, str(Path(__file__).resolve())]
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / "bench_tools.py").write_text(TOOLS)
        (work / "gateway.toml").write_text(CONFIG)
        gateway = [sys.executable, "-m", "toolkeeper", "serve", "gateway.toml"]
        address = f"127.0.0.1:{ports['toolkeeper']}"
        with (
            process([*gateway, "--http", address], work),
            process([*me, "--serve", "plain", "--port", str(ports["plain"])], work),
            process([*me, "--serve", "json", "--port", str(ports["json"])], work),
            process(
                [*me, "--serve", "proxy", "--port", str(ports["proxy"]), "--target", urls["plain"]],
                work,
            ),
        ):
            for port in ports.values():
                await_port(port)
            print(
                f"{os.cpu_count()} CPUs; sequential tools/call, up to {args.calls} calls or "
                f"{args.seconds:.0f} s per target and era"
            )
            for mode in ERAS:
                rates = anyio.run(
                    calls_per_second, urls, mode, args.calls, args.seconds, args.rounds
                )
                era = "2025-11-25 (sessions)" if mode == "legacy" else "2026-07-28 (stateless)"
                print(f"\n{era}")
                for name, label in (
                    ("toolkeeper", "a. toolkeeper serve (SQLite ledger)"),
                    ("plain", "b. plain SDK MCPServer"),
                    ("json", "j. plain SDK MCPServer, JSON responses"),
                    ("proxy", "c. FastMCP proxy -> b"),
                ):
                    print(f"  {label:<40} {rates[name]:8.1f} calls/s")
                a = rates["toolkeeper"]
                print(
                    f"  a/b = {a / rates['plain']:.2f}   a/j = {a / rates['json']:.2f}   "
                    f"a/c = {a / rates['proxy']:.2f}"
                )


if __name__ == "__main__":
    main()
