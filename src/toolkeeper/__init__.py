"""toolkeeper: the governed tool layer between an LLM agent and the world.

The names here are what an agent builder needs: define tools, run governed calls, read the
envelopes, catch the exceptions. Everything else is public in the package of its concept:
`toolkeeper.policy` (Cedar engine, decisions), `toolkeeper.ledger`, `toolkeeper.secrets`,
`toolkeeper.artifacts`, `toolkeeper.contract` (policies, model views, `contract_of`),
`toolkeeper.importers`, `toolkeeper.validation`, `toolkeeper.adapters`, `toolkeeper.lint`,
`toolkeeper.runtime.*` (approvals, grants, envelope parts), and `toolkeeper.gateway` (the
`gateway` extra).
"""

import importlib.metadata

from toolkeeper.adapters import ToolTurn, run_tool_calls
from toolkeeper.contract.functions import tool
from toolkeeper.contract.model import Idempotency, SideEffect, ToolContract
from toolkeeper.errors import (
    ApprovalError,
    CatalogError,
    ConfigError,
    ContractError,
    ExampleError,
    LedgerError,
    PolicyError,
    RegistryError,
    ToolkeeperError,
)
from toolkeeper.executors import ToolFailure
from toolkeeper.importers.catalog import load_catalog
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import (
    EffectState,
    ErrorCategory,
    FieldError,
    ResultEnvelope,
    Status,
    ToolError,
)
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.invocation import Principal, Proposal
from toolkeeper.validation.arguments import validate_arguments

try:
    __version__ = importlib.metadata.version("toolkeeper")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
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
