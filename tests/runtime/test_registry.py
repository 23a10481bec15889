"""The registry's compiled entries through `Harness.register` and `invoke`: one verifier fact,
what real tools return serialized before the output check, the context parameter injected in
every form the schema leaves out, mismatches refused at registration with the fix, one semver
ordering, and disabled entries that never resolve."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from pathlib import Path
from typing import Annotated, Any, Optional

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from toolkeeper import (
    ContractError,
    ErrorCategory,
    Principal,
    Proposal,
    ResultEnvelope,
    Status,
    ToolContext,
    ToolContract,
    tool,
)
from toolkeeper.errors import RegistryError
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

ALICE = Principal(id="alice", tenant="acme")
ALLOW_ALL = """
@id("test.allow_all")
permit(principal, action, resource);
"""


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    policy = CedarPolicyEngine(policies=ALLOW_ALL, include_defaults=False)
    return Harness(home=tmp_path / "tk", policy=policy)


def call(harness: Harness, name: str, **arguments: Any) -> ResultEnvelope:
    return harness.invoke_sync(Proposal(f"call-{name}", name, arguments), principal=ALICE)


# -- one verifier fact --------------------------------------------------------------------


def write_contract(**fields: Any) -> ToolContract:
    return ToolContract(
        id="write_note",
        version="1.0.0",
        description="Write a note.",
        side_effect="reversible",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        **fields,
    )


def test_a_verifier_given_at_registration_gates_success(harness: Harness) -> None:
    def write(text: str) -> dict[str, Any]:
        return {"written": text}

    def never_there(arguments: dict[str, Any], context: ToolContext) -> bool:
        return False

    registered = harness.register(write_contract(), executor=write, verifier=never_there)
    assert registered.verifier is not None  # the contract now names what it runs
    envelope = call(harness, "write_note", text="hi")
    assert envelope.status is Status.FAILED, envelope  # a refuted read-back never succeeds
    assert envelope.error is not None and "read-back" in envelope.error.message


def test_a_verifier_that_contradicts_the_named_one_is_refused(harness: Harness) -> None:
    harness.register_verifier("note_exists", lambda arguments, context: True)
    with pytest.raises(RegistryError, match=r"names verifier 'note_exists'.*drop verifier="):
        harness.register(
            write_contract(verifier="note_exists"),
            executor=lambda text: {},
            verifier=lambda arguments, context: False,
        )


def test_a_verifier_for_a_named_but_unregistered_one_is_used(harness: Harness) -> None:
    registered = harness.register(
        write_contract(verifier="note_exists"),
        executor=lambda text: {},
        verifier=lambda arguments, context: True,
    )
    assert registered.verifier == "note_exists"
    assert call(harness, "write_note", text="hi").status is Status.SUCCEEDED


# -- what real tools return -----------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"


class Place(BaseModel):
    city: str
    seen: datetime.date


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Tagged(TypedDict):
    colour: Colour
    tags: tuple[str, ...]


@tool(side_effect="none")
def a_model() -> Place:
    """Return a pydantic model."""
    return Place(city="Utrecht", seen=datetime.date(2026, 1, 2))


@tool(side_effect="none")
def anything() -> Any:
    """Return a dict typed Any."""
    return {"a": 1}


@tool(side_effect="none")
def maybe_none() -> dict[str, int] | None:
    """Return None."""
    return None


@tool(side_effect="none")
def maybe_dict() -> dict[str, int] | None:
    """Return a dict typed as maybe a dict."""
    return {"a": 1}


@tool(side_effect="none")
def a_dataclass() -> Point:
    """Return a dataclass."""
    return Point(1, 2)


@tool(side_effect="none")
def a_typed_dict() -> Tagged:
    """Return a TypedDict holding an enum and a tuple."""
    return {"colour": Colour.RED, "tags": ("a", "b")}


@tool(side_effect="none")
def a_set() -> set[int]:
    """Return a set."""
    return {3}


@pytest.mark.parametrize(
    ("function", "content"),
    [
        (a_model, {"city": "Utrecht", "seen": "2026-01-02"}),
        (anything, {"a": 1}),
        (maybe_none, {"result": None}),
        (maybe_dict, {"result": {"a": 1}}),
        (a_dataclass, {"x": 1, "y": 2}),
        (a_typed_dict, {"colour": "red", "tags": ["a", "b"]}),
        (a_set, {"result": [3]}),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_returned_values_are_serialized_before_the_output_check(
    harness: Harness, function: Any, content: dict[str, Any]
) -> None:
    harness.register(function)
    envelope = call(harness, function.__name__)
    assert envelope.status is Status.SUCCEEDED, envelope
    assert envelope.structured_content == content


def test_a_value_with_no_json_form_fails_with_a_field_error(harness: Harness) -> None:
    @tool(side_effect="none")
    def opaque() -> Any:
        """Return something JSON cannot hold."""
        return object()

    harness.register(opaque)
    envelope = call(harness, "opaque")
    assert envelope.status is Status.FAILED
    assert envelope.error is not None
    assert envelope.error.field_errors[0].code == "serialization"
    assert envelope.structured_content is None


def test_output_that_breaks_the_schema_still_fails(harness: Harness) -> None:
    @tool(side_effect="none")
    def lies() -> Point:
        """Claim a point, return something else."""
        return {"x": "one"}  # type: ignore[return-value]

    harness.register(lies)
    envelope = call(harness, "lies")
    assert envelope.status is Status.FAILED
    assert envelope.error is not None
    assert {e.path for e in envelope.error.field_errors} >= {"/x", "/"}


# -- the context parameter --------------------------------------------------------------------


@tool(side_effect="none")
def optional_union(ctx: ToolContext | None = None) -> dict[str, Any]:
    """Report the context."""
    return {"call": ctx.call_id if ctx else None}


@tool(side_effect="none")
def optional_typing(ctx: Optional[ToolContext] = None) -> dict[str, Any]:  # noqa: UP045
    """Report the context."""
    return {"call": ctx.call_id if ctx else None}


@tool(side_effect="none")
def annotated(ctx: Annotated[ToolContext | None, "injected"] = None) -> dict[str, Any]:
    """Report the context."""
    return {"call": ctx.call_id if ctx else None}


@pytest.mark.parametrize("function", [optional_union, optional_typing, annotated])
def test_an_optional_context_parameter_is_injected(harness: Harness, function: Any) -> None:
    contract = harness.register(function)
    assert contract.input_schema["properties"] == {}
    envelope = call(harness, function.__name__)
    assert envelope.structured_content == {"call": f"call-{function.__name__}"}


def test_a_callable_object_executor_gets_its_context_and_is_awaited(harness: Harness) -> None:
    class Reporter:
        async def __call__(self, text: str, context: ToolContext | None = None) -> dict[str, Any]:
            return {"text": text, "call": context.call_id if context else None}

    contract = ToolContract(
        id="report",
        description="Report.",
        side_effect="none",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    )
    harness.register(contract, executor=Reporter())
    envelope = call(harness, "report", text="hi")
    assert envelope.structured_content == {"text": "hi", "call": "call-report"}


# -- mismatches refused at registration ----------------------------------------------------------


def read_contract(**fields: Any) -> ToolContract:
    return ToolContract(
        id="read_note",
        description="Read a note.",
        side_effect="none",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        **fields,
    )


def test_an_executor_that_is_not_callable_is_refused(harness: Harness) -> None:
    with pytest.raises(RegistryError, match="neither a function nor an Executor; pass"):
        harness.register(read_contract(), executor="read_note")  # type: ignore[arg-type]


def test_an_executor_missing_an_input_field_is_refused(harness: Harness) -> None:
    def read(title: str) -> str:
        return title

    with pytest.raises(RegistryError, match=r"no parameter for input field\(s\) name; add them"):
        harness.register(read_contract(), executor=read)


def test_a_context_parameter_mixed_with_other_types_is_refused(harness: Harness) -> None:
    def read(name: str, ctx: ToolContext | str) -> str:
        """Read."""
        return name

    with pytest.raises(ContractError, match=r"annotate it `ToolContext` or `ToolContext \| None`"):
        harness.register(read, executor=None)


def test_a_named_resource_version_reader_must_be_given(harness: Harness) -> None:
    with pytest.raises(RegistryError, match="pass resource_version=<function"):
        harness.register(read_contract(resource_version="note_version"), executor=lambda name: "")


def test_hooks_must_be_callable(harness: Harness) -> None:
    with pytest.raises(RegistryError, match=r"verifier='yes' is not callable"):
        harness.register(
            read_contract(),
            executor=lambda name: "",
            verifier="yes",  # type: ignore[arg-type]
        )


def test_the_entry_holds_its_ref_and_digest(harness: Harness) -> None:
    contract = harness.register(a_model)
    entry = harness.registry.find("a_model")
    assert entry is not None
    assert (entry.ref, entry.digest) == (contract.ref, contract.digest())
    with pytest.raises(AttributeError):
        entry.digest = "sha256:0"  # type: ignore[misc]


# -- versions ------------------------------------------------------------------------------------


def test_the_latest_version_follows_semver_precedence(harness: Harness) -> None:
    for version in ("1.0.0-rc.2", "1.0.0-rc.10", "1.0.0-alpha"):
        harness.register(read_contract(version=version), executor=lambda name: {})
    latest = harness.registry.latest("read_note")
    assert latest is not None and latest.contract.version == "1.0.0-rc.10"


# -- disabled entries ------------------------------------------------------------------------------


def versioned(version: str) -> ToolContract:
    return ToolContract(
        id="write_note",
        version=version,
        description="Write a note.",
        side_effect="committing",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    )


def test_a_disabled_tool_does_not_resolve_list_suggest_or_wait_for_approval(
    tmp_path: Path,
) -> None:
    harness = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine())
    harness.register(versioned("1.0.0"), executor=lambda text: {})
    harness.register(versioned("2.0.0"), executor=lambda text: {})
    assert call(harness, "write_note", text="a").status is Status.PENDING_APPROVAL

    harness.registry.disable("write_note@2.0.0", "withdrawn")
    generation = harness.registry.generation
    harness.registry.disable("write_note@2.0.0", "withdrawn by its owner")
    assert harness.registry.generation == generation  # a new reason changes no view
    assert harness.registry.disabled("write_note@2.0.0") == "withdrawn by its owner"
    latest = harness.registry.latest("write_note")
    assert latest is not None and latest.ref == "write_note@1.0.0"  # the newest served one
    pinned = call(harness, "write_note@2.0.0", text="b")
    assert pinned.error is not None and pinned.error.category is ErrorCategory.UNKNOWN_TOOL
    assert "write_note@2.0.0" not in (pinned.error.suggested_fix or "")

    harness.registry.disable("write_note@1.0.0", "withdrawn by its owner")
    assert harness.visible_contracts(ALICE) == []
    pending = len(harness.approvals.list())
    refused = call(harness, "write_note", text="c")
    assert refused.error is not None and refused.error.category is ErrorCategory.UNKNOWN_TOOL
    misspelled = call(harness, "write_not", text="c")
    assert misspelled.error is not None
    assert "write_note" not in (misspelled.error.suggested_fix or "")
    assert len(harness.approvals.list()) == pending

    harness.registry.enable("write_note@2.0.0")
    assert call(harness, "write_note", text="d").status is Status.PENDING_APPROVAL
    assert [c.ref for c in harness.visible_contracts(ALICE)] == ["write_note@2.0.0"]


def test_a_pending_approval_for_a_disabled_tool_is_stale_on_resume(tmp_path: Path) -> None:
    harness = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine())
    harness.register(versioned("1.0.0"), executor=lambda text: {})
    pending = call(harness, "write_note", text="a")
    assert pending.execution_meta is not None and pending.execution_meta.approval_id
    harness.registry.disable("write_note@1.0.0", "withdrawn")
    harness.approvals.decide(pending.execution_meta.approval_id, "approve", by="olga")
    resumed = harness.resume_sync(pending.execution_meta.approval_id, principal=ALICE)
    assert resumed.error is not None and resumed.error.category is ErrorCategory.STALE


def test_only_a_disabled_ref_may_be_replaced_with_new_content(harness: Harness) -> None:
    harness.register(versioned("1.0.0"), executor=lambda text: {"old": True})
    changed = versioned("1.0.0").model_copy(update={"description": "Write a note, twice."})
    with pytest.raises(RegistryError, match="a changed tool needs a new version"):
        harness.register(changed, executor=lambda text: {})
    harness.registry.disable("write_note@1.0.0", "replaced")
    harness.register(changed, executor=lambda text: {})
    assert harness.registry.find("write_note") is None  # replaced, still disabled
    harness.registry.enable("write_note@1.0.0")
    entry = harness.registry.find("write_note")
    assert entry is not None and entry.contract.description == "Write a note, twice."


def test_disabling_an_unknown_ref_says_so(harness: Harness) -> None:
    with pytest.raises(RegistryError, match="is not registered"):
        harness.registry.disable("nope@1.0.0", "withdrawn")
