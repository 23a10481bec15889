"""Gemini (google-genai): function declarations in, ``function_call`` parts out,
``function_response`` parts back.

A candidate may hold zero, one or many ``function_call`` parts; all are answered in one
``user`` content whose ``function_response`` parts follow the call order. Gemini API calls
may carry no id: `parse` then gives each call the deterministic id ``gemini-<turn>-<n>``
(``n`` counts the calls of the candidate from 0, ``turn`` is the caller's turn number), and
`answer` leaves such a stand-in id out of the response, so Gemini correlates by name and
order as it does for calls without ids.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from toolkeeper.adapters._common import as_data, get, items, views
from toolkeeper.adapters._schema import NotExpressible
from toolkeeper.adapters.gemini_schema import to_gemini
from toolkeeper.adapters.report import IssueKind, RenderIssue, RenderReport
from toolkeeper.contract.model import ToolContract
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.runtime.invocation import Proposal
from toolkeeper.schema.document import utf8_json

FAMILY = "gemini"
_STAND_IN_ID = re.compile(r"^gemini-\d+-\d+$")


def render(contracts: Sequence[ToolContract], *, json_schema: bool = False) -> list[dict[str, Any]]:
    """The ``tools`` of a ``GenerateContentConfig``: one tool holding every declaration."""
    return render_with_report(contracts, json_schema=json_schema)[0]


def render_with_report(
    contracts: Sequence[ToolContract], *, json_schema: bool = False
) -> tuple[list[dict[str, Any]], RenderReport]:
    """`render`, plus what the OpenAPI-subset conversion could not keep.

    By default each schema is converted for ``parameters`` (see
    `toolkeeper.adapters.gemini_schema`); a schema the conversion cannot carry is sent as
    ``parameters_json_schema`` and reported as a fallback. With `json_schema`, every schema
    is sent as ``parameters_json_schema`` unchanged.
    """
    issues: list[RenderIssue] = []
    declarations = []
    for view in views(contracts, FAMILY, issues):
        declaration: dict[str, Any] = {"name": view.name, "description": view.description}
        if json_schema:
            declaration["parameters_json_schema"] = view.schema
        else:
            try:
                parameters, notes = to_gemini(view.schema)
            except NotExpressible as exc:
                issues.append(
                    RenderIssue(view.contract.ref, exc.path, IssueKind.FALLBACK, exc.detail)
                )
                declaration["parameters_json_schema"] = view.schema
            else:
                issues.extend(RenderIssue(view.contract.ref, *note) for note in notes.items)
                if parameters is not None:
                    declaration["parameters"] = parameters
        declarations.append(declaration)
    tools = [{"function_declarations": declarations}] if declarations else []
    return tools, RenderReport(tuple(issues))


def parse(response: Any, *, candidate: int = 0, turn: int = 0) -> list[Proposal]:
    """The ``function_call`` parts of one candidate of a ``GenerateContentResponse``.

    Accepts the SDK object or its dict form (snake_case or the REST API's camelCase).
    ``args`` is passed through; a call without ``args`` proposes an empty object. Pass the
    conversation's turn number as `turn` so stand-in ids stay distinct across turns.
    """
    candidates = items(as_data(response), "candidates")
    if not 0 <= candidate < len(candidates):
        return []
    parts = items(get(candidates[candidate], "content"), "parts")
    calls = [call for call in (get(p, "function_call", "functionCall") for p in parts) if call]
    return [
        Proposal(
            call_id=str(get(call, "id") or f"gemini-{turn}-{index}"),
            tool=str(get(call, "name") or ""),
            arguments=get(call, "args") if get(call, "args") is not None else {},
            family=FAMILY,
        )
        for index, call in enumerate(calls)
    ]


def answer(results: Sequence[tuple[Proposal, ResultEnvelope]]) -> list[dict[str, Any]]:
    """One ``user`` content answering every call (none when there were no calls).

    Each ``response`` is ``{"output": ...}`` for a success and ``{"error": ...}`` otherwise,
    as Gemini documents, holding the model text and, when present, the structured content
    as JSON. Lone surrogates are sent as their escapes, which the SDK can encode.
    """
    if not results:
        return []
    parts = []
    for proposal, envelope in results:
        body: dict[str, Any] = {"text": envelope.to_model_text()}
        if envelope.structured_content is not None:
            # The data travels as JSON once, not again inside the text.
            bare = envelope.model_copy(update={"structured_content": None})
            body = {"text": bare.to_model_text(), "structured_content": envelope.structured_content}
        function_response: dict[str, Any] = {
            "name": proposal.tool,
            "response": {"output" if envelope.ok else "error": body},
        }
        if not _STAND_IN_ID.match(proposal.call_id):
            function_response = {"id": proposal.call_id, **function_response}
        parts.append({"function_response": function_response})
    return utf8_json([{"role": "user", "parts": parts}])
