"""The gateway's ``[telemetry]`` settings and the exporters they start: spans and metrics
over OTLP, metrics for Prometheus to scrape.

    [telemetry]
    otlp = true                      # endpoint, headers, protocol: OTEL_EXPORTER_OTLP_*
    prometheus = "127.0.0.1:9464"    # serve GET /metrics on this address

This module imports without the OpenTelemetry SDK; `exporting` needs it (the ``otel`` extra)
and says so when it is missing. The Prometheus endpoint is a listener of its own, not a route
of the MCP app: it serves a stdio gateway too, and sits outside the bearer authentication a
scraper would otherwise need a principal for. Bind it to a loopback or an internal address:
it is not authenticated (it shows tool ids and call counts, never principals or arguments).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolkeeper.errors import ConfigError
from toolkeeper.telemetry.calls import use_providers

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

logger = logging.getLogger(__name__)


class TelemetryConfig(BaseModel):
    """Where a gateway sends its spans and metrics. Unset, nowhere: the OpenTelemetry API
    stays a no-op unless the process installs an SDK itself (``opentelemetry-instrument``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    otlp: bool = Field(
        default=False,
        description="Export spans and metrics over OTLP, configured by the standard "
        "OTEL_EXPORTER_OTLP_* environment variables (endpoint, headers, protocol).",
    )
    prometheus: str | None = Field(
        default=None,
        description="HOST:PORT to serve Prometheus metrics on, at /metrics (port 0: any free "
        "port, logged at start).",
    )

    @field_validator("prometheus")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None:
            host_and_port(value)
        return value

    @property
    def enabled(self) -> bool:
        return self.otlp or self.prometheus is not None


def host_and_port(text: str) -> tuple[str, int]:
    """`HOST:PORT` (an IPv6 host in brackets: ``[::1]:9464``); ValueError otherwise."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not HOST:PORT; write e.g. '127.0.0.1:9464'")
    return host.strip("[]"), int(port)


@dataclass(frozen=True, slots=True)
class Exporters:
    """What `exporting` started: the SDK providers (None when nothing uses them) and the URL
    Prometheus scrapes (None without the endpoint)."""

    tracer_provider: TracerProvider | None
    meter_provider: MeterProvider | None
    metrics_url: str | None


@contextmanager
def exporting(
    settings: TelemetryConfig, *, service: str, process_wide: bool = False
) -> Iterator[Exporters]:
    """Start what `settings` asks for and send toolkeeper's spans and metrics there until
    exit, when the exporters flush and stop. `service` is the ``service.name`` unless
    OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name one.

    `process_wide` also installs the providers as OpenTelemetry's global ones, so that the
    spans of other instrumented libraries (the MCP SDK's own ``tools/call`` server span, its
    upstream client spans) join the same traces; a process can do that once, so only the
    process's owner (``toolkeeper serve``) should ask for it.
    """
    if not settings.enabled:
        yield Exporters(None, None, None)
        return
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"[telemetry] needs the OpenTelemetry SDK ({exc.name!r} is missing): "
            "pip install 'toolkeeper[otel]'",
            key="telemetry",
        ) from exc
    resource = _resource(Resource, service)
    with ExitStack() as stack:
        readers: list[MetricReader] = []
        metrics_url = None
        if settings.prometheus is not None:
            reader, metrics_url = stack.enter_context(_prometheus(settings.prometheus))
            readers.append(reader)
        tracer_provider = None
        if settings.otlp:
            span_exporter, metric_exporter = _otlp_exporters()
            readers.append(PeriodicExportingMetricReader(metric_exporter))
            tracer_provider = TracerProvider(resource=resource)
            tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
            stack.callback(tracer_provider.shutdown)
        meter_provider = MeterProvider(metric_readers=readers, resource=resource)
        stack.callback(meter_provider.shutdown)
        if process_wide:
            metrics.set_meter_provider(meter_provider)
            if tracer_provider is not None:
                trace.set_tracer_provider(tracer_provider)
        use_providers(tracer_provider=tracer_provider, meter_provider=meter_provider)
        stack.callback(use_providers)
        if settings.otlp:
            logger.info(
                "exporting spans and metrics over OTLP (%s) to %s",
                _otlp_protocol(),
                os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "the default endpoint"),
            )
        if metrics_url is not None:
            logger.info("serving Prometheus metrics on %s", metrics_url)
        yield Exporters(tracer_provider, meter_provider, metrics_url)


def _resource(resource_class: Any, service: str) -> Any:
    """The SDK's resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME, its defaults), named
    `service` when the environment names no service."""
    detected = resource_class.create()
    if str(detected.attributes.get("service.name", "")).startswith("unknown_service"):
        return detected.merge(resource_class({"service.name": service}))
    return detected


def _otlp_protocol() -> str:
    return (
        os.environ.get(
            "OTEL_EXPORTER_OTLP_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "")
        )
        or "http/protobuf"
    )


def _otlp_exporters() -> tuple[Any, Any]:
    """The OTLP span and metric exporters for the configured protocol (the specification's
    default, http/protobuf, or grpc)."""
    protocol = _otlp_protocol()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    elif protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
            OTLPMetricExporter,
        )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
            OTLPSpanExporter,
        )
    else:
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL is {protocol!r}; toolkeeper exports over "
            "'http/protobuf' (the default) or 'grpc'",
            key="OTEL_EXPORTER_OTLP_PROTOCOL",
            value=protocol,
        )
    return OTLPSpanExporter(), OTLPMetricExporter()


@contextmanager
def _prometheus(address: str) -> Iterator[tuple[Any, str]]:
    """A Prometheus reader and its /metrics listener on `address`, with a registry of its
    own (the client library's global one would refuse a second gateway in one process)."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import CollectorRegistry, start_http_server

    host, port = host_and_port(address)
    registry = CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(registry=registry)
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError(
            f"[telemetry] prometheus = {address!r}: cannot listen there ({exc.strerror}); "
            "pick another address (port 0 picks a free one)",
            key="telemetry.prometheus",
            value=address,
        ) from None
    url_host = f"[{host}]" if ":" in host else host
    try:
        yield reader, f"http://{url_host}:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
