"""`run_tool_calls`: answer every tool call of one model turn through the harness.

The model may propose several calls in one turn. Reads commute, writes may not: consecutive
read-only calls run concurrently, and a call with side effects (or one whose contract is not
known, which counts as side-effecting) is a barrier that runs alone, after everything the
model listed before it and before everything after it. Answers keep the model's order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import anyio

from toolkeeper.contract.model import ToolContract
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.runtime.invocation import Principal, Proposal


class ToolRunner(Protocol):
    """What `run_tool_calls` needs of a `toolkeeper.runtime.harness.Harness`."""

    async def invoke(
        self, proposal: Proposal, *, principal: Principal, session: str | None = None
    ) -> ResultEnvelope: ...

    def lookup(
        self, proposal: Proposal, principal: Principal | None = None
    ) -> ToolContract | None: ...


async def run_turn(
    harness: ToolRunner,
    proposals: Sequence[Proposal],
    *,
    principal: Principal,
    session: str | None = None,
) -> list[ResultEnvelope]:
    """Invoke every proposal through the full pipeline; envelopes in proposal order."""
    envelopes: list[ResultEnvelope | None] = [None] * len(proposals)

    async def invoke(index: int) -> None:
        envelopes[index] = await harness.invoke(
            proposals[index], principal=principal, session=session
        )

    # Looked up in the caller's own view: another view can give a name to another tool.
    for batch in batches(proposals, lambda proposal: harness.lookup(proposal, principal)):
        if len(batch) == 1:
            await invoke(batch[0])
            continue
        async with anyio.create_task_group() as group:
            for index in batch:
                group.start_soon(invoke, index)
    return [envelope for envelope in envelopes if envelope is not None]


def batches(
    proposals: Sequence[Proposal], lookup: Callable[[Proposal], ToolContract | None]
) -> list[list[int]]:
    """Indexes of `proposals` grouped into runs: read-only neighbours together, any other
    call alone."""
    groups: list[list[int]] = []
    reading = False
    for index, proposal in enumerate(proposals):
        contract = lookup(proposal)
        read_only = contract is not None and contract.is_read_only
        if read_only and reading:
            groups[-1].append(index)
        else:
            groups.append([index])
        reading = read_only
    return groups
