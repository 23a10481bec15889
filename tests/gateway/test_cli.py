"""`toolkeeper tools`, `toolkeeper call` and `toolkeeper serve`: what a user types and reads."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from gateway_support import ALICE, Gateway

from toolkeeper.cli import main
from toolkeeper.cli.serve import parse_address
from toolkeeper.errors import ConfigError
from toolkeeper.ledger.sqlite import SQLiteLedger


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_tools_lists_what_the_token_may_see(
    http_gateway: Gateway, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "tools", "--url", http_gateway.url, "--token", ALICE)
    assert code == 0
    assert "lookup(item: string, scale?: integer)  (read-only)\n    Read one item's value." in out
    assert "set_item(item: string, value: integer)  (changes things)" in out
    assert out.rstrip().endswith("5 tool(s)")
    code, out, _ = run(
        capsys, "tools", "--url", http_gateway.url, "--token", ALICE, "--format", "json"
    )
    assert [tool["name"] for tool in json.loads(out)][:3] == ["archive_item", "inventory", "lookup"]


@pytest.mark.parametrize("mode", ["auto", "legacy", "2026-07-28"])
def test_call_prints_the_envelope_and_exits_by_outcome(
    http_gateway: Gateway, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    common = ("--url", http_gateway.url, "--token", ALICE, "--mode", mode)
    code, out, _ = run(capsys, "call", "lookup", '{"item": "kiwi"}', *common)
    assert code == 0
    assert out.startswith("status: succeeded\n")
    assert '"value": 4' in out and "request_id: req_" in out
    code, out, _ = run(capsys, "call", "lookup", '{"item": 4}', *common)
    assert code == 1
    assert "error: invalid_argument" in out
    code, out, _ = run(capsys, "call", "lookup", '{"item": "kiwi"}', *common, "--format", "json")
    assert json.loads(out)["structuredContent"] == {"item": "kiwi", "value": 4}


def test_call_explains_what_to_fix(
    http_gateway: Gateway, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "call", "lookup", "{item: 1}", "--url", http_gateway.url)
    assert code == 2 and "argument '{item: 1}' is not JSON" in err
    code, _, err = run(capsys, "call", "lookup", "[1]", "--url", http_gateway.url)
    assert code == 2 and "argument '[1]' must hold a JSON object" in err
    code, _, err = run(capsys, "tools", "--url", http_gateway.url, "--token", "nope")
    assert code == 2
    assert "refused the token (HTTP 401); pass --token" in err and "nope" not in err
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        nobody = f"http://127.0.0.1:{unused.getsockname()[1]}/mcp"
    code, _, err = run(capsys, "tools", "--url", nobody)
    assert code == 2 and f"no gateway answers at {nobody}" in err


def test_parse_address() -> None:
    assert parse_address("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_address("[::1]:0") == ("::1", 0)
    for bad in ("8765", "host:", "host:port", "host:70000"):
        with pytest.raises(ConfigError, match="is not HOST:PORT"):
            parse_address(bad)


def test_serve_refuses_what_cannot_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLKEEPER_HOME", "unset")  # serve exports it; restored afterwards
    config = tmp_path / "gateway.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[principals.alice]\n')
    code, _, err = run(capsys, "serve", str(config))
    assert code == 2 and "stdio_principal is not set" in err
    code, _, err = run(capsys, "serve", str(config), "--http", "127.0.0.1:0")
    assert code == 2 and "no principal has a token" in err
    config.write_text(config.read_text() + 'token = "t"\n')
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = run(capsys, "serve", str(config), "--http", f"127.0.0.1:{port}")
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in err
    code, _, err = run(capsys, "serve", str(tmp_path / "missing.toml"))
    assert code == 2 and "cannot read configuration" in err


def test_each_cli_call_carries_its_own_call_id(
    http_gateway: Gateway, capsys: pytest.CaptureFixture[str]
) -> None:
    # One connection per `call`: the JSON-RPC id repeats, the call id must not.
    common = ("--url", http_gateway.url, "--token", ALICE)
    ids = []
    for _ in range(3):
        code, out, _ = run(capsys, "call", "lookup", "item=kiwi", *common)
        assert code == 0
        [line] = [line for line in out.splitlines() if line.startswith("call_id: ")]
        ids.append(line.removeprefix("call_id: "))
    assert len(set(ids)) == 3 and all(i.startswith("cli-") for i in ids)
    ledger = SQLiteLedger(http_gateway.home / "ledger.db")
    try:
        deadline = time.monotonic() + 10  # the gateway writes a read's row behind
        while not set(ids) <= (recorded := {r.call_id for r in ledger.query(tool="lookup")}):
            assert time.monotonic() < deadline, recorded
            time.sleep(0.05)
    finally:
        ledger.close()
