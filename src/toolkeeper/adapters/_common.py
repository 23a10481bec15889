"""What every vendor adapter does the same way: views, names, plain data, call ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from toolkeeper.adapters.report import IssueKind, RenderIssue
from toolkeeper.contract.model import ModelView, ToolContract
from toolkeeper.contract.naming import vendor_names


@dataclass(frozen=True, slots=True)
class RenderedView:
    """One contract as a family sees it: its ref, vendor name and model view."""

    contract: ToolContract
    name: str
    view: ModelView

    @property
    def schema(self) -> dict[str, Any]:
        return self.view.input_schema or self.contract.input_schema

    @property
    def description(self) -> str:
        return self.view.description or self.contract.model_description()


def views(
    contracts: Sequence[ToolContract], family: str, issues: list[RenderIssue]
) -> list[RenderedView]:
    """The contracts' views for `family`, in the caller's order, named by `vendor_names`.

    A view whose input schema is not an object is left out and reported: every vendor's
    function-calling API takes an object of named arguments.
    """
    names = vendor_names(contracts, family)
    seen: set[str] = set()
    rendered = []
    for contract in contracts:
        if contract.ref in seen:
            continue
        seen.add(contract.ref)
        view = RenderedView(contract, names[contract.ref], contract.view(family))
        if view.schema.get("type") != "object":
            issues.append(
                RenderIssue(
                    contract.ref, "", IssueKind.DROPPED, "input schema is not an object; not sent"
                )
            )
            continue
        rendered.append(view)
    return rendered


def as_data(response: Any) -> Any:
    """An SDK object as plain JSON data; plain data passes through unchanged."""
    if isinstance(response, BaseModel):
        return response.model_dump(mode="json", exclude_none=True)
    return response


def get(data: Any, *keys: str) -> Any:
    """The first of `keys` present in a mapping (SDK snake_case or wire camelCase), or None."""
    if not isinstance(data, Mapping):
        return None
    for key in keys:
        if data.get(key) is not None:
            return data[key]
    return None


def items(data: Any, *keys: str) -> list[Any]:
    """A list-valued field, or an empty list when it is missing or not a list."""
    value = get(data, *keys)
    return value if isinstance(value, list) else []


def call_id(raw: Any, family: str, index: int) -> str:
    """The vendor's call id, or a deterministic stand-in when an endpoint sent none."""
    return str(raw) if raw not in (None, "") else f"{family}-{index}"
