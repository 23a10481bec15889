"""The gateway's public API is what `toolkeeper.gateway.__all__` lists, and it all exists."""

from __future__ import annotations

import toolkeeper.gateway


def test_all_exports_exist() -> None:
    missing = [name for name in toolkeeper.gateway.__all__ if not hasattr(toolkeeper.gateway, name)]
    assert missing == []


def test_public_classes_are_exported() -> None:
    public = {
        name
        for name, value in vars(toolkeeper.gateway).items()
        if not name.startswith("_") and isinstance(value, type)
    }
    assert public <= set(toolkeeper.gateway.__all__)
