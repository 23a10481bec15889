"""Vendor adapters: contracts out as each vendor's tool definitions, the vendor's tool calls
in as `Proposal`s, and `ResultEnvelope`s back as the vendor's tool-result messages.

Each vendor is one module exposing ``render``, ``render_with_report``, ``parse`` and
``answer``; `VENDORS` names them. Nothing here executes anything: `run_tool_calls` hands
every proposal to the harness, whose pipeline is the one road to execution.

    tools = adapters.render(harness.visible_contracts(me), vendor="anthropic")
    response = client.messages.create(..., tools=tools)
    messages += await adapters.run_tool_calls(harness, response, vendor="anthropic",
                                              principal=me)

`run_tool_turn` answers the same way and keeps the turn (`ToolTurn`): its envelopes, the
approvals it waits on, and `resume` to answer the model with a decided call's outcome.

Render from the same contracts the harness resolves against (the principal's visible
contracts): vendor names are a function of that set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType, ModuleType
from typing import Any

from toolkeeper.adapters import anthropic, gemini, mcp, openai_chat, openai_responses
from toolkeeper.adapters.report import IssueKind, RenderIssue, RenderReport
from toolkeeper.adapters.turn import ToolRunner, ToolTurn, batches, run_turn
from toolkeeper.contract.model import ToolContract
from toolkeeper.errors import ConfigError
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.runtime.invocation import Principal, Proposal

VENDORS: Mapping[str, ModuleType] = MappingProxyType(
    {
        "openai_chat": openai_chat,
        "openai_responses": openai_responses,
        "anthropic": anthropic,
        "gemini": gemini,
        "mcp": mcp,
    }
)
"""Vendor format name -> adapter module."""


def adapter(vendor: str) -> ModuleType:
    """The adapter module for `vendor`; a `ConfigError` naming the choices otherwise."""
    try:
        return VENDORS[vendor]
    except KeyError:
        raise ConfigError(
            f"unknown vendor {vendor!r}; use one of {', '.join(VENDORS)}",
            key="vendor",
            value=vendor,
        ) from None


def render(
    contracts: Sequence[ToolContract], *, vendor: str, **options: Any
) -> list[dict[str, Any]]:
    """`vendor`'s tool definitions for `contracts` (options as the vendor module takes)."""
    tools: list[dict[str, Any]] = adapter(vendor).render(contracts, **options)
    return tools


def render_with_report(
    contracts: Sequence[ToolContract], *, vendor: str, **options: Any
) -> tuple[list[dict[str, Any]], RenderReport]:
    """`render`, plus what the vendor's format could not keep."""
    rendered: tuple[list[dict[str, Any]], RenderReport] = adapter(vendor).render_with_report(
        contracts, **options
    )
    return rendered


def parse(response: Any, *, vendor: str, **options: Any) -> list[Proposal]:
    """The tool calls of one model turn as proposals: zero, one or many. Never raises over
    what the model wrote; the pipeline answers bad names and bad arguments."""
    proposals: list[Proposal] = adapter(vendor).parse(response, **options)
    return proposals


def answer(
    results: Sequence[tuple[Proposal, ResultEnvelope]], *, vendor: str, **options: Any
) -> list[dict[str, Any]]:
    """The messages (or items) to append to the conversation, correlated by call id."""
    messages: list[dict[str, Any]] = adapter(vendor).answer(results, **options)
    return messages


async def run_tool_calls(
    harness: ToolRunner,
    response: Any,
    *,
    vendor: str,
    principal: Principal,
    session: str | None = None,
    **parse_options: Any,
) -> list[dict[str, Any]]:
    """Parse `response`, invoke each call through `harness`, and answer them all.

    Consecutive read-only calls run concurrently; any other call runs alone, in the order
    the model gave (see `toolkeeper.adapters.turn`). Returns the messages to append; an
    empty list when the model called no tool. `run_tool_turn` keeps the envelopes too.
    """
    turn = await run_tool_turn(
        harness, response, vendor=vendor, principal=principal, session=session, **parse_options
    )
    return turn.messages


async def run_tool_turn(
    harness: ToolRunner,
    response: Any,
    *,
    vendor: str,
    principal: Principal,
    session: str | None = None,
    **parse_options: Any,
) -> ToolTurn:
    """`run_tool_calls`, answering with the whole `ToolTurn`: its `messages`, its
    `envelopes`, the approvals it is `pending` on, and `resume` for after they are decided."""
    proposals: list[Proposal] = adapter(vendor).parse(response, **parse_options)
    envelopes = await run_turn(harness, proposals, principal=principal, session=session)
    return ToolTurn(vendor, tuple(proposals), tuple(envelopes))


__all__ = [
    "VENDORS",
    "IssueKind",
    "RenderIssue",
    "RenderReport",
    "ToolRunner",
    "ToolTurn",
    "adapter",
    "answer",
    "batches",
    "parse",
    "render",
    "render_with_report",
    "run_tool_calls",
    "run_tool_turn",
    "run_turn",
]
