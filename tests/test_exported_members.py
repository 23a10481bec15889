"""The public API is what `toolkeeper.__all__` lists: exactly these names, each of which exists."""

import importlib.metadata

import toolkeeper

PUBLIC_API = [
    "ApprovalError",
    "CatalogError",
    "ConfigError",
    "ContractError",
    "EffectState",
    "ErrorCategory",
    "ExampleError",
    "FieldError",
    "Harness",
    "Idempotency",
    "LedgerError",
    "PolicyError",
    "Principal",
    "Proposal",
    "RegistryError",
    "ResultEnvelope",
    "SideEffect",
    "Status",
    "ToolContext",
    "ToolContract",
    "ToolError",
    "ToolFailure",
    "ToolTurn",
    "ToolkeeperError",
    "__version__",
    "load_catalog",
    "run_tool_calls",
    "tool",
    "validate_arguments",
]


def test_all_is_the_public_api() -> None:
    assert sorted(toolkeeper.__all__) == PUBLIC_API


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


def test_exceptions_users_catch_derive_from_one_base() -> None:
    errors = [getattr(toolkeeper, name) for name in PUBLIC_API if name.endswith("Error")]
    classes = [e for e in errors if isinstance(e, type) and issubclass(e, Exception)]
    assert {c.__name__ for c in classes if not issubclass(c, toolkeeper.ToolkeeperError)} == set()


def test_version_comes_from_the_installed_metadata() -> None:
    assert toolkeeper.__version__ == importlib.metadata.version("toolkeeper")
