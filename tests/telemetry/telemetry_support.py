"""What the telemetry tests share: the spans and metrics one test exported, and a harness with
a read, a failing read, a flaky read and a write that needs approval."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolkeeper import Principal, ToolFailure, tool
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice", "acme", frozenset({"items"}))

POLICY = """
@id("t.reads") permit(principal, action, resource) when { resource.side_effect == "none" };
@id("t.writes") @approval("required")
permit(principal, action, resource) when { resource.side_effect != "none" };
"""


@dataclass
class Telemetry:
    """The spans and metrics toolkeeper exported during one test."""

    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self, metric: str) -> list[Any]:
        """Every data point of `metric` collected so far."""
        data = self.reader.get_metrics_data()
        return [
            point
            for resource in (data.resource_metrics if data else ())
            for scope in resource.scope_metrics
            for found in scope.metrics
            if found.name == metric
            for point in found.data.data_points
        ]

    def all_points(self) -> list[Any]:
        data = self.reader.get_metrics_data()
        return [
            point
            for resource in (data.resource_metrics if data else ())
            for scope in resource.scope_metrics
            for found in scope.metrics
            for point in found.data.data_points
        ]


def make_harness(home: Path) -> Harness:
    harness = Harness(home=home, policy=CedarPolicyEngine(policies=POLICY, include_defaults=False))

    @tool(side_effect="none")
    def lookup(item: str) -> dict[str, Any]:
        """Read one item."""
        return {"item": item, "value": len(item)}

    @tool(side_effect="none")
    def broken(item: str) -> dict[str, Any]:
        """A read whose backend is down; its message quotes the argument."""
        raise ToolFailure(f"no backend for {item}", category="unavailable")

    attempts: list[int] = []

    @tool(side_effect="none", retry={"max_attempts": 3, "backoff_initial": 0.0})
    def flaky(item: str) -> dict[str, Any]:
        """A read that fails twice, retryably, then answers."""
        attempts.append(1)
        if len(attempts) % 3:
            raise ToolFailure("try again", category="unavailable", retryable=True)
        return {"item": item}

    @tool(version="1.0.0", side_effect="committing", idempotency="keyed")
    def set_item(item: str, value: int) -> dict[str, Any]:
        """Set one item's value."""
        return {"item": item, "value": value}

    for function in (lookup, broken, flaky, set_item):
        harness.register(function)
    return harness
