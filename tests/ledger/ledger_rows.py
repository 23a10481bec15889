"""Rows and openers shared by the ledger tests (imported by `conftest.py` and the test files)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from toolkeeper.ledger import InvocationRecord, Ledger, RecordState

Opener = Callable[[], Ledger]
"""Opens another connection to one ledger store, as another process would."""


def record(request_id: str, **fields: object) -> InvocationRecord:
    base = InvocationRecord(
        request_id=request_id,
        call_id="c-" + request_id,
        tool="write_x",
        principal_id="alice",
        tenant="acme",
        state=RecordState.INTENT,
        contract_ref="write_x@1.0.0",
    )
    return replace(base, **fields)  # type: ignore[arg-type]
