"""Shared fixtures of the adapter tests: contracts and SDK-type validation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import TypeAdapter

from toolkeeper.contract import ToolContract
from toolkeeper.envelope import (
    ErrorCategory,
    ExecutionMeta,
    FieldError,
    ResultEnvelope,
    Status,
    ToolError,
)

SdkCheck = Callable[[Any, Any], Any]


def _materialize(value: Any) -> Any:
    # pydantic validates Iterable[...] fields lazily; consuming them runs the validation.
    if isinstance(value, dict):
        return {k: _materialize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_materialize(v) for v in value]
    if isinstance(value, Iterator):
        return [_materialize(v) for v in value]
    return value


@pytest.fixture
def sdk_valid() -> SdkCheck:
    """Validate `value` as the SDK's request type `typ` (a TypedDict or union of them)."""

    def check(typ: Any, value: Any) -> Any:
        # The adapter must outlive the lazy iterators it hands out, or pydantic-core panics.
        adapter = TypeAdapter(typ)
        validated = adapter.validate_python(value)
        return _materialize(validated)

    return check


@pytest.fixture
def weather() -> ToolContract:
    return ToolContract.model_validate(
        {
            "id": "weather.current",
            "version": "1.2.0",
            "description": "Current weather for a city.",
            "when_to_use": "The user asks about weather now.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "minLength": 1},
                    "unit": {"type": "string", "enum": ["C", "F"], "default": "C"},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
            "side_effect": "none",
            "examples": [
                {"arguments": {"city": "Oslo"}},
                {"arguments": {"city": "Lima", "unit": "F"}},
            ],
        }
    )


@pytest.fixture
def send_email() -> ToolContract:
    return ToolContract.model_validate(
        {
            "id": "mail/send",
            "version": "2.0.0",
            "description": "Send an email.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "to": {"type": "string", "format": "email"},
                    "body": {"type": "string"},
                },
                "required": ["to", "body"],
            },
            "side_effect": "committing",
        }
    )


def _succeeded(call_id: str, data: dict[str, Any] | None = None) -> ResultEnvelope:
    return ResultEnvelope(
        status=Status.SUCCEEDED,
        summary="ok",
        structured_content=data,
        execution_meta=ExecutionMeta(request_id=f"req_{call_id}", call_id=call_id),
    )


def _rejected(call_id: str) -> ResultEnvelope:
    return ResultEnvelope(
        status=Status.REJECTED,
        error=ToolError(
            category=ErrorCategory.INVALID_ARGUMENT,
            message="arguments are not valid JSON",
            field_errors=(FieldError(path="", code="json", message="Expecting value"),),
            suggested_fix="send a JSON object",
        ),
        execution_meta=ExecutionMeta(request_id=f"req_{call_id}", call_id=call_id),
    )


@pytest.fixture
def succeeded() -> Callable[..., ResultEnvelope]:
    """A succeeded envelope for a call id, with optional structured content."""
    return _succeeded


@pytest.fixture
def rejected() -> Callable[[str], ResultEnvelope]:
    """A rejected (invalid JSON) envelope for a call id."""
    return _rejected
