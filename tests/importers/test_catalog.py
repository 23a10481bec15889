"""load_catalog reads contracts from directories, files in several formats and Python modules;
one bad file or entry becomes a problem without hiding the rest."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolkeeper.contract.model import ToolContract
from toolkeeper.errors import CatalogError
from toolkeeper.importers.catalog import Catalog, ProblemKind, catalog_files, load_catalog


def contract_data(id: str, version: str = "1.0.0", **extra: Any) -> dict[str, Any]:
    return {"id": id, "version": version, "description": f"Do {id}.", **extra}


def write(path: Path, content: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif path.suffix in (".yaml", ".yml"):
        path.write_text(yaml.safe_dump(content), encoding="utf-8")
    elif path.suffix == ".toml":
        path.write_text(ToolContract.from_dict(content).to_toml(), encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


def ids(catalog: Catalog) -> list[str]:
    return [c.id for c in catalog.contracts]


# -- directories ----------------------------------------------------------------------------


def test_directory_loads_every_format_recursively_in_sorted_order(tmp_path: Path) -> None:
    write(tmp_path / "b.yaml", contract_data("get_b"))
    write(tmp_path / "a.json", contract_data("get_a"))
    write(tmp_path / "nested" / "c.toml", contract_data("get_c"))
    write(tmp_path / "nested" / "d.yml", contract_data("get_d"))
    write(tmp_path / "notes.txt", "not a contract")
    write(tmp_path / ".hidden" / "e.json", contract_data("get_e"))
    write(tmp_path / ".f.json", contract_data("get_f"))

    catalog = load_catalog(tmp_path)
    assert ids(catalog) == ["get_a", "get_b", "get_c", "get_d"]
    assert catalog.sources == {
        "get_a@1.0.0": str(tmp_path / "a.json"),
        "get_b@1.0.0": str(tmp_path / "b.yaml"),
        "get_c@1.0.0": str(tmp_path / "nested" / "c.toml"),
        "get_d@1.0.0": str(tmp_path / "nested" / "d.yml"),
    }
    assert catalog.problems == ()
    assert catalog_files(tmp_path)[0] == tmp_path / "a.json"


def test_one_bad_file_does_not_hide_the_rest(tmp_path: Path) -> None:
    write(tmp_path / "a.json", contract_data("get_a"))
    write(tmp_path / "b.yaml", "id: [unclosed\n")
    write(tmp_path / "c.json", contract_data("get_c", version="one"))
    write(tmp_path / "d.toml", contract_data("get_d"))
    write(tmp_path / "e.yaml", "")

    catalog = load_catalog(tmp_path)
    assert ids(catalog) == ["get_a", "get_d"]
    problems = {Path(p.source).name: p for p in catalog.problems}
    assert set(problems) == {"b.yaml", "c.json", "e.yaml"}
    assert "not valid YAML" in problems["b.yaml"].message
    assert "not semver" in problems["c.json"].message
    assert "is empty" in problems["e.yaml"].message
    assert all(p.kind is ProblemKind.LOAD for p in catalog.problems)


def test_duplicate_refs_are_a_problem_naming_both_sources(tmp_path: Path) -> None:
    first = write(tmp_path / "a.json", contract_data("get_a"))
    second = write(tmp_path / "b.yaml", contract_data("get_a", description="Other."))
    write(tmp_path / "c.yaml", contract_data("get_a", version="2.0.0"))

    catalog = load_catalog(tmp_path)
    assert [c.ref for c in catalog.contracts] == ["get_a@1.0.0", "get_a@2.0.0"]
    assert catalog.contracts[0].description == "Do get_a."
    (problem,) = catalog.problems
    assert problem.kind is ProblemKind.DUPLICATE
    assert problem.source == str(second)
    assert str(first) in problem.message and str(second) in problem.message


def test_empty_directory_is_unusable(tmp_path: Path) -> None:
    write(tmp_path / "readme.md", "# nothing here")
    with pytest.raises(
        CatalogError, match=r"holds no \.json, \.jsonl, \.yaml, \.yml, \.toml files"
    ):
        load_catalog(tmp_path)


# -- files ----------------------------------------------------------------------------------


def test_a_list_of_contracts_and_a_tools_document(tmp_path: Path) -> None:
    listed = write(tmp_path / "list.yaml", [contract_data("get_a"), contract_data("get_b")])
    catalog = load_catalog(listed)
    assert ids(catalog) == ["get_a", "get_b"]
    assert catalog.sources["get_b@1.0.0"] == f"{listed}#/1"

    document = write(tmp_path / "tools.json", {"tools": [contract_data("get_c")]})
    assert load_catalog(document).sources == {"get_c@1.0.0": f"{document}#/tools/0"}


def test_a_bad_entry_in_a_list_is_a_problem_at_its_pointer(tmp_path: Path) -> None:
    bad = contract_data("get_b", input_schema={"type": "object"}, examples=[{"arguments": 1}])
    stray = {"name": "search_web", "inputSchema": {"type": "object"}}
    listed = write(tmp_path / "list.json", [contract_data("get_a"), bad, stray])

    catalog = load_catalog(listed)
    assert ids(catalog) == ["get_a"]
    sources = [p.source for p in catalog.problems]
    assert sources == [f"{listed}#/1", f"{listed}#/2"]
    assert "separate files" in catalog.problems[1].message


def test_mcp_tools_list_result_is_imported(tmp_path: Path) -> None:
    response = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "tools": [
                {
                    "name": "read_file",
                    "description": "Read a file.",
                    "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
                    "annotations": {"readOnlyHint": True},
                }
            ]
        },
    }
    path = write(tmp_path / "server.json", response)
    catalog = load_catalog(path)
    (imported,) = catalog.contracts
    assert imported.id == "read_file"
    assert imported.annotations == {"readOnlyHint": True}
    assert catalog.sources == {imported.ref: str(path)}


def test_openai_and_anthropic_tool_lists_are_imported(tmp_path: Path) -> None:
    openai = [
        {
            "type": "function",
            "function": {"name": "get_weather", "parameters": {"type": "object"}},
        }
    ]
    anthropic = [{"name": "get_time", "input_schema": {"type": "object"}}]
    write(tmp_path / "openai.json", openai)
    write(tmp_path / "anthropic.yaml", anthropic)
    assert ids(load_catalog(tmp_path)) == ["get_time", "get_weather"]


def test_bfcl_json_lines_load_from_json_and_jsonl(tmp_path: Path) -> None:
    def entry(index: int, name: str) -> str:
        function = {"name": name, "description": "d", "parameters": {"type": "dict"}}
        return json.dumps({"id": f"simple_{index}", "question": [], "function": [function]})

    lines = entry(0, "math.factorial") + "\n" + entry(1, "math.hypot") + "\n"
    assert ids(load_catalog(write(tmp_path / "BFCL_v3_simple.json", lines))) == [
        "math.factorial",
        "math.hypot",
    ]
    assert ids(load_catalog(write(tmp_path / "one.jsonl", entry(2, "geo.area")))) == ["geo.area"]


def test_unparseable_json_names_the_file_and_position(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path / "a.json", '{"id": "get_a",\n  "description": }'))
    (problem,) = catalog.problems
    assert "not valid JSON" in problem.message and "line 2" in problem.message
    lines = load_catalog(write(tmp_path / "b.jsonl", '{"id": 1}\n{oops}\n'))
    assert "line 2 is not JSON" in lines.problems[0].message


def test_unusable_files_raise(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"unsupported type '\.txt'.*a directory of contract"):
        load_catalog(write(tmp_path / "tools.txt", "x"))


# -- modules --------------------------------------------------------------------------------


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "modules"
    monkeypatch.syspath_prepend(str(root))
    return root


def write_module(root: Path, name: str, source: str) -> None:
    write(root / f"{name}.py", textwrap.dedent(source))


TOOLS_MODULE = """
    from toolkeeper.contract.model import ToolContract
    from toolkeeper.contract.functions import tool

    RATE = ToolContract(id="get_rate", version="1.0.0", description="Read a rate.")

    @tool(version="2.0.0", side_effect="none")
    def convert_amount(amount: float) -> float:
        '''Convert an amount.'''
        return amount

    def helper() -> None:
        pass

    TOOLS = [RATE, convert_amount]
    _PRIVATE = ToolContract(id="get_private", version="1.0.0", description="Hidden.")
"""


def test_module_collects_contracts_decorated_functions_and_lists(package: Path) -> None:
    write_module(package, "tk_catalog_tools", TOOLS_MODULE)
    catalog = load_catalog("tk_catalog_tools")
    assert ids(catalog) == ["get_rate", "convert_amount"]
    assert catalog.sources == {
        "get_rate@1.0.0": "tk_catalog_tools:RATE",
        "convert_amount@2.0.0": "tk_catalog_tools:convert_amount",
    }
    assert catalog.problems == ()


def test_module_attribute_selects_one_value(package: Path) -> None:
    write_module(package, "tk_catalog_attr", TOOLS_MODULE)
    catalog = load_catalog("tk_catalog_attr:TOOLS")
    assert ids(catalog) == ["get_rate", "convert_amount"]
    assert catalog.sources["convert_amount@2.0.0"] == "tk_catalog_attr:TOOLS[1]"
    assert ids(load_catalog("tk_catalog_attr:convert_amount")) == ["convert_amount"]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("tk_catalog_errors:MISSING", "has no attribute 'MISSING'"),
        ("tk_catalog_errors:helper", "no ToolContract, @toolkeeper.tool function"),
        ("tk_catalog_empty", "module tk_catalog_empty defines no ToolContract"),
        ("tk_catalog_broken", "importing tk_catalog_broken failed: ZeroDivisionError"),
        ("tk_catalog_nowhere.tools", "no module 'tk_catalog_nowhere'"),
    ],
)
def test_unusable_modules_raise_with_the_reason(package: Path, target: str, message: str) -> None:
    write_module(package, "tk_catalog_errors", TOOLS_MODULE)
    write_module(package, "tk_catalog_empty", "X = 1\n")
    write_module(package, "tk_catalog_broken", "1 / 0\n")
    with pytest.raises(CatalogError, match=message) as info:
        load_catalog(target)
    assert info.value.source == target


def test_a_missing_dependency_of_the_module_is_not_reported_as_a_missing_target(
    package: Path,
) -> None:
    write_module(package, "tk_catalog_needs", "import tk_catalog_absent_dependency\n")
    with pytest.raises(CatalogError, match="importing tk_catalog_needs failed"):
        load_catalog("tk_catalog_needs")


@pytest.mark.parametrize("target", ["no/such/dir", "missing.yaml", "./tools"])
def test_a_target_that_does_not_exist_lists_what_is_accepted(target: str) -> None:
    with pytest.raises(CatalogError) as info:
        load_catalog(target)
    message = str(info.value)
    assert target in message
    assert "directory of contract files" in message
    assert "package.module:attribute" in message
