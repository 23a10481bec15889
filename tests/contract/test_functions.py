"""@tool and contract_from_function: contracts derived from typed, documented functions."""

from __future__ import annotations

import importlib.util
import inspect
import sys
import textwrap
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import docstring_parser
import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

import toolkeeper
from toolkeeper import ContractError, SideEffect, ToolContext, ToolContract, tool
from toolkeeper.contract import contract_of
from toolkeeper.contract.functions import context_parameter, contract_from_function, wraps_result


class Unit(Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Place(BaseModel):
    """A city in a country."""

    city: str
    country: str = "NL"


class Forecast(TypedDict):
    temperature: float
    unit: Unit


class Node(BaseModel):
    name: str
    children: list[Node] = []


def get_weather(
    place: Place,
    days: Annotated[int, Field(ge=1, le=14, description="Days ahead, 1-14.")] = 3,
    unit: Unit = Unit.CELSIUS,
    ctx: ToolContext | None = None,
) -> Forecast:
    """Get the weather forecast for a place.

    Reads a public forecast service.

    Use when: the user asks about the weather in the coming days.
    Do not use when: the question is about past weather
    or long-term climate.

    Args:
        place: Where to forecast.
        days: How many days ahead (overridden by the Field description).
        unit: The temperature unit.
        ctx: Injected by the harness.
    """
    raise NotImplementedError


def read_contract(**options: Any) -> ToolContract:
    return contract_from_function(get_weather, side_effect="none", **options)


# -- input schema -------------------------------------------------------------------------


def test_the_input_schema_comes_from_type_hints_and_the_docstring() -> None:
    schema = read_contract().input_schema
    assert schema == {
        "type": "object",
        "properties": {
            "place": {
                "type": "object",
                "description": "Where to forecast.",
                "properties": {
                    "city": {"type": "string"},
                    "country": {"type": "string", "default": "NL"},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
            "days": {
                "type": "integer",
                "default": 3,
                "minimum": 1,
                "maximum": 14,
                "description": "Days ahead, 1-14.",
            },
            "unit": {
                "type": "string",
                "enum": ["celsius", "fahrenheit"],
                "default": "celsius",
                "description": "The temperature unit.",
            },
        },
        "required": ["place"],
        "additionalProperties": False,
    }


def test_tool_context_parameters_are_left_out_of_the_schema() -> None:
    assert "ctx" not in read_contract().input_schema["properties"]
    assert context_parameter(get_weather) == "ctx"


def test_every_generated_object_forbids_additional_properties() -> None:
    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                assert node["additionalProperties"] is False, node
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    def plan(route: list[Place], stops: dict[str, Place], tree: Node) -> None:
        """Plan a route."""

    contract = contract_from_function(plan, side_effect="none")
    walk(contract.input_schema)
    validator = Draft202012Validator(contract.input_schema)
    tree = {"name": "a", "children": [{"name": "b"}]}
    assert validator.is_valid({"route": [{"city": "Utrecht"}], "stops": {}, "tree": tree})
    assert not validator.is_valid({"route": [], "stops": {}, "tree": tree, "extra": 1})
    assert not validator.is_valid({"route": [{"city": "U", "zip": "1"}], "stops": {}, "tree": tree})


def test_definitions_are_inlined_unless_recursive() -> None:
    def walk(tree: Node, place: Place) -> None:
        """Walk a tree."""

    schema = contract_from_function(walk, side_effect="none").input_schema
    assert "$ref" not in str(schema["properties"]["place"])
    assert schema["properties"]["tree"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/Node"
    }
    assert set(schema["$defs"]) == {"Node"}


@pytest.mark.parametrize(
    "docstring",
    [
        """Count words.

        Args:
            text: The text to count.
        """,
        """Count words.

        Parameters
        ----------
        text : str
            The text to count.
        """,
        """Count words.

        :param text: The text to count.
        """,
    ],
    ids=["google", "numpy", "rest"],
)
def test_parameter_descriptions_come_from_any_docstring_style(docstring: str) -> None:
    def count(text: str) -> int:
        return len(text.split())

    count.__doc__ = docstring
    contract = contract_from_function(count, side_effect="none")
    assert contract.input_schema["properties"]["text"] == {
        "type": "string",
        "description": "The text to count.",
    }
    assert contract.description == "Count words."


def test_description_and_usage_come_from_the_docstring() -> None:
    contract = read_contract()
    assert contract.description == (
        "Get the weather forecast for a place.\n\nReads a public forecast service."
    )
    assert contract.when_to_use == "the user asks about the weather in the coming days."
    assert contract.when_not_to_use == "the question is about past weather or long-term climate."


def test_keyword_arguments_override_the_docstring() -> None:
    contract = read_contract(id="weather", description="Forecast.", when_to_use="Always.")
    assert (contract.id, contract.description, contract.when_to_use) == (
        "weather",
        "Forecast.",
        "Always.",
    )


def test_other_contract_fields_pass_through() -> None:
    contract = read_contract(timeout=5.0, required_capabilities=("weather:read",))
    assert contract.timeout == 5.0
    assert contract.required_capabilities == ("weather:read",)


# -- output schema ------------------------------------------------------------------------


def test_an_object_return_type_is_the_output_schema() -> None:
    assert read_contract().output_schema == {
        "type": "object",
        "properties": {
            "temperature": {"type": "number"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["temperature", "unit"],
        "additionalProperties": False,
    }
    assert wraps_result(get_weather) is False


def test_a_non_object_return_type_is_wrapped_in_result() -> None:
    def count(text: str) -> list[int]:
        """Count."""
        return []

    assert contract_from_function(count, side_effect="none").output_schema == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "integer"}}},
        "required": ["result"],
        "additionalProperties": False,
    }
    assert wraps_result(count) is True


def test_no_return_annotation_means_no_output_schema() -> None:
    def ping():  # type: ignore[no-untyped-def]
        """Ping."""

    assert contract_from_function(ping, side_effect="none").output_schema is None
    assert wraps_result(ping) is False


# -- async, decorator, versions -----------------------------------------------------------


def test_async_functions_describe_the_awaited_value() -> None:
    @tool(version="1.0.0", side_effect="committing")
    async def send(to: str, body: Literal["hi", "bye"]) -> int:
        """Send a message."""
        return 1

    contract = contract_of(send)
    assert contract.input_schema["properties"]["body"] == {"type": "string", "enum": ["hi", "bye"]}
    assert contract.output_schema is not None
    assert contract.output_schema["properties"]["result"] == {"type": "integer"}
    assert contract.side_effect is SideEffect.COMMITTING


def test_the_decorator_returns_the_function_itself() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    decorated = tool(side_effect="none")(add)
    assert decorated is add
    assert decorated(2, 3) == 5
    assert contract_of(add) == add.__toolkeeper_contract__  # type: ignore[attr-defined]


def test_a_bare_decorator_registers_as_committing_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A bare ``@tool`` declares nothing: it is taken at its most cautious (its side effect
    undeclared, which counts as committing; no version), and a warning says how to declare
    it — one per decoration."""
    with caplog.at_level("WARNING", logger="toolkeeper.contract.functions"):

        @tool
        def delete(path: str) -> None:
            """Delete a file."""

    contract = contract_of(delete)
    assert contract.side_effect is None and contract.effective_side_effect == "committing"
    assert contract.ref == "delete@0.0.0"
    (record,) = caplog.records
    assert "delete declares no side effect, so it counts as committing" in record.message
    assert '@tool(side_effect="none")' in record.message


def test_an_undeclared_effect_with_other_options_still_needs_a_version() -> None:
    with pytest.raises(ContractError) as caught:

        @tool(description="Delete a file.")
        def delete(path: str) -> None:
            pass

    assert "undeclared (counts as committing)" in str(caught.value)
    assert caught.value.field == "version"


@pytest.mark.parametrize("effect", ["reversible", "committing"])
def test_a_side_effecting_tool_needs_a_version(effect: str) -> None:
    with pytest.raises(ContractError, match=r'pass version="1\.0\.0"'):
        contract_from_function(get_weather, side_effect=effect)


def test_read_only_tools_need_no_version() -> None:
    assert read_contract().version is None


def test_the_classmethod_builds_the_same_contract() -> None:
    assert ToolContract.from_function(get_weather, side_effect="none") == read_contract()


def test_contract_of_an_undecorated_function_says_how_to_fix_it() -> None:
    with pytest.raises(ContractError, match="has no toolkeeper contract; decorate it"):
        contract_of(get_weather)


def test_the_package_exports_the_decorator() -> None:
    assert toolkeeper.tool is tool


# -- mistakes -----------------------------------------------------------------------------


def test_an_unannotated_parameter_is_a_contract_error_naming_it() -> None:
    def bad(city, days: int) -> None:  # type: ignore[no-untyped-def]
        """Bad."""

    with pytest.raises(ContractError, match="parameter 'city' has no type annotation"):
        contract_from_function(bad, side_effect="none")


@pytest.mark.parametrize("signature", ["*args: int", "**kwargs: int", "a: int, /"])
def test_parameters_that_cannot_be_named_fields_are_contract_errors(signature: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f'def f({signature}) -> None:\n    "Doc."', namespace)
    with pytest.raises(ContractError, match="tool arguments are named fields"):
        contract_from_function(namespace["f"], side_effect="none")


def test_a_function_without_a_description_is_a_contract_error() -> None:
    def silent(a: int) -> None:
        pass

    with pytest.raises(ContractError, match="has no description; write a docstring"):
        contract_from_function(silent, side_effect="none")


def test_an_unresolvable_annotation_is_a_contract_error() -> None:
    def ghost(a: Missing) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Ghost."""

    with pytest.raises(ContractError, match="cannot resolve its type annotations"):
        contract_from_function(ghost, side_effect="none")


def test_a_non_function_is_a_contract_error() -> None:
    with pytest.raises(ContractError, match="is not a function"):
        contract_from_function(print, side_effect="none")


# -- implementation digest ----------------------------------------------------------------


def load_module(path: Path, body: str) -> Any:
    path.write_text(textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def test_the_digest_changes_when_the_source_changes(tmp_path: Path) -> None:
    source = '''
        def double(x: int) -> int:
            """Double a number."""
            return x * {factor}
    '''
    one = load_module(tmp_path / "digest_one.py", source.format(factor=2)).double
    same = load_module(tmp_path / "digest_same.py", source.format(factor=2)).double
    other = load_module(tmp_path / "digest_other.py", source.format(factor=3)).double
    digests = [
        contract_from_function(fn, side_effect="none").implementation_digest
        for fn in (one, same, other)
    ]
    assert digests[0] == digests[1] != digests[2]
    assert digests[0] is not None and digests[0].startswith("sha256:")


def test_the_digest_changes_when_the_contract_changes() -> None:
    assert read_contract().implementation_digest != read_contract(timeout=3.0).implementation_digest


def test_functions_without_source_are_digested_from_their_code() -> None:
    def compile_fn(body: str) -> Any:
        namespace: dict[str, Any] = {}
        exec(f'def f(x: int) -> int:\n    "Doc."\n    {body}', namespace)
        return namespace["f"]

    def digest(body: str) -> str | None:
        return contract_from_function(compile_fn(body), side_effect="none").implementation_digest

    assert digest("return abs(x)") == digest("return abs(x)")
    assert digest("return abs(x)") != digest("return hash(x)")
    assert digest("return (lambda y: y + 1)(x)") != digest("return (lambda y: y + 2)(x)")


# -- the context parameter ----------------------------------------------------------------


def with_optional(city: str, ctx: Optional[ToolContext] = None) -> None:  # noqa: UP045
    """Optional, the typing way."""


def with_union(city: str, ctx: ToolContext | None = None) -> None:
    """A union with None."""


def with_annotated(city: str, ctx: Annotated[ToolContext, "the context"]) -> None:
    """Annotated."""


@pytest.mark.parametrize("function", [with_optional, with_union, with_annotated])
def test_every_context_form_is_one_parameter_left_out_of_the_schema(function: Any) -> None:
    assert context_parameter(function) == "ctx"
    schema = contract_from_function(function, side_effect="none").input_schema
    assert list(schema["properties"]) == ["city"]


def test_an_unresolvable_executor_annotation_is_read_as_written() -> None:
    namespace: dict[str, Any] = {}
    exec("def run(city: 'str', ctx: 'ToolContext | None' = None): pass", namespace)
    assert context_parameter(namespace["run"]) == "ctx"


def test_two_context_parameters_are_a_contract_error() -> None:
    def both(a: ToolContext, b: ToolContext | None = None) -> None:
        """Both."""

    with pytest.raises(ContractError, match="are all annotated ToolContext; keep one"):
        contract_from_function(both, side_effect="none")


def test_a_union_of_the_context_and_another_type_is_a_contract_error() -> None:
    def mixed(ctx: ToolContext | int) -> None:
        """Mixed."""

    with pytest.raises(ContractError, match="mixing ToolContext with other types"):
        context_parameter(mixed)


# -- return types that name no object ------------------------------------------------------


def test_a_return_type_that_constrains_nothing_has_no_output_schema() -> None:
    def anything() -> Any:
        """Anything."""

    assert contract_from_function(anything, side_effect="none").output_schema is None
    assert wraps_result(anything) is False


def test_an_optional_object_is_wrapped_in_result() -> None:
    def maybe() -> dict[str, int] | None:
        """Maybe."""

    schema = contract_from_function(maybe, side_effect="none").output_schema
    assert schema is not None and schema["required"] == ["result"]
    assert wraps_result(maybe) is True


# -- schemas assembled per type equal pydantic's whole-signature schema ----------------------


class Shade(Enum):
    LIGHT = "light"
    DARK = "dark"


def signature_plain(name: str, count: int = 3, ratio: float | None = None) -> None:
    """Plain."""


def signature_models(place: Place, forecast: Forecast, trees: list[Node] | None = None) -> None:
    """Models, a TypedDict and a recursive model."""


def signature_constrained(
    days: Annotated[int, Field(ge=1, le=14, description="Days.")],
    shade: Shade = Shade.DARK,
    mode: Literal["a", "b"] = "a",
    tags: tuple[str, ...] = ("x",),
    place: Place | None = None,
) -> None:
    """Constraints, enums, literals, tuple defaults.

    Args:
        days: Overridden by the Field description.
        shade: The shade.
        place: Where.
    """


def signature_empty() -> None:
    """No parameters."""


@pytest.mark.parametrize(
    "function", [signature_plain, signature_models, signature_constrained, signature_empty]
)
def test_the_per_type_schema_equals_the_whole_signature_schema(function: Any) -> None:
    from toolkeeper.contract import functions

    hints = functions._hints(function, function.__name__)
    doc = functions._parse_docstring(function.__doc__ or "")
    described = {param.arg_name: param.description for param in doc.params}
    parameters = [
        (param, hints[param.name]) for param in inspect.signature(function).parameters.values()
    ]
    assembled = functions._assembled(parameters, described, "test")
    whole = functions._typed_dict_schema(parameters, described, function.__name__, "test")
    assert assembled == whole


@pytest.mark.parametrize(
    "docstring",
    [
        "Count words.",
        "Count words\nacross lines.\n\nA body.\n\nUse when: counting.\nDo not use when: not.",
        "Count words.\n\nArgs:\n    text: The text.",
        "Count words.\n\n:param text: The text.",
        "Count words.\n\nParameters\n----------\ntext : str\n    The text.",
        "Count words.\n\n@param text: The text.",
        "Title: a colon in the first line\n\nmore text",
    ],
)
def test_the_docstring_shortcut_reads_as_the_full_parse(docstring: str) -> None:
    from toolkeeper.contract import functions

    fast, full = functions._parse_docstring(docstring), docstring_parser.parse(docstring)
    assert (fast.short_description, fast.long_description) == (
        full.short_description,
        full.long_description,
    )
    assert [(p.arg_name, p.description) for p in fast.params] == [
        (p.arg_name, p.description) for p in full.params
    ]


def test_an_unhashable_annotation_is_built_without_the_cache() -> None:
    def tagged(count: Annotated[int, ["a list is metadata too"]] = 1) -> None:
        """Tagged."""

    schema = contract_from_function(tagged, side_effect="none").input_schema
    assert schema["properties"]["count"] == {"type": "integer", "default": 1}
