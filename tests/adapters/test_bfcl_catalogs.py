"""The BFCL single-turn catalogs (tests/data/bfcl) rendered for every vendor: every name legal
and distinct, every tool definition one the vendor's SDK types and documented rules accept,
and what could not be kept reported rather than sent broken."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types
import pytest
from anthropic.types import ToolParam
from google.genai import types
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam

from toolkeeper.adapters import render_with_report
from toolkeeper.adapters.gemini_schema import PARAMETER_NAME
from toolkeeper.adapters.report import IssueKind
from toolkeeper.contract.model import ToolContract
from toolkeeper.contract.naming import is_legal, vendor_names

BFCL = Path(__file__).resolve().parents[1] / "data" / "bfcl"
LANGUAGE = {"BFCL_v4_simple_java.json": "java", "BFCL_v4_simple_javascript.json": "javascript"}
FILES = sorted(path.name for path in BFCL.glob("BFCL_v4_*.json"))
GEMINI_TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}
# Formats per type; "enum" also marks an integer or number enum written as strings (the
# SDK's Schema.enum documentation).
GEMINI_FORMATS = {
    "STRING": {"enum", "date-time"},
    "NUMBER": {"float", "double", "enum"},
    "INTEGER": {"int32", "int64", "enum"},
}


def catalog(name: str) -> list[ToolContract]:
    """Every function of a category file, first definition of each ref kept."""
    contracts: dict[str, ToolContract] = {}
    for line in (BFCL / name).read_text().splitlines():
        for doc in json.loads(line)["function"]:
            contract = ToolContract.from_bfcl_function(doc, language=LANGUAGE.get(name, "python"))
            contracts.setdefault(contract.ref, contract)
    return list(contracts.values())


def gemini_violations(schema: Any, where: str = "") -> list[str]:
    """Gemini's OpenAPI-subset rules for ``parameters`` (google-genai ``Schema`` docs)."""
    if not isinstance(schema, dict):
        return [f"{where}: not a schema"]
    problems = [
        f"{where}: {k} not in the subset" for k in schema if k in {"ref", "defs", "$ref", "const"}
    ]
    kind = schema.get("type")
    if kind is None and "any_of" not in schema and schema != {"nullable": True}:
        problems.append(f"{where}: no type")
    if kind is not None and kind not in GEMINI_TYPES:
        problems.append(f"{where}: type {kind!r}")
    if "format" in schema and schema["format"] not in GEMINI_FORMATS.get(kind, set()):
        problems.append(f"{where}: format {schema['format']!r} for {kind}")
    if not all(isinstance(v, str) for v in schema.get("enum", [])):
        problems.append(f"{where}: enum values must be strings")
    if kind == "OBJECT":
        properties = schema.get("properties") or {}
        if not properties:
            problems.append(f"{where}: OBJECT without properties")
        for name, sub in properties.items():
            if not PARAMETER_NAME.match(name):
                problems.append(f"{where}: parameter name {name!r}")
            problems += gemini_violations(sub, f"{where}/properties/{name}")
    if kind == "ARRAY":
        problems += gemini_violations(schema.get("items"), f"{where}/items")
    for i, sub in enumerate(schema.get("any_of", [])):
        problems += gemini_violations(sub, f"{where}/any_of/{i}")
    return problems


@pytest.mark.parametrize("name", FILES)
def test_bfcl_catalog_renders_for_every_vendor(
    name: str,
    sdk_valid: Callable[[Any, Any], Any],
    strict_violations: Callable[[dict[str, Any]], list[str]],
) -> None:
    contracts = catalog(name)
    refs = [c.ref for c in contracts]
    for family in ("openai", "anthropic", "gemini", "mcp"):
        names = vendor_names(contracts, family)
        assert len(set(names.values())) == len(contracts), f"{family}: unresolved collision"
        assert all(is_legal(n, family) for n in names.values())

    for vendor, param in (
        ("openai_chat", ChatCompletionFunctionToolParam),
        ("openai_responses", FunctionToolParam),
    ):
        for strict in (False, True):
            tools, report = render_with_report(contracts, vendor=vendor, strict=strict)
            assert len(tools) == len(contracts)
            for tool in tools:
                sdk_valid(param, tool)
                function = tool.get("function", tool)
                assert function["parameters"]["type"] == "object"
                if function["strict"]:
                    assert strict_violations(function["parameters"]) == [], function["name"]
            fallbacks = {i.ref for i in report.issues if i.kind is IssueKind.FALLBACK}
            assert sum(not t.get("function", t)["strict"] for t in tools) == (
                len(fallbacks) if strict else len(tools)
            )

    tools, _ = render_with_report(contracts, vendor="anthropic")
    for tool in tools:
        sdk_valid(ToolParam, tool)
        validator = jsonschema.Draft202012Validator(tool["input_schema"])
        assert all(validator.is_valid(example) for example in tool.get("input_examples", []))

    tools, report = render_with_report(contracts, vendor="gemini")
    declarations = types.Tool.model_validate(tools[0]).function_declarations or []
    assert [d.name for d in declarations] == [vendor_names(contracts, "gemini")[r] for r in refs]
    fallbacks = {i.ref for i in report.issues if i.kind is IssueKind.FALLBACK}
    for ref, declaration in zip(refs, tools[0]["function_declarations"], strict=True):
        if ref in fallbacks:
            assert "parameters" not in declaration and "parameters_json_schema" in declaration
        elif "parameters" in declaration:
            assert gemini_violations(declaration["parameters"]) == [], declaration["name"]

    tools, _ = render_with_report(contracts, vendor="mcp")
    listed = mcp_types.ListToolsResult.model_validate({"tools": tools})
    assert all(tool.input_schema["type"] == "object" for tool in listed.tools)
