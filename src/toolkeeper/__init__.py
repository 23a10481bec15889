"""toolkeeper: the governed tool layer between an LLM agent and the world."""

from toolkeeper.artifacts import ArtifactError, ArtifactStore, Projection, project_result
from toolkeeper.context import ToolContext
from toolkeeper.contract import (
    Classification,
    ConcurrencyPolicy,
    ContractExample,
    DataClassification,
    Idempotency,
    ModelView,
    ResultProjection,
    RetryPolicy,
    SideEffect,
    ToolContract,
)
from toolkeeper.envelope import (
    ArtifactRef,
    EffectState,
    ErrorCategory,
    ExecutionMeta,
    FieldError,
    Provenance,
    ResultEnvelope,
    Status,
    ToolError,
)
from toolkeeper.errors import (
    CatalogError,
    ConfigError,
    ContractError,
    ExampleError,
    LedgerError,
    RegistryError,
    ToolkeeperError,
)
from toolkeeper.invocation import InvocationRequest, Principal, Proposal

__version__ = "0.1.0"

__all__ = [
    "ArtifactError",
    "ArtifactRef",
    "ArtifactStore",
    "CatalogError",
    "Classification",
    "ConcurrencyPolicy",
    "ConfigError",
    "ContractError",
    "ContractExample",
    "DataClassification",
    "EffectState",
    "ErrorCategory",
    "ExampleError",
    "ExecutionMeta",
    "FieldError",
    "Idempotency",
    "InvocationRequest",
    "LedgerError",
    "ModelView",
    "Principal",
    "Projection",
    "Proposal",
    "Provenance",
    "RegistryError",
    "ResultEnvelope",
    "ResultProjection",
    "RetryPolicy",
    "SideEffect",
    "Status",
    "ToolContext",
    "ToolContract",
    "ToolError",
    "ToolkeeperError",
    "__version__",
    "project_result",
]
