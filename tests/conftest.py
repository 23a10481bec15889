from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import Principal

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def alice() -> Principal:
    return Principal(id="alice", tenant="acme", capabilities=frozenset({"manuscripts"}))
