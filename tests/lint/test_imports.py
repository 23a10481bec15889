"""Import defaults are one note per catalog (TK004), never an error per tool; standard MCP
fields are not import problems (issue 11, "what hurt" 10; "Lint that helps")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.cli import main
from toolkeeper.contract.model import ToolContract
from toolkeeper.importers.catalog import Catalog, load_catalog
from toolkeeper.importers.formats import from_mcp_tool, from_openai_function
from toolkeeper.lint import LintConfig, Severity, lint_catalog, lint_contract
from toolkeeper.lint.imports import IMPORT_DEFAULTS

CATALOGS = Path(__file__).parent / "catalogs"
PUBLIC = sorted(CATALOGS.glob("*.json"))


def tools_of(name: str) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = json.loads((CATALOGS / name).read_text())["tools"]
    return tools


def tool(catalog: str, name: str) -> dict[str, Any]:
    return next(t for t in tools_of(catalog) if t["name"] == name)


@pytest.mark.parametrize("path", PUBLIC, ids=lambda p: p.stem)
def test_a_public_catalog_gets_one_note_and_no_default_per_tool(path: Path) -> None:
    catalog = load_catalog(path)
    report = lint_catalog(catalog)
    notes = [f for f in report.findings if f.code == "TK004"]
    assert len(notes) == 1
    assert notes[0].severity is Severity.INFO
    assert f"{len(catalog.contracts)} imported tool" in notes[0].message
    assert not {f.code for f in report.findings} & IMPORT_DEFAULTS


@pytest.mark.parametrize("path", PUBLIC, ids=lambda p: p.stem)
def test_no_import_default_fails_a_public_catalog(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", str(path)]) == 0
    assert "TK004" in capsys.readouterr().out


def test_the_note_counts_what_it_folds() -> None:
    report = lint_catalog(load_catalog(CATALOGS / "mcp-server-git.json"))
    (note,) = [f for f in report.findings if f.code == "TK004"]
    assert "TK601 on 12" in note.message and "TK503 on 12" in note.message
    # The git server's hints claim less than committing on 11 of its 12 tools.
    assert "TK509 on 11" in note.message
    assert "[upstreams.SERVER.tools.TOOL] side_effect" in note.fix


def test_the_whole_lint_of_one_imported_contract_still_says_everything() -> None:
    """lint_contract is the per-tool view: it reports the defaults, with override advice."""
    contract = from_mcp_tool(tool("mcp-server-time.json", "get_current_time"))
    findings = {f.code: f for f in lint_contract(contract)}
    assert findings["TK601"].severity is Severity.ERROR
    assert "[upstreams.SERVER.tools.get_current_time] version" in findings["TK601"].fix


def test_selecting_a_folded_code_shows_the_note_and_ignoring_the_note_hides_it() -> None:
    catalog = load_catalog(CATALOGS / "mcp-server-time.json")
    selected = lint_catalog(catalog, config=LintConfig(select=("TK601",)))
    assert [f.code for f in selected.findings] == ["TK004"]
    assert "TK601 on 2" in selected.findings[0].message
    assert "TK503" not in selected.findings[0].message  # not selected, not counted
    ignored = lint_catalog(catalog, config=LintConfig(ignore=("TK004",)))
    assert "TK004" not in {f.code for f in ignored.findings}
    assert not ignored.has_errors


def test_a_real_defect_of_an_imported_tool_still_fails() -> None:
    broken = {**tool("mcp-server-time.json", "convert_time")}
    broken["inputSchema"] = {**broken["inputSchema"], "required": ["source_timezone", "date"]}
    report = lint_catalog(Catalog(contracts=(from_mcp_tool(broken),)))
    assert [f.code for f in report.findings if f.severity is Severity.ERROR] == ["TK309"]


def test_a_reviewed_import_is_linted_like_any_contract() -> None:
    """Once the operator declares effects, the tool is no longer at its defaults."""
    reviewed = from_mcp_tool(
        tool("mcp-server-time.json", "convert_time"), side_effect="none", version="1.0.0"
    )
    report = lint_catalog(Catalog(contracts=(reviewed,)))
    assert "TK004" not in {f.code for f in report.findings}
    assert "TK506" in {f.code for f in report.findings}


# -- TK003: standard MCP fields are not import problems ---------------------------------


@pytest.mark.parametrize(
    ("catalog", "name", "field"),
    [
        ("github-mcp-server.json", "create_branch", "icons"),
        ("github-mcp-server.json", "create_pull_request", "_meta"),
        ("mcp-server-everything.json", "echo", "$schema"),
        ("mcp-server-everything.json", "structuredContent", "$schema"),
        ("mcp-server-memory.json", "read_graph", "$schema"),
    ],
)
def test_standard_mcp_fields_are_not_import_problems(catalog: str, name: str, field: str) -> None:
    contract = from_mcp_tool(tool(catalog, name))
    assert any(field in warning for warning in contract.import_warnings)  # the importer says so
    assert "TK003" not in [f.code for f in lint_contract(contract)]


def test_the_execution_field_and_a_2020_12_dialect_are_standard_too() -> None:
    listed = {
        **tool("mcp-server-fetch.json", "fetch"),
        "execution": {"taskSupport": "optional"},
    }
    listed["inputSchema"] = {
        **listed["inputSchema"],
        "$schema": "https://json-schema.org/draft/2020-12/schema",
    }
    assert "TK003" not in [f.code for f in lint_contract(from_mcp_tool(listed))]


def test_the_note_names_the_standard_fields_it_did_not_keep() -> None:
    report = lint_catalog(load_catalog(CATALOGS / "github-mcp-server.json"))
    (note,) = [f for f in report.findings if f.code == "TK004"]
    assert "icons on 6" in note.message and "_meta on 4" in note.message


@pytest.mark.parametrize(
    "definition",
    [
        {"name": "get_rate", "description": "Read a rate.", "inputSchema": {}, "colour": "red"},
        {
            "name": "get_rate",
            "description": "Read a rate.",
            "inputSchema": {"$schema": "http://example.com/my-dialect", "type": "object"},
        },
    ],
)
def test_other_import_problems_are_still_reported(definition: dict[str, Any]) -> None:
    assert "TK003" in [f.code for f in lint_contract(from_mcp_tool(definition))]


def test_openai_strict_mode_is_still_an_import_problem() -> None:
    strict = from_openai_function(
        {"type": "function", "name": "get_rate", "parameters": {"type": "object"}, "strict": True}
    )
    assert "TK003" in [f.code for f in lint_contract(strict)]


def test_a_hand_written_contract_at_exactly_the_defaults_reads_as_imported() -> None:
    """The documented limit of telling imports apart by their content (docs/lint.md)."""
    written = ToolContract(
        id="send_rate",
        description="Send a rate to the partner system.",
        side_effect="committing",
        open_world=True,
        idempotency="none",
    )
    report = lint_catalog(Catalog(contracts=(written,)))
    assert [f.code for f in report.findings if f.code == "TK004"] == ["TK004"]
    declared = written.model_copy(update={"open_world": False})
    assert lint_catalog(Catalog(contracts=(declared,))).has_errors  # TK601
