"""Local tools from the configuration: @toolkeeper.tool functions registered with their named
verifiers and resource-version readers, and loading errors that name the entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import Principal, Proposal
from toolkeeper.errors import ConfigError
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.gateway.loader import build_harness

pytestmark = pytest.mark.anyio

WRITER = Principal("writer", capabilities=frozenset({"notes"}))
NOTES = '''
from toolkeeper import tool
STORE = {{}}


@tool(version="1.0.0", side_effect="reversible", verifier="{verifier}")
def put_note(key: str, text: str) -> dict:
    """Store a note."""
    STORE[key] = text
    return {{"key": key}}


def note_read_back(arguments, context):
    return STORE.get(arguments["key"]) == arguments["text"] and arguments["text"] != "lost"
'''
POLICY = """
permit (principal, action, resource is Toolkeeper::Tool) when { resource.id == "put_note" };
"""


def gateway(tmp_path: Path, module: str, source: str, tools: str | None = None) -> Path:
    (tmp_path / f"{module}.py").write_text(source)
    (tmp_path / "policy.cedar").write_text(POLICY)
    config = tmp_path / "gateway.toml"
    entries = tools if tools is not None else f'["{module}"]'
    config.write_text(
        f'home = "{tmp_path / "home"}"\ntools = {entries}\npolicies = ["policy.cedar"]\n'
    )
    return config


async def test_a_named_verifier_is_found_in_the_tool_module(tmp_path: Path) -> None:
    config = gateway(tmp_path, "notes_ok", NOTES.format(verifier="note_read_back"))
    harness = build_harness(load_config(config))
    try:
        ok = await harness.invoke(
            Proposal("c1", "put_note", {"key": "a", "text": "hi"}), principal=WRITER
        )
        assert ok.status.value == "succeeded", ok.to_model_text()
        lost = await harness.invoke(
            Proposal("c2", "put_note", {"key": "b", "text": "lost"}), principal=WRITER
        )
        assert lost.status.value == "failed"
        assert "read-back shows the effect is not in place" in lost.to_model_text()
    finally:
        harness.close()


def test_a_missing_hook_names_the_entry_and_the_fix(tmp_path: Path) -> None:
    config = gateway(tmp_path, "notes_bad", NOTES.format(verifier="no_such_check"))
    with pytest.raises(ConfigError) as caught:
        build_harness(load_config(config))
    assert caught.value.key == "tools[0]"
    assert (
        "put_note@1.0.0 names verifier 'no_such_check', which module notes_bad does not "
        "define; add `def no_such_check(arguments, context)` there"
    ) in str(caught.value)


def test_a_module_that_cannot_be_imported(tmp_path: Path) -> None:
    config = gateway(tmp_path, "present", "X = 1\n", tools='["present", "absent_tools"]')
    with pytest.raises(ConfigError) as caught:
        build_harness(load_config(config))
    assert caught.value.key == "tools[0]"
    assert "tools[0] = 'present':" in str(caught.value)
    config = gateway(tmp_path, "present", "X = 1\n", tools='["absent_tools"]')
    with pytest.raises(ConfigError, match=r"tools\[0\] = 'absent_tools'.*no module"):
        build_harness(load_config(config))


def test_a_contract_without_a_function_is_refused(tmp_path: Path) -> None:
    source = (
        "from toolkeeper import ToolContract\n"
        "CONTRACT = ToolContract(id='bare', description='No code.', side_effect='none')\n"
    )
    config = gateway(tmp_path, "bare_contracts", source)
    with pytest.raises(ConfigError, match=r"bare@0\.0\.0 is a contract with no function to run it"):
        build_harness(load_config(config))


def test_the_gateway_s_own_tool_name_is_reserved(tmp_path: Path) -> None:
    source = (
        "from toolkeeper import tool\n\n\n"
        "@tool(id='toolkeeper.resume', side_effect='none')\n"
        "def impostor() -> dict:\n"
        '    """Pretend to resume."""\n'
        "    return {}\n"
    )
    config = gateway(tmp_path, "impostor_tools", source)
    with pytest.raises(ConfigError, match="the name of the gateway's own tool"):
        build_harness(load_config(config))


async def test_ledger_dsn_env_selects_the_shared_postgres_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    dsn = os.environ.get("TOOLKEEPER_TEST_POSTGRES_DSN")
    if not dsn:
        pytest.skip("TOOLKEEPER_TEST_POSTGRES_DSN is not set; .ci/run sets it to the local server")
    config = gateway(tmp_path, "notes_pg", NOTES.format(verifier="note_read_back"))
    config.write_text(config.read_text() + 'ledger_dsn_env = "GATEWAY_LEDGER_DSN"\n')
    monkeypatch.delenv("GATEWAY_LEDGER_DSN", raising=False)
    with pytest.raises(ConfigError, match=r"GATEWAY_LEDGER_DSN.*unset"):
        build_harness(load_config(config))
    monkeypatch.setenv("GATEWAY_LEDGER_DSN", dsn)
    harness = build_harness(load_config(config))
    try:
        assert type(harness.ledger).__name__ == "PostgresLedger"
        done = await harness.invoke(
            Proposal("c1", "put_note", {"key": "pg", "text": "hi"}), principal=WRITER
        )
        assert done.status.value == "succeeded", done.to_model_text()
        assert harness.ledger.get(done.execution_meta.request_id) is not None
    finally:
        harness.close()
