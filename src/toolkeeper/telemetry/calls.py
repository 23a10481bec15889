"""What an operator sees of each call: its span, one child span per stage, the call metrics
and one log line — all emitted by `pipeline.run`, the one road every call takes.

The span follows the OpenTelemetry GenAI semantic conventions for tool execution: named
``execute_tool {gen_ai.tool.name}``, kind INTERNAL, with ``gen_ai.operation.name``,
``gen_ai.tool.name`` (the name the model called), ``gen_ai.tool.call.id``,
``gen_ai.tool.type`` and, when the call did not succeed, ``error.type`` (the envelope's error
category). toolkeeper's own facts are under ``toolkeeper.*``. docs/observability.md lists them
all, with the metrics and the log line.

Only identifiers, names, statuses and categories leave here — never argument values, results
or error messages (which may quote an argument) — and every string passes the harness's
redactor first, because call ids and tool names come from the model and principal ids from
the caller.

Only the OpenTelemetry *API* is used: without an SDK its no-op tracer answers with a span that
does not record, and then no stage span is started and no attribute is built, so an
uninstrumented process pays for one no-op span and four no-op instrument calls per call.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from toolkeeper.runtime.envelope import ResultEnvelope

if TYPE_CHECKING:
    from toolkeeper.runtime.call import Call, Services

Stage = Callable[..., Awaitable[Any]]
"""A pipeline stage, as `traced` sees it: awaited with the stage's own arguments."""

CALL_LOG = logging.getLogger("toolkeeper.calls")
"""One INFO line per call (docs/observability.md, "Logs")."""

SCOPE = "toolkeeper"
"""The instrumentation scope of toolkeeper's spans and metrics."""

DURATION_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0,
)  # fmt: skip
"""Seconds. A governed in-process read takes a fraction of a millisecond and an upstream call
or a slow tool up to minutes; the SDK's default buckets (0–10 000, made for milliseconds)
would put nearly every call in the first one."""

OTHER_TOOL = "_OTHER"
"""The metrics' tool for a name that resolved to no tool: a model can invent names without
end, and each would be a new time series."""


@dataclass(frozen=True, slots=True)
class Instruments:
    """The tracer and the four call metrics, from one tracer and one meter provider."""

    tracer: trace.Tracer
    duration: metrics.Histogram
    calls: metrics.Counter
    retries: metrics.Counter
    fallbacks: metrics.Counter


def instruments(
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> Instruments:
    """toolkeeper's instruments from these providers (None: the global ones, which follow
    whatever SDK the process installs later)."""
    meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
    return Instruments(
        tracer=trace.get_tracer(SCOPE, tracer_provider=tracer_provider),
        duration=meter.create_histogram(
            "toolkeeper.call.duration",
            unit="s",
            description="Time from a proposal entering the pipeline to its envelope.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        ),
        calls=meter.create_counter(
            "toolkeeper.calls", unit="{call}", description="Calls by tool, status and category."
        ),
        retries=meter.create_counter(
            "toolkeeper.call.retries",
            unit="{retry}",
            description="Executor attempts after the first (retryable errors, retried safely).",
        ),
        fallbacks=meter.create_counter(
            "toolkeeper.call.fallbacks",
            unit="{call}",
            description="Calls answered by a fallback path: an idempotent replay, or a ledger "
            "row queued because the database refused it.",
        ),
    )


_current = instruments()


def use_providers(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> None:
    """Send toolkeeper's spans and metrics to these providers; None (the default) is the
    global provider of each, so `use_providers()` undoes an earlier call.

    Not needed when the process installs an SDK globally (``trace.set_tracer_provider``,
    ``opentelemetry-instrument``): toolkeeper follows the global providers by default. This is
    for a process that keeps separate providers (tests with in-memory exporters).
    """
    global _current
    _current = instruments(tracer_provider, meter_provider)


def observe(services: Services, call: Call) -> CallObservation:
    """Start observing `call`: its span opens now, as a child of the caller's current span."""
    return CallObservation(services, call, _current)


class CallObservation:
    """The span of one call in flight; `traced` wraps its stages, and exactly one of
    `finished`, `cancelled` or `raised` ends it, with the metrics and the log line."""

    __slots__ = ("_call", "_instruments", "_parent", "_services", "span")

    def __init__(self, services: Services, call: Call, instruments: Instruments) -> None:
        self._services = services
        self._call = call
        self._instruments = instruments
        self.span = instruments.tracer.start_span("execute_tool", kind=SpanKind.INTERNAL)
        self._parent: otel_context.Context | None = None
        if self.span.is_recording():
            self._parent = trace.set_span_in_context(self.span)

    def traced(self, steps: tuple[Stage, ...]) -> tuple[Stage, ...]:
        """`steps` (the stages about to run), each wrapped to run in a child span named for
        it and current while it runs, so a tool's own spans nest under dispatch's. When the
        call's span does not record, `steps` themselves: no wrapper, nothing per stage."""
        parent = self._parent
        if parent is None:
            return steps
        tracer = self._instruments.tracer
        return tuple(_in_stage_span(tracer, parent, stage) for stage in steps)

    def finished(self, envelope: ResultEnvelope) -> None:
        """The call ended with `envelope`."""
        status, error, meta = envelope.status.value, envelope.error, envelope.execution_meta
        # A pending approval carries the category approval_required, but it is no failure.
        failed = error is not None and status != "pending_approval"
        error_type = error.category.value if failed and error is not None else None
        if meta is None:
            self._end(Ending(status, error_type))
            return
        fallback = "replay" if meta.replay_of else None
        if fallback is None and meta.record_pending:
            fallback = "record_pending"
        self._end(Ending(status, error_type, meta.effect_state.value, meta.approval_id, fallback))

    def cancelled(self) -> None:
        """The caller was cancelled; the pipeline recorded the call as cancelled."""
        self._end(Ending("cancelled", "cancelled"))

    def raised(self, exc: BaseException) -> None:
        """A stage raised instead of answering (a bug): the caller gets the exception."""
        self._end(Ending("raised", type(exc).__qualname__))

    def _end(self, ending: Ending) -> None:
        seconds = time.perf_counter() - self._call.started
        self._count(ending, seconds)
        span = self.span
        if span.is_recording():
            self._describe(ending)
        span.end()
        if CALL_LOG.isEnabledFor(logging.INFO):
            self._log(ending, seconds * 1000)

    def _count(self, ending: Ending, seconds: float) -> None:
        """The metrics, labelled by contract id (bounded by the catalog), never by the name a
        model sent."""
        entry = self._call.entry
        tool = self._services.redactor.redact_text(entry.contract.id) if entry else OTHER_TOOL
        labels: dict[str, Any] = {"toolkeeper.tool": tool, "toolkeeper.status": ending.status}
        if ending.error_type is not None:
            labels["error.type"] = ending.error_type
        instruments = self._instruments
        instruments.duration.record(seconds, labels)
        instruments.calls.add(1, labels)
        attempts = self._call.attempts
        if attempts > 1:
            instruments.retries.add(attempts - 1, {"toolkeeper.tool": tool})
        if ending.fallback is not None:
            fallback = {"toolkeeper.tool": tool, "toolkeeper.fallback": ending.fallback}
            instruments.fallbacks.add(1, fallback)

    def _describe(self, ending: Ending) -> None:
        """The call span's name, attributes and status, as the call ended."""
        call, span, redact = self._call, self.span, self._services.redactor.redact_text

        def text(value: str) -> str:
            # OTLP encodes text as UTF-8 and drops (with a traceback) an attribute holding a
            # lone surrogate, which a model can send in a JSON string.
            value = redact(value)
            return value if value.isascii() else _utf8(value)

        name = text(call.proposal.tool)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": text(call.proposal.call_id),
            "toolkeeper.request.id": call.request_id,
            "toolkeeper.status": ending.status,
            "toolkeeper.principal.id": text(call.principal.id),
            "toolkeeper.principal.tenant": text(call.principal.tenant),
            "toolkeeper.attempts": call.attempts,
        }
        entry = call.entry
        if entry is not None:
            # Only a resolved name is a bounded span name; an unknown one stays bare.
            span.update_name(f"execute_tool {name}")
            attributes["toolkeeper.contract.ref"] = text(entry.ref)
            attributes["gen_ai.tool.type"] = _tool_type(entry.executor)
        optional = {
            "error.type": ending.error_type,
            "toolkeeper.effect_state": ending.effect_state,
            "toolkeeper.approval.id": ending.approval_id,
            "toolkeeper.fallback": ending.fallback,
            "toolkeeper.parent_request.id": call.parent_request_id,
        }
        attributes.update({k: text(v) for k, v in optional.items() if v is not None})
        span.set_attributes(attributes)
        if ending.error_type is not None:
            # The category only: an error's message may quote an argument value.
            span.set_status(Status(StatusCode.ERROR, ending.error_type))

    def _log(self, ending: Ending, ms: float) -> None:
        call, redact = self._call, self._services.redactor.redact_text
        tool = call.entry.ref if call.entry is not None else call.proposal.tool
        fields = {
            "request": call.request_id,
            "call_id": redact(call.proposal.call_id),
            "principal": redact(f"{call.principal.tenant}/{call.principal.id}"),
            "tool": redact(tool),
            "status": ending.status,
        }
        if ending.error_type is not None:
            fields["category"] = ending.error_type
        line = " ".join(f"{key}={logfmt(value)}" for key, value in fields.items())
        CALL_LOG.info("%s ms=%.1f", line, ms, extra={"toolkeeper": {**fields, "ms": round(ms, 3)}})


class Ending(NamedTuple):
    """How a call ended, as telemetry reports it."""

    status: str
    """The envelope's status; ``cancelled`` or ``raised`` (a stage raised: a bug)."""
    error_type: str | None
    """The error category of a call that did not succeed (none for a pending approval), or
    the exception's type for one that raised."""
    effect_state: str | None = None
    approval_id: str | None = None
    fallback: str | None = None
    """``replay`` (an earlier call's recorded outcome answered) or ``record_pending`` (the
    ledger refused the row and queued it)."""


def _utf8(value: str) -> str:
    """`value` with every lone surrogate written as its escape, so it encodes as UTF-8."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _tool_type(executor: object) -> str:
    """GenAI's tool type: ``function`` for a function run in this process, ``extension``
    for a tool another server runs (an upstream MCP server)."""
    return "function" if getattr(executor, "source", "in_process") == "in_process" else "extension"


_BARE = re.compile(r'[^\s"=\\]+')


def logfmt(value: str) -> str:
    """`value` as a logfmt value: bare when it is plain text, else a JSON string, so a name
    with spaces, quotes or control characters can neither split nor forge a field."""
    if _BARE.fullmatch(value) and value.isprintable():
        return value
    return json.dumps(value)


def _in_stage_span(tracer: trace.Tracer, parent: otel_context.Context, stage: Stage) -> Stage:
    @functools.wraps(stage)
    async def in_span(*args: Any) -> Any:
        span = tracer.start_span(stage.__name__, context=parent)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        try:
            return await stage(*args)
        except BaseException as exc:
            # The exception's type only: its message may hold an argument value.
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise
        finally:
            otel_context.detach(token)
            span.end()

    return in_span
