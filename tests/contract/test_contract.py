"""`ToolContract`: every field, lossless round trips through JSON, YAML and TOML, clear errors."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper import ContractError, ExampleError, SideEffect, ToolContract

FULL: dict[str, Any] = {
    "id": "update_manuscript_metadata",
    "version": "1.2.0",
    "description": "Change a manuscript's title or subtitle.",
    "when_to_use": "The user approved a previewed change.",
    "when_not_to_use": "You have not previewed the change.",
    "input_schema": {
        "type": "object",
        "properties": {
            "manuscript_id": {"type": "string", "description": "e.g. m-42"},
            "title": {"type": "string", "maxLength": 200},
            "dry_run": {"type": "boolean", "default": False},
        },
        "required": ["manuscript_id"],
        "additionalProperties": False,
    },
    "output_schema": {"type": "object", "properties": {"version": {"type": "integer"}}},
    "side_effect": "committing",
    "open_world": True,
    "idempotency": "keyed",
    "required_capabilities": ["manuscripts.write"],
    "data_classification": {
        "inputs": "internal",
        "outputs": "confidential",
        "fields": {"/author_email": "secret"},
    },
    "timeout": 5.0,
    "retry": {"max_attempts": 3, "backoff_initial": 0.2, "retryable_categories": ["unavailable"]},
    "concurrency": {
        "read_set": ["manuscript:{manuscript_id}"],
        "write_set": ["manuscript:{manuscript_id}"],
        "concurrency_group": "manuscripts",
        "ordering": "in_order",
    },
    "result_projection": {
        "fields": ["version"],
        "summary_template": "now at version {version}",
        "artifact_threshold": 4096,
    },
    "verifier": "manuscript_read_back",
    "preview": "preview_manuscript_metadata_update",
    "resource_version": "manuscript_version",
    "credentials": ["manuscripts_token"],
    "examples": [{"arguments": {"manuscript_id": "m-42", "title": "New"}, "description": "rename"}],
    "model_views": {
        "openai": {"name": "update_manuscript", "description": "Rename a manuscript."},
        "gemini": {"input_schema": {"type": "object", "properties": {}}},
    },
}


def test_every_field_of_the_minimal_contract_is_there() -> None:
    contract = ToolContract.from_dict(FULL)
    assert contract.ref == "update_manuscript_metadata@1.2.0"
    assert contract.effective_side_effect is SideEffect.COMMITTING
    assert contract.retry.delay(1) == pytest.approx(0.2)
    assert contract.view("openai").name == "update_manuscript"
    assert contract.view("anthropic").name == "update_manuscript_metadata"
    assert "Do not use when" in contract.view("anthropic").description


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".toml"])
def test_round_trip_through_files_is_lossless(tmp_path: Path, suffix: str) -> None:
    contract = ToolContract.from_dict(FULL)
    text = {".json": contract.to_json, ".yaml": contract.to_yaml, ".toml": contract.to_toml}[
        suffix
    ]()
    path = tmp_path / f"contract{suffix}"
    path.write_text(text)
    loaded = ToolContract.load(path)
    assert loaded == contract
    assert loaded.content_digest() == contract.content_digest()


def test_minimal_contract_round_trips_and_defaults_are_cautious() -> None:
    contract = ToolContract(id="do_thing", description="Does a thing.")
    assert contract.effective_side_effect is SideEffect.COMMITTING
    assert not contract.is_idempotent
    assert ToolContract.from_dict(tomllib.loads(contract.to_toml())) == contract
    assert ToolContract.from_dict(yaml.safe_load(contract.to_yaml())) == contract


def test_examples_are_validated_at_load() -> None:
    bad = {**FULL, "examples": [{"arguments": {"title": 3}}]}
    with pytest.raises(ExampleError, match=r"examples\[0\]") as info:
        ToolContract.from_dict(bad)
    assert info.value.contract_id == "update_manuscript_metadata"


def test_errors_name_the_contract_field_and_fix(tmp_path: Path) -> None:
    with pytest.raises(ContractError, match=r"version '1\.2' is not semver") as info:
        ToolContract.from_dict({**FULL, "version": "1.2"})
    assert info.value.field == "version"
    with pytest.raises(ContractError, match="not a valid JSON Schema 2020-12"):
        ToolContract.from_dict({**FULL, "input_schema": {"type": "objectt"}})
    with pytest.raises(ContractError, match="side_effect"):
        ToolContract.from_dict({**FULL, "side_effect": "sometimes"})
    with pytest.raises(
        ContractError, match="unknown field 'sideeffect'; did you mean 'side_effect'"
    ):
        ToolContract.from_dict({**FULL, "sideeffect": "none"})
    with pytest.raises(ContractError, match=r"retry\.max_attemps: unknown field.*'max_attempts'"):
        ToolContract.from_dict({**FULL, "retry": {"max_attemps": 2}})
    broken = tmp_path / "c.yaml"
    broken.write_text("id: [unclosed")
    with pytest.raises(ContractError, match="not valid YAML"):
        ToolContract.load(broken)
    (tmp_path / "c.txt").write_text("id = 1")
    with pytest.raises(ContractError, match="unsupported file type"):
        ToolContract.load(tmp_path / "c.txt")
    with pytest.raises(ContractError, match="cannot read"):
        ToolContract.load(tmp_path / "missing.json")


def test_digest_follows_content_not_identity() -> None:
    a = ToolContract.from_dict(FULL)
    b = ToolContract.from_dict(json.loads(a.to_json()))
    assert a.content_digest() == b.content_digest()
    changed = a.model_copy(update={"description": "Something else."})
    assert changed.content_digest() != a.content_digest()


names = st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True)
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=40)


@given(
    name=names,
    description=texts.filter(str.strip),
    props=st.dictionaries(names, st.sampled_from(["string", "integer", "boolean"]), max_size=5),
    capabilities=st.lists(names, max_size=3),
    timeout=st.none() | st.floats(min_value=0.01, max_value=1e4),
)
@settings(max_examples=100, deadline=None)
def test_any_contract_round_trips_through_every_format(
    name: str,
    description: str,
    props: dict[str, str],
    capabilities: list[str],
    timeout: float | None,
) -> None:
    contract = ToolContract(
        id=name,
        version="1.0.0",
        description=description,
        input_schema={"type": "object", "properties": {k: {"type": v} for k, v in props.items()}},
        required_capabilities=tuple(capabilities),
        timeout=timeout,
    )
    assert ToolContract.from_dict(json.loads(contract.to_json())) == contract
    assert ToolContract.from_dict(yaml.safe_load(contract.to_yaml())) == contract
    assert ToolContract.from_dict(tomllib.loads(contract.to_toml())) == contract
