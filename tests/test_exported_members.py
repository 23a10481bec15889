"""The public API is what `toolkeeper.__all__` lists, and every listed name exists."""

import toolkeeper


def test_all_exports_exist() -> None:
    missing = [name for name in toolkeeper.__all__ if not hasattr(toolkeeper, name)]
    assert missing == []


def test_public_classes_are_exported() -> None:
    public = {
        name
        for name, value in vars(toolkeeper).items()
        if not name.startswith("_") and isinstance(value, type)
    }
    assert public <= set(toolkeeper.__all__)
