"""The calling client, as a running tool may reach it: governed and recorded.

An upstream MCP tool may report progress, log, and ask its client for input (elicitation),
a completion (sampling) or its roots (``roots/list``) while it runs. Behind the gateway
that client is the one that made the call, and nobody else. `GovernedPeer` wraps it for one
call: progress and log messages pass through, and each request is judged by policy first —
Cedar's ``Action::"elicit"``, ``Action::"sample"`` and ``Action::"roots"`` on the tool, for
the calling principal — and recorded on the call's trail (asked, refused with why, answered
with the user's action), so the ledger shows every time a tool reached past its arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolkeeper.policy.decision import Decision, PolicyEngine, PolicyRequest, decide_safely
from toolkeeper.runtime.context import ClientRequest, Peer

if TYPE_CHECKING:
    from toolkeeper.runtime.call import Call

_WHAT = {"elicit": "elicitation", "sample": "sampling", "roots": "roots"}


class InputRefused(Exception):
    """Raised by `Peer.ask` when the request may not (policy) or cannot (the client, its
    era) reach the client; `message` says which."""

    def __init__(self, message: str, *, request: ClientRequest) -> None:
        super().__init__(message)
        self.message = message
        self.request = request


@dataclass(frozen=True, slots=True)
class GovernedPeer:
    """`client` as one call's tool may reach it: requests judged by `policy`, everything
    recorded on the call's trail."""

    client: Peer
    policy: PolicyEngine
    call: Call

    def unable(self, request: ClientRequest) -> str | None:
        return self.client.unable(request)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self.client.progress(progress, total, message)

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        await self.client.log(level, data, logger)

    async def ask(self, request: ClientRequest, params: dict[str, Any]) -> dict[str, Any]:
        trail, what = self.call.trail, _WHAT[request]
        unable = self.client.unable(request)
        if unable is not None:
            trail.add("dispatch", f"{what}_refused", reason=unable)
            raise InputRefused(unable, request=request)
        entry, invocation = self.call.entry, self.call.request
        assert entry is not None and invocation is not None  # a running call has both
        decision = decide_safely(
            self.policy,
            PolicyRequest(
                principal=self.call.principal,
                contract=entry.contract,
                arguments=invocation.arguments,
                environment=self.call.environment,
                action=request,
            ),
        )
        policies = list(decision.policy_ids)
        if decision.decision is not Decision.ALLOW:
            reason = "; ".join(decision.reasons) or decision.decision.value
            trail.add("dispatch", f"{what}_refused", policies=policies, reason=reason)
            raise InputRefused(f"policy does not allow {what} here: {reason}", request=request)
        trail.add("dispatch", f"{what}_forwarded", policies=policies)
        try:
            answer = await self.client.ask(request, params)
        except InputRefused as refused:
            trail.add("dispatch", f"{what}_failed", reason=refused.message)
            raise
        trail.add("dispatch", f"{what}_answered", action=answer.get("action", "answered"))
        return answer
