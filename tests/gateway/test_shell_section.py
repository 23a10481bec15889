"""The gateway's ``shell`` section: ``shell = { roots = [...] }`` serves the governed shell
tool to MCP clients through the one pipeline, with paths beside the configuration file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from toolkeeper import Principal, Proposal
from toolkeeper.errors import ConfigError
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.gateway.loader import build_harness
from toolkeeper.gateway.server import GatewayServer

pytestmark = pytest.mark.anyio

ALICE = Principal("alice")
NEVER_RM = """
@id("ops.never_rm")
forbid (principal, action == Toolkeeper::Action::"run", resource == Toolkeeper::Program::"rm");
"""


def configure(tmp_path: Path, shell: str) -> Path:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "notes.txt").write_text("one\ntwo\n")
    config = tmp_path / "gateway.toml"
    config.write_text(f'home = "home"\n{shell}\n')
    return config


def structured(result: Any) -> dict[str, Any]:
    data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(data["structuredContent"])


async def test_the_shell_section_serves_the_shell_tool(tmp_path: Path) -> None:
    config = configure(tmp_path, 'shell = { roots = ["repo"], timeout = 5 }')
    loaded = load_config(config)
    assert loaded.shell is not None and loaded.shell.roots == [tmp_path / "repo"]
    harness = build_harness(loaded)
    server = GatewayServer(harness, principal_of=lambda _request: ALICE)
    try:
        async with Client(server.lowlevel) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert listed["shell"].input_schema["required"] == ["command"]
            read = await client.call_tool("shell", {"command": "wc -l notes.txt"})
            assert not read.is_error
            assert structured(read)["stdout"].startswith("2 notes.txt")
            write = await client.call_tool("shell", {"command": "rm notes.txt"})
            envelope = structured(write)
            assert envelope["status"] == "pending_approval", json.dumps(envelope)
            assert (tmp_path / "repo" / "notes.txt").exists()
    finally:
        harness.close()


async def test_shell_policies_are_read_beside_the_file(tmp_path: Path) -> None:
    (tmp_path / "shell.cedar").write_text(NEVER_RM)
    config = configure(tmp_path, '[shell]\nroots = ["repo"]\npolicies = ["shell.cedar"]')
    harness = build_harness(load_config(config))
    try:
        denied = await harness.invoke(
            Proposal("c1", "shell", {"command": "rm -f notes.txt"}), principal=ALICE
        )
        assert denied.error is not None and "ops.never_rm" in denied.error.message
        assert (tmp_path / "repo" / "notes.txt").exists()
    finally:
        harness.close()


async def test_a_shell_section_without_roots_is_refused(tmp_path: Path) -> None:
    config = configure(tmp_path, "shell = { timeout = 5 }")
    with pytest.raises(ConfigError, match=r"shell\.roots"):
        load_config(config)
