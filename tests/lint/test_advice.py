"""Fixes speak the language of the source a contract came from, and TK601 asks for a version
exactly where the decorator does (issue 11, "what hurt" 4; "Developer feedback")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkeeper import tool
from toolkeeper.contract.functions import contract_of
from toolkeeper.contract.model import ToolContract
from toolkeeper.importers.catalog import load_catalog
from toolkeeper.importers.formats import from_mcp_tool
from toolkeeper.lint import Finding, Severity, lint_catalog, lint_contract
from toolkeeper.lint.advice import Origin, origin_of

CATALOGS = Path(__file__).parent / "catalogs"


# The README's read-only and committing examples (issue 11 "what hurt" 4), as written there.
@tool(side_effect="none", idempotency="natural")
def get_weather(city: str, days: int = 3) -> list[float]:
    """Daily maximum temperatures for a city.

    Use when: the user asks about the weather in the coming days.
    Do not use when: the question is about past weather.

    Args:
        city: City name, e.g. "Utrecht".
        days: How many days ahead.
    """
    return [21.0] * days


@tool(version="1.0.0", side_effect="committing", idempotency="keyed")
def send_message(to: str, body: str) -> dict[str, str]:
    """Send a chat message to a user."""
    return {"id": "msg_1"}


def by_code(findings: list[Finding]) -> dict[str, Finding]:
    return {f.code: f for f in findings}


def test_a_read_only_tool_is_not_told_it_needs_a_version() -> None:
    contract = contract_of(get_weather)
    assert contract.version is None  # the decorator accepted it
    findings = lint_contract(contract)
    assert "TK601" not in by_code(findings)
    assert not [f for f in findings if f.severity is Severity.ERROR]


def test_the_readme_examples_have_no_errors() -> None:
    for fn in (get_weather, send_message):
        findings = lint_contract(contract_of(fn))
        assert [f.code for f in findings if f.severity is Severity.ERROR] == []


def test_origin_is_read_off_the_contract() -> None:
    mcp = json.loads((CATALOGS / "mcp-server-time.json").read_text())["tools"][0]
    assert origin_of(contract_of(get_weather)) is Origin.FUNCTION
    assert origin_of(from_mcp_tool(mcp)) is Origin.IMPORTED
    assert origin_of(ToolContract.from_dict(contract_of(send_message).to_dict())) is (
        Origin.FUNCTION  # a function's contract written to a file keeps its digest
    )
    file_like = {k: v for k, v in contract_of(send_message).to_dict().items()}
    file_like.pop("implementation_digest")
    assert origin_of(ToolContract.from_dict(file_like)) is Origin.DATA


@pytest.mark.parametrize(
    ("code", "decorator", "key"),
    [
        ("TK503", "@tool(timeout=30, ...)", "timeout: 30 in the contract"),
        ("TK505", '@tool(verifier="read_back", ...)', 'verifier: "read_back" in the contract'),
        (
            "TK404",
            '@tool(result_projection={"summary_template": "Found {count}"}, ...)',
            'result_projection.summary_template: "Found {count}" in the contract',
        ),
        ("TK701", '@tool(examples=[{"arguments": {...}}], ...)', "examples: [{"),
        ("TK202", "add a 'Use when: ...' line to the docstring", "set when_to_use: "),
        ("TK203", "add a 'Do not use when: ...' line to the docstring", "set when_not_to_use: "),
        ("TK308", "(in the docstring's Args section)", "with an example value"),
    ],
)
def test_a_function_gets_decorator_advice_and_a_file_gets_key_advice(
    code: str, decorator: str, key: str
) -> None:
    function = contract_of(send_message)
    written = {k: v for k, v in function.to_dict().items() if k != "implementation_digest"}
    from_file = ToolContract.from_dict(written)
    assert decorator in by_code(lint_contract(function))[code].fix
    file_fix = by_code(lint_contract(from_file))[code].fix
    assert key in file_fix
    assert "@tool" not in file_fix and "docstring" not in file_fix


def test_a_missing_version_is_asked_for_in_the_words_of_the_source() -> None:
    written = {**contract_of(send_message).to_dict()}
    del written["version"], written["implementation_digest"]
    fix = by_code(lint_contract(ToolContract.from_dict(written)))["TK601"].fix
    assert 'version: "1.0.0" in the contract' in fix
    imported = from_mcp_tool({"name": "post_rate", "description": "Post.", "inputSchema": {}})
    fix = by_code(lint_contract(imported))["TK601"].fix
    assert '[upstreams.SERVER.tools.post_rate] version = "1.0.0"' in fix


def test_a_bare_tool_is_flagged_with_decorator_advice() -> None:
    """A bare ``@tool`` declares no side effect (it counts as committing) and no version;
    whatever the decorator registers it as, lint says so and how to declare it."""
    bare = contract_of(get_weather).model_copy(update={"side_effect": None, "idempotency": None})
    findings = by_code(lint_contract(bare))
    assert findings["TK501"].severity is Severity.ERROR
    assert '@tool(side_effect="none", ...)' in findings["TK501"].fix
    assert findings["TK601"].severity is Severity.ERROR
    assert '@tool(version="1.0.0", ...)' in findings["TK601"].fix


def test_an_imported_tool_is_told_about_the_gateway_override() -> None:
    catalog = load_catalog(CATALOGS / "mcp-server-filesystem.json")
    contract = next(c for c in catalog.contracts if c.id == "read_file")
    findings = by_code(lint_contract(contract))
    assert "[upstreams.SERVER.tools.read_file] timeout = 30" in findings["TK503"].fix
    assert "its source format has no place for verifier" in findings["TK505"].fix
    report = lint_catalog(catalog)
    (note,) = [f for f in report.findings if f.code == "TK004"]
    assert "[upstreams.SERVER.tools.TOOL]" in note.fix
