"""The pipeline: the ten stages, in order. Every road to execution enters `run` — `invoke`,
`resume` (at normalize), `run_tool_calls`, the gateway's `tools/call` and
`toolkeeper.resume` — and this tuple is the only place the order is written.
"""

from __future__ import annotations

import anyio

from toolkeeper.runtime import stages
from toolkeeper.runtime.call import Call, Services, Stop
from toolkeeper.runtime.envelope import ResultEnvelope

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

STAGE_NAMES = (*(stage.__name__ for stage in PIPELINE), stages.record.__name__)
"""The ten stages in order, as each names itself in the ledger."""


async def run(services: Services, call: Call, *, start: str = "resolve") -> ResultEnvelope:
    """Run `call` from stage `start` to the end; a `Stop` skips to the record stage, and a
    cancelled caller still leaves the call's record."""
    name = "record"
    try:
        for stage in PIPELINE[STAGE_NAMES.index(start) :]:
            name = stage.__name__
            step = await stage(services, call)
            if isinstance(step, Stop):
                name = "record"
                return await stages.record(services, call, step)
            call = step
        name = "record"
        return await stages.record(services, call, None)
    except anyio.get_cancelled_exc_class():
        stages.record_cancelled(services, call, name)
        raise
