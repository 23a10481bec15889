"""Odd values from tool code (issue 9, item 10): a committing tool returns, raises or reads back
something that is not JSON. The function returned (or raised), so the call must settle: a
completed ledger row with its effect recorded as it happened, an envelope that says so, and
a keyed repeat that replays that outcome instead of running the effect again.

What `json_output` converts and what it refuses is in docs/tool-output.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolkeeper import (
    EffectState,
    ErrorCategory,
    Principal,
    Proposal,
    Status,
    ToolContract,
    ToolFailure,
)
from toolkeeper.ledger import RecordState
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice", "acme", frozenset())


def open_harness(tmp_path: Path) -> Harness:
    policy = CedarPolicyEngine(
        policies="permit(principal, action, resource);", include_defaults=False
    )
    return Harness(home=tmp_path / "tk", policy=policy)


def keyed_write(harness: Harness, produce: Any, runs: list[int], **register: Any) -> None:
    """Register `pay`, a committing keyed tool that counts its runs and returns `produce()`."""
    contract = ToolContract.from_dict(
        {
            "id": "pay",
            "version": "1.0.0",
            "description": "Pay an invoice.",
            "side_effect": "committing",
            "idempotency": "keyed",
            "input_schema": {
                "type": "object",
                "properties": {"invoice": {"type": "string"}},
                "required": ["invoice"],
            },
        }
    )

    def pay(invoice: str) -> Any:
        runs.append(1)
        return produce()

    harness.register(contract, executor=pay, **register)


class Unprintable:
    """An object whose repr and str raise, as a half-built object of tool code might."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    __str__ = __repr__


class BrokenMessage(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


@dataclasses.dataclass
class Receipt:
    """A dataclass whose field raises when it is read, as pydantic reads it."""

    number: int

    def __getattribute__(self, name: str) -> Any:
        if name == "number":
            raise RuntimeError("the number is not assigned yet")
        return object.__getattribute__(self, name)


class Line(BaseModel):
    text: str


def failing_rows() -> Iterator[int]:
    yield 1
    raise RuntimeError("the cursor closed")


def recursive_list() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


def recursive_dict() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


NO_JSON_FORM = {
    "memoryview_binary": lambda: memoryview(b"\xff\xfe"),
    "bytes_binary": lambda: {"blob": b"\x00\xff"},
    "object": lambda: {"handle": object()},
    "unprintable": lambda: Unprintable(),
    "recursive_list": recursive_list,
    "recursive_dict": recursive_dict,
    "tuple_keys": lambda: {(1, 2): "a"},
    "colliding_keys": lambda: {1: "int", "1": "str"},
    "nan_key": lambda: {float("nan"): 1},
    "generator_raising": lambda: {"rows": failing_rows()},
    "generator_raising_unprintable": lambda: {"rows": (x for x in [BrokenMessage()] if str(x))},
    "function": lambda: print,
}


@pytest.mark.parametrize("produce", NO_JSON_FORM.values(), ids=NO_JSON_FORM.keys())
def test_a_committing_tool_returning_no_json_form_settles_and_replays(
    tmp_path: Path, produce: Any
) -> None:
    """Defect: an exception raised while the output was read (a generator, a property, an
    unprintable exception) escaped `invoke` after the effect ran: the row stayed `intent`
    and a keyed retry answered "still in progress" until a restart; for the other values
    the envelope blamed the output schema and never said the effect had happened."""
    harness = open_harness(tmp_path)
    runs: list[int] = []
    keyed_write(harness, produce, runs)
    first = harness.invoke_sync(
        Proposal("c1", "pay", {"invoice": "INV-7"}, idempotency_key="k-7"), principal=ALICE
    )
    assert first.status is Status.FAILED
    assert first.error is not None and first.error.category is ErrorCategory.INTERNAL
    assert first.error.effect_committed is True
    assert first.error.field_errors[0].code == "serialization"
    assert "do not repeat" in (first.error.suggested_fix or "").lower()
    assert first.structured_content is None
    assert first.execution_meta is not None
    assert first.execution_meta.effect_state is EffectState.COMMITTED

    again = harness.invoke_sync(
        Proposal("c2", "pay", {"invoice": "INV-7"}, idempotency_key="k-7"), principal=ALICE
    )
    assert runs == [1], "the keyed repeat ran the effect again"
    assert again.status is Status.FAILED and again.error == first.error
    assert again.execution_meta is not None
    assert again.execution_meta.replay_of == first.execution_meta.request_id
    assert again.execution_meta.effect_state is EffectState.COMMITTED

    harness.flush()
    rows = {r.call_id: r for r in harness.ledger.query()}
    assert rows["c1"].state is RecordState.COMPLETED
    assert (rows["c1"].status, rows["c1"].effect_state) == ("failed", "committed")
    assert not harness.ledger.in_flight()
    harness.close()


CONVERTED = {
    "memoryview_text": (lambda: {"m": memoryview(b"ok")}, {"m": "ok"}),
    "bytearray_text": (lambda: bytearray("é".encode()), {"result": "é"}),
    "json_keys": (
        lambda: {None: 0, True: 1, 2: 2, 2.5: 3, "s": 4},
        {"null": 0, "true": 1, "2": 2, "2.5": 3, "s": 4},
    ),
    "surrogates": (
        lambda: {"caf\udce9.txt": ["x\ud800"]},
        {"caf\\udce9.txt": ["x\\ud800"]},
    ),
    "surrogate_in_model": (lambda: [Line(text="\udcff")], {"result": [{"text": "\\udcff"}]}),
    "surrogate_in_nested_generator": (
        lambda: {"names": (n for n in ["a", "b\udc80"])},
        {"names": ["a", "b\\udc80"]},
    ),
}


@pytest.mark.parametrize("produce, content", CONVERTED.values(), ids=CONVERTED.keys())
def test_values_with_a_faithful_json_form_are_converted(
    tmp_path: Path, produce: Any, content: Any
) -> None:
    """Defect: text bytes in a memoryview, a lone surrogate (a `surrogateescape` file name)
    and a None key failed the call, or wrote the key as "None", after the effect ran."""
    harness = open_harness(tmp_path)
    runs: list[int] = []
    keyed_write(harness, produce, runs)
    envelope = harness.invoke_sync(Proposal("c1", "pay", {"invoice": "INV-1"}), principal=ALICE)
    assert envelope.status is Status.SUCCEEDED, envelope.error
    assert envelope.structured_content == content
    harness.close()


def test_a_dataclass_whose_field_raises_settles(tmp_path: Path) -> None:
    """Defect: a property raising while pydantic read the returned object escaped `invoke`."""
    harness = open_harness(tmp_path)
    runs: list[int] = []
    keyed_write(harness, lambda: Receipt(7), runs)
    envelope = harness.invoke_sync(Proposal("c1", "pay", {"invoice": "INV-2"}), principal=ALICE)
    assert envelope.status is Status.FAILED
    assert envelope.error is not None and envelope.error.effect_committed is True
    harness.flush()
    (row,) = harness.ledger.query()
    assert row.state is RecordState.COMPLETED
    harness.close()


RAISED = {
    "exception_without_message": lambda: BrokenMessage(),
    "tool_failure_of_other_types": lambda: ToolFailure(
        {"not": "text"},  # type: ignore[arg-type]
        effect_committed="perhaps",  # type: ignore[arg-type]
    ),
}


@pytest.mark.parametrize("make", RAISED.values(), ids=RAISED.keys())
def test_a_committing_tool_raising_an_odd_exception_settles_as_unknown(
    tmp_path: Path, make: Any
) -> None:
    """Defect: formatting an exception whose `__str__` raises, or a `ToolFailure` holding
    values of other types, raised out of `invoke` with the intent written: the row stayed
    `intent` and the keyed retry answered "still in progress"."""
    harness = open_harness(tmp_path)
    runs: list[int] = []

    def produce() -> Any:
        raise make()

    keyed_write(harness, produce, runs)
    first = harness.invoke_sync(
        Proposal("c1", "pay", {"invoice": "INV-3"}, idempotency_key="k-3"), principal=ALICE
    )
    assert first.status is Status.EFFECT_UNKNOWN
    assert first.error is not None and first.error.category is ErrorCategory.INTERNAL
    assert first.error.effect_committed is None
    again = harness.invoke_sync(
        Proposal("c2", "pay", {"invoice": "INV-3"}, idempotency_key="k-3"), principal=ALICE
    )
    assert runs == [1]
    assert again.status is Status.EFFECT_UNKNOWN and again.error == first.error
    harness.flush()
    assert not harness.ledger.in_flight()
    harness.close()


class Undecided:
    """A verifier's answer that cannot even be compared with True."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparison")

    __hash__ = object.__hash__


def test_a_verifier_answering_an_incomparable_object_cannot_tell(tmp_path: Path) -> None:
    """Defect: comparing the verifier's answer with True raised out of the check stage
    after the effect ran, leaving the intent row."""
    harness = open_harness(tmp_path)
    runs: list[int] = []
    keyed_write(harness, lambda: {"paid": True}, runs, verifier=lambda arguments, ctx: Undecided())
    envelope = harness.invoke_sync(Proposal("c1", "pay", {"invoice": "INV-4"}), principal=ALICE)
    assert envelope.status is Status.EFFECT_UNKNOWN
    harness.flush()
    (row,) = harness.ledger.query()
    assert row.state is RecordState.COMPLETED and row.effect_state == "unknown"
    harness.close()


def chat_turn(call_id: str) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "pay", "arguments": '{"invoice": "INV-9"}'},
    }
    return {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}


@pytest.mark.parametrize(
    "produce",
    [NO_JSON_FORM["generator_raising"], lambda: Receipt(9)],
    ids=["generator_raising", "field_raising"],
)
def test_run_tool_calls_answers_a_no_json_output_and_replays_the_repeat(
    tmp_path: Path, produce: Any
) -> None:
    """Defect: the exception escaped `run_tool_calls`, so the turn had no answer, and the
    model's repeat of the call (same arguments, same session: the same derived key) was
    told "still in progress"."""
    harness = open_harness(tmp_path)
    runs: list[int] = []
    keyed_write(harness, produce, runs)

    async def turn(call_id: str) -> list[dict[str, Any]]:
        return await harness.run_tool_calls(
            chat_turn(call_id), vendor="openai_chat", principal=ALICE, session="s1"
        )

    (first,) = asyncio.run(turn("call_1"))
    (second,) = asyncio.run(turn("call_2"))
    assert runs == [1]
    for message in (first, second):
        assert message["content"].startswith("status: failed")
        assert "effect_committed: true" in message["content"]
    harness.flush()
    rows = {r.call_id: r for r in harness.ledger.query()}
    assert rows["call_1"].state is RecordState.COMPLETED
    assert (rows["call_1"].status, rows["call_1"].effect_state) == ("failed", "committed")
    assert rows["call_2"].envelope is not None
    assert rows["call_2"].envelope["execution_meta"]["replay_of"] == rows["call_1"].request_id
    harness.close()
