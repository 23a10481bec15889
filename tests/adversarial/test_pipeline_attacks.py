"""Attacks on the one road: odd text and odd returns, tool code raising what ends threads and
generators, and callers cancelled in the middle. Each call must still end as an envelope
with exactly one final ledger record, and the ledger must keep taking other calls' rows."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import ErrorCategory, Principal, Proposal, Status, tool
from toolkeeper.ledger import RecordState
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice", "acme", frozenset({"docs"}))


def open_harness(tmp_path: Path) -> Harness:
    policy = CedarPolicyEngine(
        policies="permit(principal, action, resource);", include_defaults=False
    )
    return Harness(home=tmp_path / "tk", policy=policy)


def returning(harness: Harness, name: str, value: Any) -> None:
    @tool(id=name, side_effect="none")
    def odd() -> Any:
        """Return an odd value."""
        return value

    harness.register(odd)


def test_a_lone_surrogate_in_a_tool_name_neither_kills_the_writer_nor_loses_rows(
    tmp_path: Path,
) -> None:
    """Defect: a name such as ``"x\\udc80y"`` (a JSON escape a model can send) failed the
    write-behind batch with UnicodeEncodeError: the writer thread died, the batch (other
    calls' rows with it) was lost and every later flush raised."""
    harness = open_harness(tmp_path)
    returning(harness, "ok", {"fine": True})
    bad = harness.invoke_sync(Proposal("c1", "x\udc80y", {}), principal=ALICE)
    good = harness.invoke_sync(Proposal("c2", "ok", {}), principal=ALICE)
    assert bad.status is Status.REJECTED and good.status is Status.SUCCEEDED
    harness.flush()
    rows = {r.call_id: r for r in harness.ledger.query()}
    assert set(rows) == {"c1", "c2"}
    assert rows["c1"].tool == "x\\udc80y"  # stored as its escape
    harness.close()


def test_a_lone_surrogate_in_arguments_is_an_invalid_argument(tmp_path: Path) -> None:
    """Defect: the argument digest raised UnicodeEncodeError out of `invoke`, leaving no
    record of the call."""
    harness = open_harness(tmp_path)

    @tool(side_effect="none")
    def echo(text: str) -> dict[str, Any]:
        """Echo the text."""
        return {"text": text}

    harness.register(echo)
    envelope = harness.invoke_sync(Proposal("c1", "echo", {"text": "a\ud800"}), principal=ALICE)
    assert envelope.status is Status.REJECTED
    assert envelope.error is not None
    assert envelope.error.category is ErrorCategory.INVALID_ARGUMENT
    assert "\\ud800" in envelope.error.message
    (record,) = harness.ledger.query()
    assert record.status == "rejected"
    harness.close()


def test_output_with_a_lone_surrogate_is_escaped_with_a_record(tmp_path: Path) -> None:
    """Defect: the project stage raised UnicodeEncodeError out of `invoke`: no envelope,
    no record. The surrogate is now written as its escape (docs/tool-output.md)."""
    harness = open_harness(tmp_path)
    returning(harness, "surrogate", {"text": "\ud800"})
    envelope = harness.invoke_sync(Proposal("c1", "surrogate", {}), principal=ALICE)
    assert envelope.status is Status.SUCCEEDED
    assert envelope.structured_content == {"text": "\\ud800"}
    (record,) = harness.ledger.query()
    assert record.status == "succeeded"
    harness.close()


def test_nan_and_infinity_in_output_become_json_null(tmp_path: Path) -> None:
    """Defect: NaN and infinities went into `structured_content` as is, which no JSON client
    can read (`json.dumps(..., allow_nan=False)` refuses the envelope)."""
    harness = open_harness(tmp_path)
    returning(harness, "floats", {"nan": float("nan"), "inf": float("-inf"), "one": 1.5})
    envelope = harness.invoke_sync(Proposal("c1", "floats", {}), principal=ALICE)
    assert envelope.status is Status.SUCCEEDED
    assert envelope.structured_content == {"nan": None, "inf": None, "one": 1.5}
    json.dumps(envelope.model_dump(mode="json"), allow_nan=False)
    harness.close()


@pytest.mark.parametrize(
    "value, content",
    [
        ((n for n in range(3)), {"result": [0, 1, 2]}),
        ({(1, 2)}, {"result": [[1, 2]]}),
        ({"big": 2**64}, {"big": 2**64}),
    ],
    ids=["generator", "set_of_tuples", "huge_int"],
)
def test_odd_but_serializable_returns_succeed(tmp_path: Path, value: Any, content: Any) -> None:
    harness = open_harness(tmp_path)
    returning(harness, "odd", value)
    envelope = harness.invoke_sync(Proposal("c1", "odd", {}), principal=ALICE)
    assert envelope.status is Status.SUCCEEDED, envelope.error
    assert envelope.structured_content == content
    harness.close()


@pytest.mark.parametrize("value", [b"\xff\x00", "recursive"], ids=["bytes", "recursive"])
def test_returns_without_a_json_form_fail_with_a_record(tmp_path: Path, value: Any) -> None:
    if value == "recursive":
        value = {}
        value["self"] = value
    harness = open_harness(tmp_path)
    returning(harness, "odd", value)
    envelope = harness.invoke_sync(Proposal("c1", "odd", {}), principal=ALICE)
    assert envelope.status is Status.FAILED
    assert len(harness.ledger.query()) == 1
    harness.close()


@pytest.mark.parametrize("raised", [SystemExit, GeneratorExit])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_tool_code_raising_systemexit_or_generatorexit_fails_the_call(
    tmp_path: Path, raised: type[BaseException], is_async: bool
) -> None:
    """Defect: `sys.exit()` (or a stray GeneratorExit) in tool code escaped `invoke`, ending
    the caller and leaving no record; from a worker thread GeneratorExit even closed the
    awaiting coroutines past every handler."""
    harness = open_harness(tmp_path)
    if is_async:

        async def quits() -> dict[str, Any]:
            """Quit."""
            raise raised(3)

    else:

        def quits() -> dict[str, Any]:  # type: ignore[misc]
            """Quit."""
            raise raised(3)

    harness.register(tool(side_effect="none")(quits))
    envelope = harness.invoke_sync(Proposal("c1", "quits", {}), principal=ALICE)
    assert envelope.status is Status.FAILED
    assert envelope.error is not None and raised.__name__ in envelope.error.message
    (record,) = harness.ledger.query()
    assert record.status == "failed"
    harness.close()


def test_a_caller_cancelled_during_read_back_leaves_a_record(tmp_path: Path) -> None:
    """Defect: only dispatch recorded a cancellation; cancelled while the verifier ran, a
    committed write was left as a bare intent row until the next process recovered it."""
    harness = open_harness(tmp_path)
    runs: list[str] = []

    async def slow_read_back(arguments: dict[str, Any], context: Any) -> bool:
        await asyncio.sleep(30)
        return True

    @tool(version="1.0.0", side_effect="committing")
    def publish(doc: str) -> dict[str, Any]:
        """Publish a document."""
        runs.append(doc)
        return {"published": doc}

    harness.register(publish, verifier=slow_read_back)

    async def main() -> None:
        task = asyncio.ensure_future(
            harness.invoke(Proposal("c1", "publish", {"doc": "d"}), principal=ALICE)
        )
        while not runs:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert runs == ["d"]
    (record,) = harness.ledger.query()
    assert record.state is RecordState.COMPLETED
    assert (record.status, record.effect_state) == ("cancelled", "unknown")
    kinds = [(e.stage, e.kind) for e in harness.ledger.events(record.request_id)]
    assert ("check", "cancelled") in kinds
    harness.close()


def test_a_caller_cancelled_before_dispatch_leaves_a_record_without_effect(
    tmp_path: Path,
) -> None:
    """Cancelled while the resource-version reader ran, nothing ran: the row says so."""
    harness = open_harness(tmp_path)
    started = asyncio.Event()

    async def slow_versions(arguments: dict[str, Any], context: Any) -> dict[str, str]:
        started.set()
        await asyncio.sleep(30)
        return {}

    @tool(version="1.0.0", side_effect="committing")
    def publish(doc: str) -> dict[str, Any]:
        """Publish a document."""
        return {"published": doc}

    harness.register(publish, resource_version=slow_versions)

    async def main() -> None:
        task = asyncio.ensure_future(
            harness.invoke(Proposal("c1", "publish", {"doc": "d"}), principal=ALICE)
        )
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    (record,) = harness.ledger.query()
    assert (record.status, record.effect_state) == ("cancelled", "none")
    harness.close()


@pytest.mark.parametrize("raised", [SystemExit, GeneratorExit])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_hooks_raising_systemexit_or_generatorexit_end_only_the_call(
    tmp_path: Path, raised: type[BaseException], is_async: bool
) -> None:
    """Defect: a verifier or resource-version reader calling `sys.exit()` (or raising
    GeneratorExit) escaped `invoke` and left a bare intent row."""
    harness = open_harness(tmp_path)

    def fail(arguments: dict[str, Any], context: Any) -> Any:
        raise raised(2)

    async def fail_async(arguments: dict[str, Any], context: Any) -> Any:
        raise raised(2)

    read_back = versions = fail_async if is_async else fail

    @tool(version="1.0.0", side_effect="committing")
    def publish(doc: str) -> dict[str, Any]:
        """Publish a document."""
        return {"published": doc}

    @tool(version="1.0.0", side_effect="committing")
    def retitle(doc: str) -> dict[str, Any]:
        """Retitle a document."""
        return {"retitled": doc}

    harness.register(publish, verifier=read_back)
    harness.register(retitle, resource_version=versions)
    published = harness.invoke_sync(Proposal("c1", "publish", {"doc": "d"}), principal=ALICE)
    assert published.status is Status.EFFECT_UNKNOWN  # the read-back could not tell
    retitled = harness.invoke_sync(Proposal("c2", "retitle", {"doc": "d"}), principal=ALICE)
    assert retitled.status is Status.FAILED
    assert retitled.error is not None and retitled.error.category is ErrorCategory.UNAVAILABLE
    records = harness.ledger.query()
    assert sorted(r.state.value for r in records) == ["completed", "completed"]
    harness.close()


def test_a_hung_secret_lookup_says_it_timed_out_not_that_nothing_is_configured(
    tmp_path: Path,
) -> None:
    """Defect: a secret provider that did not answer within the hook timeout was reported
    as "credential(s) … are not configured … retrying will not help", which sends the
    operator to the wrong place; it is a retryable timeout."""
    import threading

    from toolkeeper.secrets.providers import CallableSecretProvider, SecretBroker

    release = threading.Event()

    def hung_vault(name: str) -> str | None:
        release.wait(10)
        return "value-from-vault"

    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(
            policies="permit(principal, action, resource);", include_defaults=False
        ),
        secrets=SecretBroker([CallableSecretProvider(hung_vault)]),
        hook_timeout=0.2,
    )

    @tool(side_effect="none", credentials=["VAULT_TOKEN"])
    def fetch() -> dict[str, Any]:
        """Fetch something."""
        return {}

    harness.register(fetch)
    envelope = harness.invoke_sync(Proposal("c1", "fetch", {}), principal=ALICE)
    release.set()
    assert envelope.status is Status.FAILED and envelope.error is not None
    assert envelope.error.category is ErrorCategory.UNAVAILABLE
    assert envelope.error.retryable
    assert "did not finish within 0.2 s" in envelope.error.message
    assert "not configured" not in envelope.error.message
    harness.close()


def test_a_generator_a_sync_tool_returns_runs_under_its_timeout_off_the_loop(
    tmp_path: Path,
) -> None:
    """Defect: a sync tool returning a generator returned at once, and the check stage read
    the generator — tool code — on the event loop with no timeout: a blocking (or endless)
    generator stalled every other call and still `succeeded` against a 0.1 s timeout."""
    import time

    harness = open_harness(tmp_path)

    @tool(side_effect="none", timeout=0.1)
    def rows() -> Any:
        """Stream rows."""

        def produce() -> Any:
            for n in range(3):
                time.sleep(0.2)
                yield n

        return produce()

    harness.register(rows)
    beats: list[float] = []

    async def main() -> Any:
        async def heartbeat() -> None:
            for _ in range(20):
                beats.append(time.perf_counter())
                await asyncio.sleep(0.02)

        beating = asyncio.ensure_future(heartbeat())
        envelope = await harness.invoke(Proposal("c1", "rows", {}), principal=ALICE)
        await beating
        return envelope

    envelope = asyncio.run(main())
    assert envelope.status is Status.TIMED_OUT
    assert max(b - a for a, b in itertools.pairwise(beats)) < 0.15
    harness.close()


def test_arguments_nested_too_deeply_to_encode_are_an_invalid_argument(tmp_path: Path) -> None:
    """Defect: arguments deep enough to pass validation but not JSON encoding (5,000 nested
    lists) raised RecursionError out of `invoke`, leaving no record."""
    harness = open_harness(tmp_path)

    @tool(side_effect="none")
    def keep(value: Any = None) -> dict[str, Any]:
        """Keep a value."""
        return {}

    harness.register(keep)
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    envelope = harness.invoke_sync(Proposal("c1", "keep", {"value": deep}), principal=ALICE)
    assert envelope.status is Status.REJECTED
    assert envelope.error is not None
    assert envelope.error.category is ErrorCategory.INVALID_ARGUMENT
    assert len(harness.ledger.query()) == 1
    harness.close()


@pytest.mark.parametrize("raised", [SystemExit, GeneratorExit])
def test_a_secret_provider_ending_itself_fails_only_the_call(
    tmp_path: Path, raised: type[BaseException]
) -> None:
    """Defect: the broker keeps a provider's exceptions, but SystemExit or GeneratorExit from
    a provider (a vault client calling `sys.exit()`) escaped `invoke` with no record."""
    from toolkeeper.secrets.providers import CallableSecretProvider, SecretBroker

    def vault(name: str) -> str | None:
        raise raised(1)

    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(
            policies="permit(principal, action, resource);", include_defaults=False
        ),
        secrets=SecretBroker([CallableSecretProvider(vault)]),
    )

    @tool(side_effect="none", credentials=["VAULT_TOKEN"])
    def fetch() -> dict[str, Any]:
        """Fetch something."""
        return {}

    harness.register(fetch)
    envelope = harness.invoke_sync(Proposal("c1", "fetch", {}), principal=ALICE)
    assert envelope.status is Status.FAILED and envelope.error is not None
    assert envelope.error.category is ErrorCategory.UNAVAILABLE
    assert len(harness.ledger.query()) == 1
    harness.close()


@pytest.mark.parametrize(
    ("broken", "status", "effect_state", "runs"),
    [
        ("authorize", Status.FAILED, "none", 0),
        ("project", Status.EFFECT_UNKNOWN, "unknown", 1),
    ],
)
def test_a_stage_that_raises_still_ends_the_call_recorded(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    broken: str,
    status: Status,
    effect_state: str,
    runs: int,
) -> None:
    """Defect: an exception from a stage (a bug of ours, not a decision) escaped `invoke` as
    a traceback — through the gateway, JSON-RPC -32603 — and a write's intent stayed in
    flight until a restart recovered it. Now it is a categorized answer and a final row:
    before the effect, nothing ran; after it, the effect is unknown, never retryable."""
    from toolkeeper.runtime import pipeline

    def explode(*_: Any) -> Any:
        raise RuntimeError("a defect")

    explode.__name__ = broken
    monkeypatch.setattr(
        pipeline,
        "STAGES",
        tuple(explode if s.__name__ == broken else s for s in pipeline.STAGES),
    )
    harness = open_harness(tmp_path)
    effects: list[str] = []

    @tool(id="publish", version="1.0.0", side_effect="reversible", idempotency="natural")
    def publish(text: str) -> dict[str, str]:
        """Publish a text."""
        effects.append(text)
        return {"published": text}

    harness.register(publish)
    answer = harness.invoke_sync(Proposal("c1", "publish", {"text": "t"}), principal=ALICE)
    assert answer.status is status
    assert answer.error is not None and answer.error.retryable is False
    assert len(effects) == runs
    harness.flush()
    (row,) = harness.ledger.query()
    assert row.state is RecordState.COMPLETED and row.effect_state == effect_state
    harness.close()
