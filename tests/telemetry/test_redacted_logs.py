"""While a gateway runs, every line the process logs passes its harness's redactor: a tool
or an upstream that writes a resolved credential into a log line does not leak it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from telemetry_support import ALICE

from toolkeeper import Proposal, Status, ToolContext, tool
from toolkeeper.gateway.app import open_gateway
from toolkeeper.gateway.config.settings import load_config

pytestmark = pytest.mark.anyio

SECRET = "sk-live-4f0c2a9be17d"
tool_log = logging.getLogger("tests.telemetry.careless_tool")


@tool(side_effect="none", credentials=["api_key"])
def careless(item: str, context: ToolContext) -> dict[str, Any]:
    """A read whose author logs the credential it was handed."""
    tool_log.warning("calling the backend with key %s for %s", context.secrets["api_key"], item)
    return {"item": item}


async def test_a_credential_a_tool_logs_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TOOLKEEPER_SECRET_API_KEY", SECRET)
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'home = "{tmp_path / "home"}"\n[http]\nauth = "none"\nprincipal = "a"\n[principals.a]\n'
    )
    caplog.set_level(logging.WARNING, logger=tool_log.name)
    async with open_gateway(load_config(config), transport="http") as server:
        server.harness.register(careless)
        envelope = await server.harness.invoke(
            Proposal("c", "careless", {"item": "x"}), principal=ALICE
        )
    assert envelope.status is Status.SUCCEEDED, envelope.error
    [record] = [r for r in caplog.records if r.name == tool_log.name]
    assert record.getMessage() == "calling the backend with key [REDACTED] for x"
    assert SECRET not in caplog.text
