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
from toolkeeper.redaction import RedactingFilter, Redactor
from toolkeeper.secrets import (
    CallableSecretProvider,
    EnvSecretProvider,
    FileSecretProvider,
    ResolvedSecrets,
    SecretBroker,
    SecretProvider,
    default_broker,
)

__version__ = "0.1.0"

__all__ = [
    "ArtifactError",
    "ArtifactRef",
    "ArtifactStore",
    "CallableSecretProvider",
    "CatalogError",
    "Classification",
    "ConcurrencyPolicy",
    "ConfigError",
    "ContractError",
    "ContractExample",
    "DataClassification",
    "EffectState",
    "EnvSecretProvider",
    "ErrorCategory",
    "ExampleError",
    "ExecutionMeta",
    "FieldError",
    "FileSecretProvider",
    "Idempotency",
    "InvocationRequest",
    "LedgerError",
    "ModelView",
    "Principal",
    "Projection",
    "Proposal",
    "Provenance",
    "RedactingFilter",
    "Redactor",
    "RegistryError",
    "ResolvedSecrets",
    "ResultEnvelope",
    "ResultProjection",
    "RetryPolicy",
    "SecretBroker",
    "SecretProvider",
    "SideEffect",
    "Status",
    "ToolContext",
    "ToolContract",
    "ToolError",
    "ToolkeeperError",
    "__version__",
    "default_broker",
    "project_result",
]
