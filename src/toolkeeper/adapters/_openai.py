"""What OpenAI's two APIs share: function definitions, strict mode, and undoing its nulls.

Chat Completions nests a function definition under ``{"type": "function", "function": ...}``
and the Responses API flattens it into the tool; the definition itself is the same.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolkeeper.adapters._common import views
from toolkeeper.adapters._schema import NotExpressible
from toolkeeper.adapters.openai_strict import omit_strict_nulls, to_strict
from toolkeeper.adapters.report import IssueKind, RenderIssue, RenderReport
from toolkeeper.contract.model import ToolContract
from toolkeeper.contract.naming import vendor_names

FAMILY = "openai"


def definitions(
    contracts: Sequence[ToolContract], *, strict: bool
) -> tuple[list[dict[str, Any]], RenderReport]:
    """Function definitions (name, description, parameters, strict) and what they lost.

    With `strict`, each schema goes through `to_strict`; a tool whose schema strict mode
    cannot express is sent with ``strict: false`` and reported as a fallback.
    """
    issues: list[RenderIssue] = []
    rendered = []
    for view in views(contracts, FAMILY, issues):
        parameters, is_strict = view.schema, False
        if strict:
            try:
                result = to_strict(view.schema)
            except NotExpressible as exc:
                issues.append(
                    RenderIssue(view.contract.ref, exc.path, IssueKind.FALLBACK, exc.detail)
                )
            else:
                parameters, is_strict = result.schema, True
                issues.extend(RenderIssue(view.contract.ref, *note) for note in result.notes)
        rendered.append(
            {
                "name": view.name,
                "description": view.description,
                "parameters": parameters,
                "strict": is_strict,
            }
        )
    return rendered, RenderReport(tuple(issues))


def strict_schemas(strict_contracts: Sequence[ToolContract]) -> dict[str, dict[str, Any]]:
    """Vendor name -> view input schema, for the contracts rendered with ``strict=True``."""
    names = vendor_names(strict_contracts, FAMILY)
    return {names[c.ref]: c.view(FAMILY).input_schema or c.input_schema for c in strict_contracts}


def restore_arguments(arguments: Any, schema: dict[str, Any] | None) -> Any:
    """The arguments with strict mode's stand-in nulls removed, for a strict-rendered tool.

    Anything that is not a JSON object for a strict-rendered tool passes through as the
    model sent it: malformed arguments are the validate stage's to diagnose.
    """
    if schema is None or not isinstance(arguments, str):
        return arguments
    try:
        parsed = json.loads(arguments)
    except (json.JSONDecodeError, RecursionError):  # too deep is malformed for us, too
        return arguments
    if not isinstance(parsed, dict):
        return arguments
    cleaned = omit_strict_nulls(parsed, schema)
    return arguments if cleaned == parsed else json.dumps(cleaned, ensure_ascii=False)
