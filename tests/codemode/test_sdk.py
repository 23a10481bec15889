"""The SDK text a model reads, and the name table that maps each function back."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import Principal, ToolContract, tool
from toolkeeper.codemode.sdk import compile_sdk, python_names, render
from toolkeeper.errors import ConfigError
from toolkeeper.runtime.harness import Harness

ROWS = ToolContract(
    id="sheets.get_rows",
    version="1.2.0",
    description="Read rows of a sheet.",
    when_to_use="you need the rows themselves",
    when_not_to_use="you only need the row count",
    side_effect="none",
    input_schema={
        "type": "object",
        "properties": {
            "sheet_id": {"type": "string"},
            "limit": {"type": "integer", "default": 100},
            "filter": {
                "type": "object",
                "properties": {
                    "status": {"enum": ["active", "inactive"]},
                    "min-age": {"type": "integer"},
                },
            },
            "class": {"type": ["string", "null"]},
        },
        "required": ["sheet_id"],
    },
    output_schema={
        "type": "object",
        "properties": {"rows": {"type": "array", "items": {"$ref": "#/$defs/Row"}}},
        "required": ["rows"],
        "$defs": {
            "Row": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "status": {"type": "string"}},
                "required": ["id"],
            }
        },
    },
)


def test_the_text_is_valid_python_with_types_docs_and_effects() -> None:
    text = render([ROWS])
    ast.parse(text)  # a model reads it as Python; it must be Python
    assert (
        "def sheets_get_rows(sheet_id: str, limit: int = 100, filter: SheetsGetRowsFilter | "
        "None = None, class_: str | None = None) -> SheetsGetRowsResult:" in text
    )
    assert "class Row(TypedDict):\n    id: int\n    status: NotRequired[str]" in text
    assert "rows: list[Row]" in text
    # A key that is no identifier needs TypedDict's functional form.
    assert "'min-age': int" in text
    assert "Use when: you need the rows themselves" in text
    assert "Not when: you only need the row count" in text
    assert "Effect: read-only. Tool sheets.get_rows@1.2.0." in text


def test_names_map_back_reversibly_even_when_they_collide() -> None:
    a = ToolContract(id="mail.send", description="a", input_schema={"type": "object"})
    b = ToolContract(id="mail_send", description="b", input_schema={"type": "object"})
    c = ToolContract(id="print", description="c", input_schema={"type": "object"})
    d = ToolContract(id="2fa-check", description="d", input_schema={"type": "object"})
    names = python_names([a, b, c, d])
    assert len(set(names.values())) == 4
    assert all(name.isidentifier() for name in names.values())
    assert names[c.ref] == "print_"  # never shadows a builtin the program needs
    assert names[d.ref] == "_2fa_check"
    sdk = compile_sdk([a, b, c, d])
    assert {f.ref for f in sdk.functions.values()} == {a.ref, b.ref, c.ref, d.ref}
    assert python_names([d, c, b, a]) == names  # a function of the set, not the order


def test_bind_maps_positional_keyword_and_aliased_arguments() -> None:
    sdk = compile_sdk([ROWS])
    assert sdk.bind("sheets_get_rows", ("s1", 5), {}) == {"sheet_id": "s1", "limit": 5}
    # None means "omitted" unless the schema admits null.
    assert sdk.bind("sheets_get_rows", ("s1",), {"limit": None, "class_": None}) == {
        "sheet_id": "s1",
        "class": None,
    }
    with pytest.raises(TypeError, match="multiple values"):
        sdk.bind("sheets_get_rows", ("s1",), {"sheet_id": "s2"})
    with pytest.raises(TypeError, match="positional"):
        sdk.bind("sheets_get_rows", tuple(range(9)), {})


def test_docstrings_cannot_be_closed_by_a_description() -> None:
    hostile = ToolContract(
        id="evil",
        description='Reads. """\nimport os\n"""',
        side_effect="none",
        input_schema={"type": "object"},
    )
    tree = ast.parse(render([hostile]))
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert [node.module for node in imports] == ["typing"]  # only the preamble's own


def test_harness_sdk_text_shows_only_what_the_principal_may_see(tmp_path: Path) -> None:
    harness = Harness(home=tmp_path / "tk")

    @tool(side_effect="none")
    def list_items(folder: str) -> list[dict[str, Any]]:
        """List the items of a folder."""
        return []

    @tool(side_effect="none", required_capabilities=["admin"])
    def purge_cache() -> dict[str, Any]:
        """Purge a cache."""
        return {}

    harness.register(list_items)
    harness.register(purge_cache)
    text = harness.sdk_text(Principal("bob"))
    assert "def list_items(folder: str) -> list[dict[str, Any]]:" in text  # unwrapped result
    assert "purge_cache" not in text and "run_code" not in text
    assert "purge_cache" in harness.sdk_text(Principal("root", capabilities=frozenset({"admin"})))
    assert "list_items" not in harness.sdk_text(
        Principal("root", capabilities=frozenset({"admin"})), tools=["purge_cache"]
    )
    with pytest.raises(ConfigError, match="purge_cache"):
        harness.sdk_text(Principal("bob"), tools=["purge_cache"])
    harness.close()
