"""OpenTelemetry spans and metrics, and the per-call log line (docs/observability.md).

The core install needs only ``opentelemetry-api``: toolkeeper's spans and metrics go to the
process's global providers, which are no-ops until an SDK is installed. The ``otel`` extra
adds the SDK with the OTLP and Prometheus exporters the gateway's ``[telemetry]`` settings
use (`toolkeeper.telemetry.exporting`).
"""

from toolkeeper.telemetry.calls import CALL_LOG, use_providers

__all__ = ["CALL_LOG", "use_providers"]
