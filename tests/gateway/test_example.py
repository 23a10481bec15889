"""The README's gateway walk-through on examples/gateway/toolkeeper.toml, as a user runs it: the
gateway in one process, `toolkeeper` commands in another, from another directory (the
configuration's paths, its home among them, are relative to its own folder)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
from gateway_support import Gateway, running_gateway

from toolkeeper.cli import main
from toolkeeper.cli.client import DEMO_TOKEN
from toolkeeper.gateway.upstreams.pins import PinStore

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gateway" / "toolkeeper.toml"
REVIEWER = "toolkeeper-demo-reviewer"


def toolkeeper(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def call(capsys: pytest.CaptureFixture[str], url: str, tool: str, **arguments: object) -> dict:
    argv = ("call", tool, json.dumps(arguments), "--url", url, "--format", "json")
    code, out = toolkeeper(capsys, *argv)
    assert code in (0, 1, 3), out  # 3: pending approval
    return json.loads(out)


def test_the_readme_walk_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A copy of the example, so its state (home is .toolkeeper beside the file) stays out of
    # the checkout; run from another directory; `python` (the upstream's command) is this one.
    for folder in ("gateway", "catalog"):  # the tools read their contracts from ../catalog
        shutil.copytree(ROOT / "examples" / folder, tmp_path / "examples" / folder)
    example = tmp_path / "examples" / "gateway"
    config, home = example / EXAMPLE.name, example / ".toolkeeper"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("TOOLKEEPER_TOKEN", raising=False)
    with running_gateway(Gateway(config, home), cwd=elsewhere) as gateway:
        url = gateway.url
        code, out = toolkeeper(capsys, "tools", "--url", url)
        assert code == 0 and "update_manuscript_metadata(" in out and "(changes things)" in out
        assert "style." not in out  # upstream tools wait for an operator's approval

        # the operator approves the pinned definitions (`toolkeeper upstreams approve`), once
        # the gateway (which serves before its upstreams connect) has seen them
        pins = PinStore.in_home(home)
        deadline = time.monotonic() + 30
        while pins.seen("style", "suggest_keywords") is None:
            assert time.monotonic() < deadline, "the gateway never listed the upstream's tools"
            time.sleep(0.1)
        for tool in ("word_count", "suggest_keywords"):
            pins.approve("style", tool, by="operator")
        deadline = time.monotonic() + 10
        while "style.word_count" not in toolkeeper(capsys, "tools", "--url", url)[1]:
            assert time.monotonic() < deadline, "the gateway did not serve the approved tools"
            time.sleep(0.2)  # the running gateway notices the new pins within a poll
        counted = call(capsys, url, "style.word_count", text="Governed tools. Two sentences.")
        assert counted["structuredContent"] == {"words": 4, "sentences": 2}

        current = call(capsys, url, "get_manuscript_metadata", manuscript_id="m-42")
        version = current["structuredContent"]["version"]
        preview = call(
            capsys,
            url,
            "preview_manuscript_metadata_update",
            manuscript_id="m-42",
            title="Governed Tool Use",
        )
        assert preview["structuredContent"]["changes"]["title"]["to"] == "Governed Tool Use"
        pending = call(
            capsys,
            url,
            "update_manuscript_metadata",
            manuscript_id="m-42",
            base_version=version,
            title="Governed Tool Use",
        )
        assert pending["isError"] and pending["structuredContent"]["status"] == "pending_approval"
        approval_id = pending["structuredContent"]["execution_meta"]["approval_id"]

        code, out = toolkeeper(
            capsys, "approvals", "approve", approval_id, "--by", "chief", "--config", str(config)
        )
        assert code == 0, out
        done = call(capsys, url, "toolkeeper.resume", approval_id=approval_id)
        assert not done["isError"], done
        assert done["structuredContent"]["version"] == version + 1
        after = call(capsys, url, "get_manuscript_metadata", manuscript_id="m-42")
        assert after["structuredContent"]["title"] == "Governed Tool Use"

        code, out = toolkeeper(capsys, "tools", "--url", url, "--token", REVIEWER)
        assert code == 0 and "update_manuscript_metadata" not in out
        assert "style.word_count" in out
    assert DEMO_TOKEN in EXAMPLE.read_text()
