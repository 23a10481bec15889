"""What the gateway tests share: a configuration over fixtures/gateway_tools.py (principals
alice, who may read and write items, and bob, who may only read), and MCP SDK clients for it
over Streamable HTTP and stdio."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

FIXTURES = Path(__file__).parent / "fixtures"
ERAS = ("legacy", "2026-07-28")
"""The SDK client's modes: the 2025-11-25 handshake, and the 2026-07-28 stateless protocol."""
ALICE = "alice-token"
BOB = "bob-token"

POLICY = """
@id("tests.no_vault")
forbid (principal, action, resource is Toolkeeper::Tool)
when { resource.id == "lookup" && context.arguments has item && context.arguments.item == "vault" };
"""

CONFIG = """
home = "{home}"
tools = ["gateway_tools"]
policies = ["policy.cedar"]
stdio_principal = "alice"

[principals.alice]
tenant = "acme"
capabilities = ["items:read", "items:write"]
token = "{alice}"

[principals.bob]
tenant = "acme"
capabilities = ["items:read"]
token_env = "GATEWAY_TEST_BOB_TOKEN"

[http]
host = "127.0.0.1"
port = 0
"""


@dataclass(frozen=True)
class Gateway:
    """A configuration directory, its ledger home and (when serving) its URL."""

    config: Path
    home: Path
    url: str = ""


def write_gateway(directory: Path) -> Gateway:
    home = directory / "home"
    shutil.copy(FIXTURES / "gateway_tools.py", directory / "gateway_tools.py")
    (directory / "policy.cedar").write_text(POLICY)
    config = directory / "toolkeeper.toml"
    config.write_text(CONFIG.format(home=home, alice=ALICE))
    return Gateway(config, home)


def environment() -> dict[str, str]:
    return {**os.environ, "GATEWAY_TEST_BOB_TOKEN": BOB, "PYTHONUNBUFFERED": "1"}


def serve_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "toolkeeper", "serve", str(config), *extra]


@contextmanager
def running_gateway(gateway: Gateway, *, cwd: Path | None = None) -> Iterator[Gateway]:
    """`toolkeeper serve CONFIG --http 127.0.0.1:0` in a subprocess, stopped on exit."""
    log_path = (cwd or gateway.config.parent) / "serve.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            serve_command(gateway.config, "--http", "127.0.0.1:0"),
            stdout=subprocess.PIPE,
            stderr=log,
            env=environment(),
            cwd=cwd,
            text=True,
        )
        try:
            yield Gateway(gateway.config, gateway.home, _await_url(process, log_path))
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _await_url(process: subprocess.Popen[str], log: Path) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            line = process.stdout.readline()
            if line.startswith("toolkeeper gateway listening on "):
                return line.rsplit(" ", 1)[-1].strip()
        if process.poll() is not None:
            break
    raise AssertionError(f"the gateway did not start:\n{log.read_text()}")


@asynccontextmanager
async def http_client(url: str, token: str | None, mode: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def stdio_client(gateway: Gateway, mode: str) -> Client:
    parameters = StdioServerParameters(
        command=sys.executable,
        args=serve_command(gateway.config)[1:],
        env=environment(),
    )
    return Client(parameters, mode=mode)
