"""The call metrics: duration, calls by tool, status and category, retries and fallbacks —
with attributes from a small set, read back from the SDK's in-memory reader."""

from __future__ import annotations

from telemetry_support import ALICE, Telemetry

from toolkeeper import Proposal, Status
from toolkeeper.runtime.harness import Harness


def counts(telemetry: Telemetry, metric: str) -> dict[frozenset[tuple[str, object]], int]:
    return {frozenset(point.attributes.items()): point.value for point in telemetry.points(metric)}


def test_calls_are_counted_by_tool_status_and_category(
    harness: Harness, telemetry: Telemetry
) -> None:
    for arguments in ({"item": "a"}, {"item": "b"}, {"item": 3}):
        harness.invoke_sync(Proposal("c", "lookup", arguments), principal=ALICE)
    harness.invoke_sync(Proposal("c", "broken", {"item": "a"}), principal=ALICE)
    harness.invoke_sync(Proposal("c", "invented", {}), principal=ALICE)
    tool, status, error = "toolkeeper.tool", "toolkeeper.status", "error.type"
    assert counts(telemetry, "toolkeeper.calls") == {
        frozenset({(tool, "lookup"), (status, "succeeded")}): 2,
        frozenset({(tool, "lookup"), (status, "rejected"), (error, "invalid_argument")}): 1,
        frozenset({(tool, "broken"), (status, "failed"), (error, "unavailable")}): 1,
        # An invented name is not a series of its own.
        frozenset({(tool, "_OTHER"), (status, "rejected"), (error, "unknown_tool")}): 1,
    }


def test_duration_is_a_histogram_in_seconds(harness: Harness, telemetry: Telemetry) -> None:
    envelope = harness.invoke_sync(Proposal("c", "lookup", {"item": "a"}), principal=ALICE)
    [point] = telemetry.points("toolkeeper.call.duration")
    assert point.count == 1
    assert dict(point.attributes) == {"toolkeeper.tool": "lookup", "toolkeeper.status": "succeeded"}
    # Seconds: the envelope's latency (milliseconds, measured inside) is within it.
    assert 0 < point.sum < 60
    assert point.sum * 1000 >= envelope.execution_meta.latency_ms
    # Buckets fit calls of a fraction of a millisecond, not only of seconds.
    assert point.explicit_bounds[0] < 0.001


def test_retries_count_the_attempts_after_the_first(harness: Harness, telemetry: Telemetry) -> None:
    envelope = harness.invoke_sync(Proposal("c", "flaky", {"item": "a"}), principal=ALICE)
    assert envelope.status is Status.SUCCEEDED and envelope.execution_meta.attempt == 3
    assert counts(telemetry, "toolkeeper.call.retries") == {
        frozenset({("toolkeeper.tool", "flaky")}): 2
    }


def test_an_idempotent_replay_is_counted_as_a_fallback(
    harness: Harness, telemetry: Telemetry
) -> None:
    proposal = Proposal("c", "set_item", {"item": "a", "value": 1}, idempotency_key="k-1")
    pending = harness.invoke_sync(proposal, principal=ALICE)
    harness.approvals.decide(pending.execution_meta.approval_id, "approve", by="editor")
    harness.resume_sync(pending.execution_meta.approval_id, principal=ALICE)
    assert counts(telemetry, "toolkeeper.call.fallbacks") == {}
    replay = harness.invoke_sync(proposal, principal=ALICE)
    assert replay.execution_meta.replay_of == pending.execution_meta.request_id
    assert counts(telemetry, "toolkeeper.call.fallbacks") == {
        frozenset({("toolkeeper.tool", "set_item"), ("toolkeeper.fallback", "replay")}): 1
    }
