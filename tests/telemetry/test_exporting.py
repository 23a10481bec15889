"""The ``[telemetry]`` settings: a Prometheus endpoint that serves the call metrics, OTLP
export to a collector, and clear errors when the address is wrong or the SDK is missing."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from telemetry_support import ALICE

from toolkeeper import Proposal
from toolkeeper.errors import ConfigError
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.runtime.harness import Harness
from toolkeeper.telemetry.exporting import TelemetryConfig, exporting


def test_the_prometheus_endpoint_serves_the_call_metrics(harness: Harness) -> None:
    settings = TelemetryConfig(prometheus="127.0.0.1:0")
    with exporting(settings, service="telemetry-test") as exporters:
        assert exporters.metrics_url is not None
        harness.invoke_sync(Proposal("c", "lookup", {"item": "a"}), principal=ALICE)
        harness.invoke_sync(Proposal("c", "broken", {"item": "a"}), principal=ALICE)
        response = httpx.get(exporters.metrics_url)
    assert response.status_code == 200
    text = response.text
    assert "# TYPE toolkeeper_call_duration_seconds histogram" in text
    assert _sample(text, "toolkeeper_calls_total", 'toolkeeper_status="succeeded"') == 1.0
    failed = _sample(text, "toolkeeper_calls_total", 'error_type="unavailable"')
    assert failed == 1.0
    assert 'service_name="telemetry-test"' in text
    with pytest.raises(httpx.TransportError):  # the listener stopped with the gateway
        httpx.get(exporters.metrics_url)


def _sample(text: str, metric: str, label: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(metric + "{") and label in line:
            return float(line.rsplit(" ", 1)[1])
    return None


class _Collector(BaseHTTPRequestHandler):
    received: dict[str, list[bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def otlp_collector() -> Iterator[tuple[str, dict[str, list[bytes]]]]:
    """An OTLP/HTTP receiver: yields its endpoint and the bodies posted, by path."""
    received: dict[str, list[bytes]] = {}
    handler = type("Collector", (_Collector,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def test_otlp_sends_spans_and_metrics_to_the_collector(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    with otlp_collector() as (endpoint, received):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        with exporting(TelemetryConfig(otlp=True), service="telemetry-test"):
            harness.invoke_sync(Proposal("c-1", "lookup", {"item": "a"}), principal=ALICE)
        # Leaving flushes both.
        traces = [ExportTraceServiceRequest.FromString(b) for b in received["/v1/traces"]]
        metrics = [ExportMetricsServiceRequest.FromString(b) for b in received["/v1/metrics"]]
    spans = [
        span
        for request in traces
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    assert "execute_tool lookup" in {span.name for span in spans}
    names = {
        metric.name
        for request in metrics
        for resource in request.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert {"toolkeeper.calls", "toolkeeper.call.duration"} <= names


def test_nothing_is_started_without_settings() -> None:
    with exporting(TelemetryConfig(), service="t") as exporters:
        assert exporters == type(exporters)(None, None, None)


@pytest.mark.parametrize("address", ["9464", "localhost:http", "127.0.0.1:70000"])
def test_a_bad_prometheus_address_names_the_key(tmp_path: Path, address: str) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(f'[telemetry]\nprometheus = "{address}"\n')
    with pytest.raises(ConfigError, match=r"telemetry\.prometheus") as caught:
        load_config(config)
    assert "HOST:PORT" in str(caught.value)


def test_a_busy_prometheus_port_is_a_config_error(harness: Harness) -> None:
    with exporting(TelemetryConfig(prometheus="127.0.0.1:0"), service="t") as first:
        assert first.metrics_url is not None
        busy = first.metrics_url.split("//")[1].split("/")[0]
        with (
            pytest.raises(ConfigError, match="cannot listen there"),
            exporting(TelemetryConfig(prometheus=busy), service="t"),
        ):
            pass


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.metrics", None)
    with (
        pytest.raises(ConfigError, match=r"pip install 'toolkeeper\[otel\]'"),
        exporting(TelemetryConfig(prometheus="127.0.0.1:0"), service="t"),
    ):
        pass
