"""Fixtures of the telemetry tests: toolkeeper's spans and metrics sent to the SDK's in-memory
exporter and reader for one test (`use_providers`), and a fresh harness."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from telemetry_support import Telemetry, make_harness

from toolkeeper.runtime.harness import Harness
from toolkeeper.telemetry import use_providers


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    use_providers(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        yield Telemetry(spans, reader, tracer_provider)
    finally:
        use_providers()
        tracer_provider.shutdown()
        meter_provider.shutdown()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    harness = make_harness(tmp_path / "tk")
    yield harness
    harness.close()
