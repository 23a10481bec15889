"""Real tool schemas and answers: a sample of the Berkeley Function Calling Leaderboard.

Every gold answer validates against the contract `ToolContract.from_bfcl_function` imports;
every systematic mutation of a gold answer — a wrong type, a missing required parameter, a
misspelled parameter name, a value outside an enum — is rejected with the right code at the
right path, and applying the result's repairs makes it valid again. The sample and how it
was cut are described in tests/data/bfcl/ATTRIBUTION.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import ToolContract, validate_arguments
from toolkeeper.schema.document import pointer
from toolkeeper.validation import ValidationResult, apply_repairs

DATA = Path(__file__).resolve().parents[1] / "data" / "bfcl"
CATEGORIES = {
    "simple_python": "python",
    "multiple": "python",
    "parallel": "python",
    "live_simple": "python",
    "simple_java": "java",
    "simple_javascript": "javascript",
}
OMITTED = object()

KNOWN_BAD_GOLD = ("cmd_controller.execute", "unit", "N/A")
"""A gold value BFCL itself gets wrong: this function's `unit` defaults to "N/A", outside its
own enum ["seconds", "milliseconds"], and some gold answers list that default. The validator
is right to reject it; the test pins the exact error instead of hiding those entries."""


def known_bad(contract: ToolContract, arguments: dict[str, Any]) -> bool:
    function, parameter, value = KNOWN_BAD_GOLD
    return contract.id == function and arguments.get(parameter) == value


def concrete(value: Any) -> Any:
    """One concrete value from a BFCL possible answer, where an object maps each key to a
    list of acceptable values (objects inside lists, too)."""
    if isinstance(value, dict):
        picked = {key: first_acceptable(options) for key, options in value.items()}
        return {key: v for key, v in picked.items() if v is not OMITTED}
    if isinstance(value, list):
        return [concrete(item) for item in value]
    return value


def first_acceptable(options: list[Any]) -> Any:
    # "" means "may be omitted"; null means "omitted, the default is null".
    for option in options:
        if option != "" and option is not None:
            return concrete(option)
    return OMITTED


def gold_calls(category: str) -> Iterator[tuple[str, ToolContract, dict[str, Any]]]:
    """(entry id, contract, concrete gold arguments) for every call in a category."""
    language = CATEGORIES[category]
    name = f"BFCL_v4_{category}.json"
    entries = (DATA / name).read_text().splitlines()
    answers = (DATA / "possible_answer" / name).read_text().splitlines()
    for entry_line, answer_line in zip(entries, answers, strict=True):
        entry, answer = json.loads(entry_line), json.loads(answer_line)
        assert entry["id"] == answer["id"]
        tools = {
            doc["name"]: ToolContract.from_bfcl_function(doc, language=language)
            for doc in entry["function"]
        }
        for call in answer["ground_truth"]:
            ((function, parameters),) = call.items()
            yield entry["id"], tools[function], concrete(parameters)


def closed(contract: ToolContract) -> ToolContract:
    """The contract with undeclared parameters refused, as BFCL's checker refuses them."""
    schema = {**contract.input_schema, "additionalProperties": False}
    return ToolContract.from_dict({**contract.to_dict(), "input_schema": schema})


def codes_at(result: ValidationResult) -> set[tuple[str, str]]:
    assert result.error is not None
    return {(e.path, e.code) for e in result.error.field_errors}


def repaired_ok(contract: ToolContract, arguments: dict[str, Any], result: ValidationResult) -> Any:
    repaired = apply_repairs(arguments, result.repairs)
    after = validate_arguments(contract, repaired)
    assert after.ok, (arguments, result.error, after.error)
    return repaired


def typo(name: str) -> str:
    """A misspelling a model makes: two letters swapped, or a letter doubled."""
    if len(name) >= 4 and name[1] != name[2]:
        return name[0] + name[2] + name[1] + name[3:]
    return name + name[-1]


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_gold_answer_validates(category: str) -> None:
    checked = 0
    for entry_id, contract, arguments in gold_calls(category):
        for tool in (contract, closed(contract)):
            result = validate_arguments(tool, arguments)
            if known_bad(contract, arguments):
                assert codes_at(result) == {("/unit", "enum")}, entry_id
                assert result.error is not None
                assert '"seconds", "milliseconds"' in str(result.error.suggested_fix)
                continue
            assert result.ok, (entry_id, arguments, result.error)
            checked += 1
    assert checked >= 2 * 45


@pytest.mark.parametrize("category", CATEGORIES)
def test_a_missing_required_parameter_is_found_and_restored(category: str) -> None:
    mutations = 0
    for entry_id, contract, arguments in gold_calls(category):
        if known_bad(contract, arguments):
            continue
        for name in contract.input_schema.get("required", []):
            broken = {k: v for k, v in arguments.items() if k != name}
            result = validate_arguments(contract, broken)
            assert codes_at(result) == {(pointer(name), "required")}, entry_id
            repaired_ok(contract, broken, result)
            mutations += 1
    assert mutations >= 40


@pytest.mark.parametrize("category", CATEGORIES)
def test_a_misspelled_parameter_is_renamed_back(category: str) -> None:
    mutations = 0
    for entry_id, contract, arguments in gold_calls(category):
        if known_bad(contract, arguments):
            continue
        tool = closed(contract)
        for name in arguments:
            wrong = typo(name)
            if wrong in tool.input_schema["properties"]:
                continue
            broken = {(wrong if k == name else k): v for k, v in arguments.items()}
            result = validate_arguments(tool, broken)
            assert (pointer(wrong), "additional_property") in codes_at(result), entry_id
            assert result.error is not None
            unknown = next(e for e in result.error.field_errors if e.path == pointer(wrong))
            assert unknown.expected == name, (entry_id, wrong, unknown)
            assert repaired_ok(tool, broken, result) == arguments
            mutations += 1
    assert mutations >= 50


def wrong_type(value: Any) -> list[Any]:
    """Values of another JSON type, the likeliest mistake first."""
    if isinstance(value, bool):
        return [str(value).lower(), {"value": value}]
    if isinstance(value, int | float):
        return [str(value), {"value": value}]
    return [12345, [value], {"value": value}]


@pytest.mark.parametrize("category", CATEGORIES)
def test_a_value_of_the_wrong_type_is_found_and_converted(category: str) -> None:
    mutations = 0
    for entry_id, contract, arguments in gold_calls(category):
        if known_bad(contract, arguments):
            continue
        for name, value in arguments.items():
            # Java and JavaScript parameters also accept source text, so a string is never
            # the wrong type there; try values until one is.
            for wrong in wrong_type(value):
                broken = {**arguments, name: wrong}
                result = validate_arguments(contract, broken)
                if not result.ok:
                    break
            else:
                continue
            assert (pointer(name), "type") in codes_at(result), (entry_id, name, wrong)
            repaired = repaired_ok(contract, broken, result)
            if isinstance(wrong, str) and not isinstance(value, str):
                assert repaired == arguments, "a number or boolean sent as text comes back"
            mutations += 1
    assert mutations >= 30


@pytest.mark.parametrize("category", CATEGORIES)
def test_a_value_outside_an_enum_is_found_and_restored(category: str) -> None:
    mutations = 0
    for entry_id, contract, arguments in gold_calls(category):
        if known_bad(contract, arguments):
            continue
        properties = contract.input_schema["properties"]
        for name, value in arguments.items():
            choices = properties.get(name, {}).get("enum")
            if not choices or not isinstance(value, str):
                continue
            near_miss = value.upper() if value.upper() not in choices else value + "_"
            broken = {**arguments, name: near_miss}
            result = validate_arguments(contract, broken)
            assert codes_at(result) == {(pointer(name), "enum")}, entry_id
            assert result.error is not None
            assert result.error.field_errors[0].expected == choices
            assert repaired_ok(contract, broken, result) == arguments
            mutations += 1
    if category in ("simple_java", "simple_javascript"):
        assert mutations == 0, "these categories declare no enums"
    else:
        assert mutations >= 3
