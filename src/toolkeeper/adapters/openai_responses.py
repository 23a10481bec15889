"""OpenAI Responses API: function tools in, ``function_call`` output items out,
``function_call_output`` input items back.

A response's ``output`` may hold zero, one or many ``function_call`` items among messages
and reasoning; each is answered by one ``function_call_output`` item with the same
``call_id``. Hosted tools (web search, file search, MCP, ...) run on OpenAI's side and custom
tools are not rendered by toolkeeper; their items are left to the caller.
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
    """The ``tools`` parameter of ``responses.create`` for `contracts`.

    ``strict`` is always written out: when it is omitted the Responses API normalizes the
    schema into strict mode itself (every field required), which would make optional
    arguments mandatory without the null handling `toolkeeper.adapters.openai_strict` does.
    """
    return render_with_report(contracts, strict=strict)[0]


def render_with_report(
    contracts: Sequence[ToolContract], *, strict: bool = False
) -> tuple[list[dict[str, Any]], RenderReport]:
    """`render`, plus what strict mode could not keep (see `toolkeeper.adapters.openai_strict`)."""
    functions, report = definitions(contracts, strict=strict)
    return [{"type": "function", **function} for function in functions], report


def parse(response: Any, *, strict_contracts: Sequence[ToolContract] = ()) -> list[Proposal]:
    """The ``function_call`` items of a ``Response`` (or its dict form), in output order.

    Arguments stay the string the model wrote; `strict_contracts` works as in
    `toolkeeper.adapters.openai_chat.parse`. A repeated ``call_id`` is kept, once per item.
    """
    schemas = strict_schemas(strict_contracts)
    calls = [
        item for item in items(as_data(response), "output") if get(item, "type") == "function_call"
    ]
    proposals = []
    for index, item in enumerate(calls):
        name = str(get(item, "name") or "")
        proposals.append(
            Proposal(
                call_id=call_id(get(item, "call_id"), FAMILY, index),
                tool=name,
                arguments=restore_arguments(get(item, "arguments"), schemas.get(name)),
                family=FAMILY,
            )
        )
    return proposals


def answer(results: Sequence[tuple[Proposal, ResultEnvelope]]) -> list[dict[str, Any]]:
    """One ``function_call_output`` input item per call, correlated by ``call_id``; lone
    surrogates sent as their escapes, as in `toolkeeper.adapters.openai_chat.answer`."""
    return utf8_json(
        [
            {
                "type": "function_call_output",
                "call_id": proposal.call_id,
                "output": envelope.to_model_text(),
            }
            for proposal, envelope in results
        ]
    )
