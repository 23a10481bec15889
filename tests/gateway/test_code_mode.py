"""`code_mode = true`: the gateway serves run_code, and a program's calls are governed calls
of the caller — including an approval pause resumed through ``toolkeeper.resume``."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from gateway_support import ALICE, BOB, http_client, stdio_client, write_gateway

from toolkeeper.cli import main
from toolkeeper.gateway.app import open_gateway, serve_http
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.gateway.loader import build_harness

pytestmark = pytest.mark.anyio

PROGRAM = """
values = [lookup(name)["value"] for name in ["apples", "figs"]]
print("read", values)
set_item("apples", sum(values))
print("set")
sum(values)
"""


async def test_run_code_through_the_gateway_pauses_and_resumes(tmp_path: Path) -> None:
    gateway = write_gateway(tmp_path)
    gateway.config.write_text(
        gateway.config.read_text().replace(
            'stdio_principal = "alice"', 'stdio_principal = "alice"\ncode_mode = true'
        )
    )
    async with stdio_client(gateway, "2026-07-28") as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        run_code = listed["toolkeeper.run_code"]
        assert run_code.input_schema["required"] == ["code"]
        assert "resume" not in run_code.input_schema["properties"]
        pending = await client.call_tool("toolkeeper.run_code", {"code": PROGRAM})
        content = pending.structured_content
        assert pending.is_error and content is not None and pending.meta is not None
        approval_id = pending.meta["toolkeeper.dev/approval_id"]
        assert content["stdout"] == "read [6, 4]\n"
        assert content["paused_at"]["tool"] == "set_item@1.0.0"
        assert content["paused_at"]["approval_id"] == approval_id
        argv = ["approvals", "approve", approval_id, "--home", str(gateway.home), "--by", "t"]
        assert main(argv) == 0
        done = await client.call_tool("toolkeeper.resume", {"approval_id": approval_id})
        assert not done.is_error, done
        assert done.structured_content is not None
        assert done.structured_content["value"] == 10
        assert done.structured_content["stdout"] == "read [6, 4]\nset\n"
        assert [c["status"] for c in done.structured_content["calls"]] == ["succeeded"] * 3


async def test_the_configured_tier_runs_a_principals_programs(tmp_path: Path) -> None:
    """`code_tiers`: alice's programs run in CPython when her call names no tier."""
    gateway = write_gateway(tmp_path)
    gateway.config.write_text(
        gateway.config.read_text().replace(
            'stdio_principal = "alice"',
            'stdio_principal = "alice"\ncode_mode = true\ncode_tiers = { alice = "cpython" }',
        )
    )
    program = "import platform\nplatform.python_implementation()"
    async with stdio_client(gateway, "2026-07-28") as client:
        ran = await client.call_tool("toolkeeper.run_code", {"code": program})
        assert not ran.is_error, ran
        assert ran.structured_content is not None
        assert ran.structured_content["value"] == "CPython"


async def test_run_code_is_listed_with_the_callers_own_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like a vendor view, the listed run_code carries the SDK of the principal listing it:
    alice (items:write) sees set_item among its functions, bob (items:read) does not."""
    monkeypatch.setenv("GATEWAY_TEST_BOB_TOKEN", BOB)
    gateway = write_gateway(tmp_path)
    gateway.config.write_text("code_mode = true\n" + gateway.config.read_text())
    config = load_config(gateway.config)
    async with open_gateway(config, transport="http") as server, anyio.create_task_group() as tg:
        ready: list[str] = []
        tg.start_soon(lambda: serve_http(server, config, port=0, on_ready=ready.append))
        with anyio.fail_after(10):
            while not ready:
                await anyio.sleep(0.01)
        described = {}
        for who, token in (("alice", ALICE), ("bob", BOB)):
            async with http_client(ready[0], token, "legacy") as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                described[who] = tools["toolkeeper.run_code"].description or ""
        tg.cancel_scope.cancel()
    assert "def lookup(item: str, scale: int = 1)" in described["alice"]
    assert "def set_item(" in described["alice"]
    assert "def lookup(item: str, scale: int = 1)" in described["bob"]
    assert "def set_item(" not in described["bob"]


@pytest.mark.parametrize(("line", "spare"), [("", True), ("code_spare = false", False)])
def test_the_spare_sandbox_is_configured(tmp_path: Path, line: str, spare: bool) -> None:
    """`code_spare` (default true) reaches the harness, which keeps a spare CPython sandbox
    only when it is set."""
    gateway = write_gateway(tmp_path)
    gateway.config.write_text(
        gateway.config.read_text().replace(
            'stdio_principal = "alice"', f'stdio_principal = "alice"\ncode_mode = true\n{line}'
        )
    )
    harness = build_harness(load_config(gateway.config))
    try:
        assert harness.code_spare is spare and harness.code_mode().spare is spare
    finally:
        harness.close()
