"""Where state goes: a configuration's paths resolve against its folder, the demo keeps its
own home, `ledger` and `approvals` reach a configuration's ledger (SQLite or PostgreSQL), and
a harness says where it writes."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import environment, toolkeeper

from toolkeeper import Principal, Proposal
from toolkeeper.errors import ConfigError
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.gateway.loader import build_harness
from toolkeeper.runtime.harness import Harness

ROOT = Path(__file__).resolve().parents[2]
DSN = os.environ.get("TOOLKEEPER_TEST_POSTGRES_DSN")
TOOLS = '''
from toolkeeper import tool


@tool(side_effect="none")
def echo(text: str) -> str:
    """Say the text back."""
    return text


@tool(version="1.0.0", side_effect="committing", idempotency="keyed")
def send(text: str) -> str:
    """Send the text."""
    return text
'''


def write_gateway(folder: Path, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "state_tools.py").write_text(TOOLS)
    (folder / "policy.cedar").write_text("// nothing beyond the defaults\n")
    (folder / "me.token").write_text("secret-token\n")
    config = folder / "gateway.toml"
    config.write_text(
        f'{extra}tools = ["state_tools"]\npolicies = ["policy.cedar"]\nstdio_principal = "me"\n'
        '[principals.me]\ntoken_file = "me.token"\n'
        '[mcpServers.up]\ncommand = "python"\ncwd = "servers"\n'
    )
    return config


def test_relative_paths_mean_beside_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_path = write_gateway(tmp_path / "gw")
    monkeypatch.chdir(tmp_path)  # anywhere but the configuration's folder
    config = load_config(Path("gw") / "gateway.toml")
    folder = (tmp_path / "gw").resolve()
    assert config.home == folder / ".toolkeeper"
    assert config.policies == [folder / "policy.cedar"]
    assert config.upstreams["up"].cwd == str(folder / "servers")
    assert config.principals["me"].resolve_token("principals.me") == "secret-token"
    absolute = write_gateway(tmp_path / "abs", extra=f'home = "{tmp_path / "state"}"\n')
    assert load_config(absolute).home == tmp_path / "state"
    assert config_path.exists()


def test_a_token_file_is_one_token_source(tmp_path: Path) -> None:
    config = write_gateway(tmp_path)
    config.write_text(config.read_text().replace('token_file = "me.token"', 'token_file = "no"'))
    with pytest.raises(ConfigError, match=r"principals.me.token_file: cannot read .*no"):
        load_config(config).tokens()


def _calls(config: Path) -> None:
    harness = build_harness(load_config(config))
    me = Principal("me")
    harness.invoke_sync(Proposal("c1", "echo", {"text": "hi"}), principal=me)
    harness.invoke_sync(Proposal("c2", "send", {"text": "hi"}), principal=me)
    harness.close()


def test_ledger_and_approvals_read_a_configured_sqlite_ledger(tmp_path: Path) -> None:
    config = write_gateway(tmp_path / "gw")
    _calls(config)
    listed = toolkeeper("ledger", "list", "--config", str(config), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "echo@0.0.0" in listed.stdout and "2 invocation(s)" in listed.stdout
    pending = toolkeeper("approvals", "list", "--config", str(config), "--format", "json")
    (approval,) = json.loads(pending.stdout)
    decided = toolkeeper("approvals", "deny", approval["approval_id"], "--config", str(config))
    assert decided.returncode == 0 and "denied" in decided.stdout
    both = toolkeeper("ledger", "list", "--config", str(config), "--home", str(tmp_path))
    assert both.returncode == 2 and "pass --config or --home, not both" in both.stderr


@pytest.fixture
def database() -> Iterator[str]:
    """A fresh PostgreSQL database: a configured ledger uses the default schema name, so a
    database of its own keeps this test apart from every other."""
    if not DSN:
        pytest.skip("TOOLKEEPER_TEST_POSTGRES_DSN is not set")
    import psycopg

    name = f"tk_cli_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield DSN.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_ledger_and_approvals_read_a_configured_postgres_ledger(
    tmp_path: Path, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_gateway(tmp_path / "gw", extra='ledger_dsn_env = "CLI_TEST_DSN"\n')
    monkeypatch.setenv("CLI_TEST_DSN", database)
    _calls(config)
    env = environment(CLI_TEST_DSN=database)
    listed = toolkeeper("ledger", "list", "--config", str(config), env=env)
    assert listed.returncode == 0, listed.stderr
    assert "2 invocation(s)" in listed.stdout
    pending = toolkeeper("approvals", "list", "--config", str(config), env=env)
    assert "send@1.0.0" in pending.stdout and "1 approval(s)" in pending.stdout
    assert not (tmp_path / "gw" / ".toolkeeper" / "ledger.db").exists()


def test_the_demo_keeps_its_own_home(tmp_path: Path) -> None:
    """The demo's manuscript store must not be the example gateway's (a different format:
    the gateway's tools failed with KeyError after a demo run from the same directory)."""
    fresh = tmp_path / "cwd"
    fresh.mkdir()
    (fresh / "examples").symlink_to(ROOT / "examples")
    default = toolkeeper("demo", "manuscript_metadata", cwd=fresh)
    assert default.returncode == 0, default.stderr
    assert (fresh / ".toolkeeper" / "demo" / "manuscripts.json").exists()
    assert not (fresh / ".toolkeeper" / "manuscripts.json").exists()
    assert not (fresh / ".toolkeeper" / "ledger.db").exists()


def test_a_harness_says_where_it_writes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="toolkeeper.runtime.harness"):
        harness = Harness(home=tmp_path / "home").open()
        harness.open()  # once, not per open call
        harness.close()
    (record,) = [r for r in caplog.records if "writes its ledger" in r.message]
    assert str(tmp_path / "home" / "ledger.db") in record.message
    assert str(tmp_path / "home" / "artifacts") in record.message
