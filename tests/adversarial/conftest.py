"""Attacks on the tool layer, kept as tests: each module names the class of attack it tries
(odd input, concurrency, cancellation, another principal), and every answer must be a
categorized tool error with its ledger row — never a traceback, a lost record or a run that
policy should have stopped."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
