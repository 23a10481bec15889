"""`ResultEnvelope`: the published schema, and a bounded model observation."""

from __future__ import annotations

import json

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper import ErrorCategory, FieldError, ResultEnvelope, Status, ToolError
from toolkeeper.cli import main
from toolkeeper.runtime.envelope import ExecutionMeta, envelope_json_schema


def envelope(**kw: object) -> ResultEnvelope:
    return ResultEnvelope.model_validate(
        {"status": "failed", "execution_meta": {"request_id": "req_1", "call_id": "c"}, **kw}
    )


def test_published_schema_validates_real_envelopes(capsys: object) -> None:
    schema = envelope_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    sample = envelope(
        error=ToolError(
            category=ErrorCategory.INVALID_ARGUMENT,
            message="bad",
            field_errors=(FieldError(path="/a", code="type", message="m", expected="integer"),),
            suggested_fix="send 3",
            effect_committed=None,
        ),
        structured_content={"x": 1},
    )
    jsonschema.validate(json.loads(sample.model_dump_json()), schema)
    assert main(["schema", "envelope"]) == 0
    printed = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert set(printed["properties"]) >= {"status", "error", "summary", "execution_meta"}
    assert set(printed["$defs"]["Status"]["enum"]) == {s.value for s in Status}


def test_model_text_carries_status_error_fix_and_effect() -> None:
    text = envelope(
        error=ToolError(
            category=ErrorCategory.TIMEOUT,
            message="took too long",
            retryable=True,
            suggested_fix="wait",
            effect_committed=None,
        ),
        summary="timed out",
    ).to_model_text()
    assert "status: failed" in text
    assert "error: timeout: took too long" in text
    assert "fix: wait" in text and "retryable: true" in text
    assert "effect_committed: unknown" in text


def test_approval_id_is_shown() -> None:
    meta = ExecutionMeta(request_id="r", call_id="c", approval_id="apr_1")
    text = ResultEnvelope(status=Status.PENDING_APPROVAL, execution_meta=meta).to_model_text()
    assert "approval_id: apr_1" in text


@given(
    summary=st.text(max_size=5000),
    data=st.dictionaries(st.text(max_size=20), st.text(max_size=500), max_size=30),
    errors=st.integers(0, 60),
    limit=st.integers(100, 4000),
)
@settings(max_examples=150, deadline=None)
def test_model_text_is_bounded(summary: str, data: dict[str, str], errors: int, limit: int) -> None:
    fields = tuple(FieldError(path=f"/f{i}", code="type", message="x" * 50) for i in range(errors))
    env = envelope(
        summary=summary,
        structured_content=data,
        error=ToolError(category=ErrorCategory.INVALID_ARGUMENT, message="m", field_errors=fields),
    )
    assert len(env.to_model_text(max_chars=limit)) <= limit
