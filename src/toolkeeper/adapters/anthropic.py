"""Anthropic Messages: ``tools=[...]`` in, ``tool_use`` blocks out, ``tool_result`` blocks back.

A message may hold zero, one or many ``tool_use`` blocks; all of them are answered in one
``user`` message whose ``tool_result`` blocks come first, in call order, ahead of any text
(the API rejects a tool result placed after text). Server tools (``server_tool_use``) run
on Anthropic's side and are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jsonschema

from toolkeeper.adapters._common import as_data, call_id, get, items, views
from toolkeeper.adapters.report import IssueKind, RenderIssue, RenderReport
from toolkeeper.contract.model import ToolContract
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.runtime.invocation import Proposal
from toolkeeper.schema.document import utf8_json

FAMILY = "anthropic"
SEARCH_TOOL = "search_tools"
"""The discovery meta-tool (`toolkeeper.discovery.progressive.SEARCH_TOOLS`) whose result is
answered with ``tool_reference`` blocks: Anthropic's client-side tool search loads the
deferred tools they name."""


def render(contracts: Sequence[ToolContract], *, examples: bool = True) -> list[dict[str, Any]]:
    """The ``tools`` parameter of ``messages.create`` for `contracts`."""
    return render_with_report(contracts, examples=examples)[0]


def render_with_report(
    contracts: Sequence[ToolContract], *, examples: bool = True
) -> tuple[list[dict[str, Any]], RenderReport]:
    """`render`, plus the examples left out because they do not fit the view's schema.

    With `examples`, a contract's examples become ``input_examples``. They were validated
    against the contract's schema when it loaded; a family's view may narrow that schema,
    and an example the model is shown must be a valid call of what the model is shown.
    """
    issues: list[RenderIssue] = []
    tools = []
    for view in views(contracts, FAMILY, issues):
        tool: dict[str, Any] = {
            "name": view.name,
            "description": view.description,
            "input_schema": view.schema,
        }
        if examples and view.contract.examples:
            validator = jsonschema.Draft202012Validator(view.schema)
            kept = []
            for index, example in enumerate(view.contract.examples):
                if validator.is_valid(example.arguments):
                    kept.append(example.arguments)
                else:
                    issues.append(
                        RenderIssue(
                            view.contract.ref,
                            "",
                            IssueKind.DROPPED,
                            f"examples[{index}] does not match the anthropic view's schema",
                        )
                    )
            if kept:
                tool["input_examples"] = kept
        tools.append(tool)
    return tools, RenderReport(tuple(issues))


def parse(response: Any) -> list[Proposal]:
    """The ``tool_use`` blocks of a ``Message`` (or its dict form), in content order.

    ``input`` is passed through as the model produced it. A repeated block id is kept, once
    per block, and answered once per block.
    """
    proposals = []
    blocks = [b for b in items(as_data(response), "content") if get(b, "type") == "tool_use"]
    for index, block in enumerate(blocks):
        proposals.append(
            Proposal(
                call_id=call_id(get(block, "id"), FAMILY, index),
                tool=str(get(block, "name") or ""),
                arguments=get(block, "input"),
                family=FAMILY,
            )
        )
    return proposals


def answer(
    results: Sequence[tuple[Proposal, ResultEnvelope]], *, text: str | None = None
) -> list[dict[str, Any]]:
    """One ``user`` message answering every call (none when there were no calls).

    Every envelope that did not succeed sets ``is_error``, so the model reads a denial, a
    pending approval or a failure as "this did not happen". `text`, when given, follows the
    tool results in the same message. Lone surrogates are sent as their escapes, which the
    SDK can encode.
    """
    if not results:
        return []
    content: list[dict[str, Any]] = [
        {
            "type": "tool_result",
            "tool_use_id": proposal.call_id,
            "content": _content(proposal, envelope),
            "is_error": not envelope.ok,
        }
        for proposal, envelope in results
    ]
    if text:
        content.append({"type": "text", "text": text})
    return utf8_json([{"role": "user", "content": content}])


def _content(proposal: Proposal, envelope: ResultEnvelope) -> list[dict[str, Any]]:
    """A tool result's blocks: the found tools as ``tool_reference`` blocks for a successful
    search that found any, the envelope's text otherwise."""
    found = (envelope.structured_content or {}).get("tool_references")
    if proposal.tool == SEARCH_TOOL and envelope.ok and isinstance(found, list) and found:
        return [{"type": "tool_reference", "tool_name": str(name)} for name in found]
    return [{"type": "text", "text": envelope.to_model_text()}]
