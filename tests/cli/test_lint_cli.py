"""`toolkeeper lint`: findings grouped by contract with path and fix, a summary line, exit 1
on errors, 0 otherwise, 2 for a target it cannot read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolkeeper.cli import main

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "examples" / "catalog"
MCP_LIST = ROOT / "examples" / "catalogs" / "mcp_tools_list.json"


def write_contract(path: Path, **fields: object) -> Path:
    data = {
        "id": "get_invoice",
        "version": "1.0.0",
        "description": "Read one invoice: amount, currency, status and the customer it bills.",
        "when_to_use": "You know the invoice id.",
        "when_not_to_use": "You only know the customer; use search_invoices instead.",
        "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
        "output_schema": {"type": "object", "properties": {"amount": {"type": "number"}}},
        "side_effect": "none",
        "timeout": 5,
        "result_projection": {"summary_template": "Amount {amount}"},
        "examples": [{"arguments": {}}],
        **fields,
    }
    path.write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
    return path


def test_clean_catalog_exits_zero_with_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(CATALOG)]) == 0
    assert capsys.readouterr().out.strip() == "Checked 5 contracts: 0 errors, 0 warnings, 0 info."


def test_errors_exit_one_and_print_grouped_findings_with_fixes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_contract(tmp_path / "invoice.json", version=None, side_effect=None)
    assert main(["lint", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"get_invoice@0.0.0  ({source})"
    assert lines[1].startswith("  error   TK501 /side_effect: side effect is not declared")
    assert lines[2].startswith('          fix: declare "none" if it only reads')
    assert lines[3].startswith("  error   TK601 /version:")
    assert lines[-1] == "Checked 1 contract: 2 errors, 0 warnings, 0 info."


def test_warnings_alone_exit_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_contract(tmp_path / "a.json", when_to_use=None)
    assert main(["lint", str(tmp_path / "a.json")]) == 0
    assert "warning TK202 /when_to_use" in capsys.readouterr().out


def test_json_format_is_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(MCP_LIST), "--format", "json", "--select", "TK305"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["summary"] == {"contracts": 7, "errors": 0, "warnings": 1, "info": 0}
    (finding,) = document["findings"]
    assert finding == {
        "code": "TK305",
        "severity": "warning",
        "contract": "manage_issue@0.0.0",
        "source": str(MCP_LIST),
        "path": "/input_schema/properties/action",
        "message": finding["message"],
        "fix": finding["fix"],
    }


def test_select_ignore_and_max_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_contract(tmp_path / "a.json", version=None)
    assert main(["lint", str(tmp_path), "--ignore", "TK6"]) == 0
    assert main(["lint", str(tmp_path), "--select", "TK2", "--max-tokens", "5"]) == 0
    out = capsys.readouterr().out
    assert "TK204" in out and "over the budget of 5" in out
    assert "TK601" not in out


def test_unknown_code_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(CATALOG), "--select", "TK999"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("toolkeeper: error: select: 'TK999' matches no lint code")


def test_bad_max_tokens_is_rejected_by_the_parser() -> None:
    with pytest.raises(SystemExit) as info:
        main(["lint", str(CATALOG), "--max-tokens", "0"])
    assert info.value.code == 2


def test_missing_target_exits_two_naming_the_path_and_accepted_kinds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["lint", "no/such/catalog"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("toolkeeper: error: no/such/catalog does not exist;")
    assert "a directory of contract files" in err
    assert "package.module:attribute" in err
    assert len(err.strip().splitlines()) == 1


def test_missing_target_with_json_format_prints_a_json_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["lint", "no/such/catalog", "--format", "json"]) == 2
    error = json.loads(capsys.readouterr().err)
    assert (error["error"], error["source"]) == ("CatalogError", "no/such/catalog")


def test_module_targets_resolve_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tk_cli_lint_tools.py").write_text(
        "from toolkeeper.contract.model import ToolContract\n"
        "TOOL = ToolContract(id='get_rate', description='Read a rate.')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert main(["lint", "tk_cli_lint_tools", "--select", "TK601"]) == 1
    assert "get_rate@0.0.0  (tk_cli_lint_tools:TOOL)" in capsys.readouterr().out


def test_real_subprocess_over_the_shipped_catalogs() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    def lint(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "toolkeeper", "lint", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=60,
        )

    clean = lint("examples/catalog")
    assert (clean.returncode, clean.stderr) == (0, "")
    assert clean.stdout.strip() == "Checked 5 contracts: 0 errors, 0 warnings, 0 info."

    # Import defaults never fail a catalog: they are one TK004 note.
    imported = lint("examples/catalogs/mcp_tools_list.json", "--format", "json")
    assert (imported.returncode, imported.stderr) == (0, "")
    document = json.loads(imported.stdout)
    assert document["summary"]["contracts"] == 7 and document["summary"]["errors"] == 0
    assert [f["code"] for f in document["findings"]].count("TK004") == 1
