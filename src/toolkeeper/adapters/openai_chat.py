"""OpenAI Chat Completions: ``tools=[...]`` in, ``message.tool_calls`` out, ``role: tool`` back.

A turn may hold zero, one or many tool calls; each is answered by one ``{"role": "tool",
"tool_call_id": ...}`` message, in the order the model gave them. Only function tool calls
are toolkeeper's: custom (free-form grammar) tool calls are not rendered by toolkeeper and
are left to the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolkeeper.adapters._common import as_data, call_id, get, items
from toolkeeper.adapters._openai import FAMILY, definitions, restore_arguments, strict_schemas
from toolkeeper.adapters.report import RenderReport
from toolkeeper.contract.model import ToolContract
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.runtime.invocation import Proposal
from toolkeeper.schema.document import utf8_json


def render(contracts: Sequence[ToolContract], *, strict: bool = False) -> list[dict[str, Any]]:
    """The ``tools`` parameter of ``chat.completions.create`` for `contracts`."""
    return render_with_report(contracts, strict=strict)[0]


def render_with_report(
    contracts: Sequence[ToolContract], *, strict: bool = False
) -> tuple[list[dict[str, Any]], RenderReport]:
    """`render`, plus what strict mode could not keep (see `toolkeeper.adapters.openai_strict`)."""
    functions, report = definitions(contracts, strict=strict)
    return [{"type": "function", "function": function} for function in functions], report


def parse(
    response: Any, *, choice: int = 0, strict_contracts: Sequence[ToolContract] = ()
) -> list[Proposal]:
    """The function tool calls of one choice of a ``ChatCompletion`` (or its dict form).

    Arguments stay the string the model wrote, malformed or not. Pass the contracts you
    rendered with ``strict=True`` as `strict_contracts` to turn the nulls strict mode forces
    for omitted optional fields back into omissions. A repeated call id is kept as is, once
    per call: each is answered in turn, so the answers repeat it in the same order.
    """
    choices = items(as_data(response), "choices")
    if not 0 <= choice < len(choices):
        return []
    schemas = strict_schemas(strict_contracts)
    proposals = []
    for index, call in enumerate(items(get(choices[choice], "message"), "tool_calls")):
        if get(call, "type") not in (None, "function"):
            continue
        function = get(call, "function") or {}
        name = str(get(function, "name") or "")
        arguments = restore_arguments(get(function, "arguments"), schemas.get(name))
        proposals.append(
            Proposal(
                call_id=call_id(get(call, "id"), FAMILY, index),
                tool=name,
                arguments=arguments,
                family=FAMILY,
            )
        )
    return proposals


def answer(results: Sequence[tuple[Proposal, ResultEnvelope]]) -> list[dict[str, Any]]:
    """One ``role: tool`` message per call, correlated by ``tool_call_id``, in call order.
    Lone surrogates (in a call id, a name, a message) are sent as their escapes, which the
    SDK can encode."""
    return utf8_json(
        [
            {"role": "tool", "tool_call_id": proposal.call_id, "content": envelope.to_model_text()}
            for proposal, envelope in results
        ]
    )
