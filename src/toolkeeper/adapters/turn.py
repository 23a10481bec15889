"""`run_tool_calls`: answer every tool call of one model turn through the harness.

`ToolTurn` is that turn kept whole — its proposals, envelopes and the vendor messages that
answer them — so a call that waited for a human can be resumed and the turn answered with
its real outcome.

The model may propose several calls in one turn. Reads commute, writes may not: consecutive
read-only calls run concurrently, and a call with side effects (or one whose contract is not
known, which counts as side-effecting) is a barrier that runs alone, after everything the
model listed before it and before everything after it. Answers keep the model's order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from toolkeeper.contract.model import ToolContract
from toolkeeper.runtime.envelope import ResultEnvelope, Status
from toolkeeper.runtime.invocation import Principal, Proposal

if TYPE_CHECKING:
    from toolkeeper.runtime.harness import Harness


class ToolRunner(Protocol):
    """What `run_tool_calls` needs of a `toolkeeper.runtime.harness.Harness`."""

    async def invoke(
        self, proposal: Proposal, *, principal: Principal, session: str | None = None
    ) -> ResultEnvelope: ...

    def lookup(
        self, proposal: Proposal, principal: Principal | None = None
    ) -> ToolContract | None: ...


@dataclass(frozen=True)
class ToolTurn:
    """The tool calls of one model turn with their outcomes, in the model's order.

    `messages` is what to append to the conversation; `pending` names the approvals the turn
    waits on. Every vendor wants all calls of a turn answered before the next request, so a
    turn is answered whole: after a human decides, `resume` gives the same turn with the
    decided calls' final outcomes, and its `messages` answer the model with them.
    """

    vendor: str
    """The vendor format the turn came in and is answered in (a key of `VENDORS`)."""
    proposals: tuple[Proposal, ...]
    envelopes: tuple[ResultEnvelope, ...]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The vendor messages (or items) answering every call, correlated by call id; empty
        when the model called no tool."""
        from toolkeeper.adapters import answer  # the vendor table imports this module

        return answer(list(zip(self.proposals, self.envelopes, strict=True)), vendor=self.vendor)

    @property
    def pending(self) -> tuple[str, ...]:
        """The approval ids of the calls waiting for a human, in call order."""
        return tuple(
            approval_id for envelope in self.envelopes if (approval_id := _waiting_on(envelope))
        )

    async def resume(self, harness: Harness, *, principal: Principal) -> ToolTurn:
        """This turn with every waiting call resumed through `harness.resume` (which
        re-checks everything the approval was bound to). A call whose approval is still
        undecided stays `pending_approval`; a denied one answers `approval_denied`."""
        envelopes = list(self.envelopes)
        for index, envelope in enumerate(envelopes):
            if approval_id := _waiting_on(envelope):
                envelopes[index] = await harness.resume(approval_id, principal=principal)
        return replace(self, envelopes=tuple(envelopes))


def _waiting_on(envelope: ResultEnvelope) -> str | None:
    """The approval `envelope` waits for, if it waits for one."""
    meta = envelope.execution_meta
    if envelope.status is not Status.PENDING_APPROVAL or meta is None:
        return None
    return meta.approval_id


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
