"""`toolkeeper init DIR`, then `toolkeeper serve` on what it wrote: over stdio with the
official MCP SDK client, and over HTTP with `toolkeeper tools` and `toolkeeper call`."""

from __future__ import annotations

import os
import select
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cli_support import command, environment, toolkeeper
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import TextContent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def gateway(tmp_path: Path) -> Path:
    done = toolkeeper("init", str(tmp_path / "hello"))
    assert done.returncode == 0, done.stderr
    return tmp_path / "hello"


def test_init_writes_a_gateway_and_keeps_the_token_private(gateway: Path) -> None:
    assert {p.name for p in gateway.iterdir()} == {
        "my_tools.py",
        "gateway.toml",
        "policy.cedar",
        "local.token",
        ".gitignore",
    }
    token = (gateway / "local.token").read_text().strip()
    assert len(token) >= 40
    assert stat.S_IMODE((gateway / "local.token").stat().st_mode) == 0o600
    again = toolkeeper("init", str(gateway))
    assert again.returncode == 2 and "overwrites nothing" in again.stderr
    assert (gateway / "local.token").read_text().strip() == token


def test_init_prints_the_next_commands_and_never_the_token(tmp_path: Path) -> None:
    done = toolkeeper("init", str(tmp_path / "hi"))
    token = (tmp_path / "hi" / "local.token").read_text().strip()
    assert token not in done.stdout + done.stderr
    assert f"toolkeeper serve {tmp_path / 'hi' / 'gateway.toml'}" in done.stdout
    assert f'TOOLKEEPER_TOKEN="$(cat {tmp_path / "hi" / "local.token"})"' in done.stdout


@pytest.mark.anyio
async def test_serve_over_stdio_with_the_sdk_client(gateway: Path, tmp_path: Path) -> None:
    """Launched as an MCP host would, from another directory: the stdio client acts as the
    local principal, and the ledger lands beside the configuration."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    parameters = StdioServerParameters(
        command=sys.executable,
        args=command("serve", str(gateway / "gateway.toml"))[1:],
        env=environment(),
        cwd=str(elsewhere),
    )
    async with Client(parameters, mode="legacy") as client:
        listing = await client.list_tools()
        assert {"greet", "add"} <= {t.name for t in listing.tools}
        result = await client.call_tool("greet", {"name": "Ada"})
        assert not result.is_error
        assert result.structured_content == {"result": "Hello, Ada!"}
        assert isinstance(result.content[0], TextContent)
    assert (gateway / ".toolkeeper" / "ledger.db").exists()
    assert not (elsewhere / ".toolkeeper").exists()


@contextmanager
def serving_http(config: Path) -> Iterator[str]:
    process = subprocess.Popen(
        command("serve", str(config), "--http", "127.0.0.1:0", "--log-level", "info"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(),
        text=True,
    )
    assert process.stdout is not None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if select.select([process.stdout], [], [], 0.5)[0]:
                line = process.stdout.readline()
                if line.startswith("toolkeeper gateway listening on "):
                    yield line.split()[-1]
                    return
                assert line, f"serve exited: {process.communicate()[1]}"
        raise AssertionError("the gateway did not start")
    finally:
        process.terminate()
        process.wait(timeout=10)


_PUBLISH = '''

@tool(version="1.0.0", side_effect="committing", idempotency="keyed")
def publish(text: str) -> str:
    """Publish a text for everyone to read.

    Args:
        text: What to publish.
    """
    return text
'''


def test_serve_over_http_with_the_token_file(gateway: Path) -> None:
    """What init prints, run: tools and calls with the token read from its file; a call
    waiting for approval exits 3; ledger and approvals reach the state with --config."""
    with (gateway / "my_tools.py").open("a") as tools:
        tools.write(_PUBLISH)
    config = str(gateway / "gateway.toml")
    with serving_http(gateway / "gateway.toml") as url:
        token = (gateway / "local.token").read_text().strip()
        env = environment(TOOLKEEPER_URL=url, TOOLKEEPER_TOKEN=token)
        listed = toolkeeper("tools", env=env)
        assert listed.returncode == 0, listed.stderr
        assert "greet(name: string)  (read-only)" in listed.stdout
        assert "add(a: number, b: number)  (read-only)" in listed.stdout
        greeted = toolkeeper("call", "greet", "name=Ada", env=env)
        assert greeted.returncode == 0 and '"result": "Hello, Ada!"' in greeted.stdout
        summed = toolkeeper("call", "add", "-", input='{"a": 2, "b": 3.5}', env=env)
        assert summed.returncode == 0 and '"result": 5.5' in summed.stdout
        wrong = toolkeeper("call", "add", "a=two", "b=1", env=env)
        assert wrong.returncode == 1 and "status: rejected" in wrong.stdout
        pending = toolkeeper("call", "publish", "text=hello", env=env)
        assert pending.returncode == 3 and "status: pending_approval" in pending.stdout
        refused = toolkeeper("tools", env=environment(TOOLKEEPER_URL=url))
        assert refused.returncode == 2 and "refused the token (HTTP 401)" in refused.stderr
    approvals = toolkeeper("approvals", "list", "--config", config)
    assert "publish@1.0.0" in approvals.stdout and "1 approval(s)" in approvals.stdout
    ledger = toolkeeper("ledger", "list", "--config", config, "--status", "succeeded")
    assert ledger.returncode == 0 and "2 invocation(s)" in ledger.stdout
    assert os.path.exists(gateway / ".toolkeeper" / "ledger.db")
