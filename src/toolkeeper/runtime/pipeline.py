"""The pipeline: the ten stages, in order. Every road to execution enters `run` — `invoke`,
`resume` (at normalize), `run_tool_calls`, the gateway's `tools/call` and
`toolkeeper.resume` — and this tuple is the only place the order is written.

`run` is also where every call is observed (`toolkeeper.telemetry.calls`): a span per call
and per stage, the call metrics and one log line, whichever way the call ends.
"""

from __future__ import annotations

import anyio

from toolkeeper.runtime import stages
from toolkeeper.runtime.call import Call, Services, Stop
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.telemetry.calls import observe

PIPELINE = (
    stages.resolve,
    stages.validate,
    stages.normalize,
    stages.authorize,
    stages.approve,
    stages.bind_credentials,
    stages.dispatch,
    stages.check,
    stages.project,
)
"""Stages 1–9; stage 10, `stages.record`, ends every call, however far it got."""

STAGES = (*PIPELINE, stages.record)
"""All ten, in order."""

STAGE_NAMES = tuple(stage.__name__ for stage in STAGES)
"""The ten stages in order, as each names itself in the ledger."""


async def run(services: Services, call: Call, *, start: str = "resolve") -> ResultEnvelope:
    """Run `call` from stage `start` to the end; a `Stop` skips to the record stage, and a
    cancelled caller still leaves the call's record."""
    observed = observe(services, call)
    *steps, record = observed.traced(STAGES[STAGE_NAMES.index(start) :])
    name = "record"
    try:
        stop = None
        for stage in steps:
            name = stage.__name__
            try:
                step = await stage(services, call)
            except Exception as exc:  # a defect, not a decision: the call still ends recorded
                step = stages.fault(services, call, name, exc)
            if isinstance(step, Stop):
                stop = step
                break
            call = step
        name = "record"
        envelope = await record(services, call, stop)
    except anyio.get_cancelled_exc_class():
        stages.record_cancelled(services, call, name)
        observed.cancelled()
        raise
    except BaseException as exc:
        observed.raised(exc)
        raise
    observed.finished(envelope)
    return envelope
