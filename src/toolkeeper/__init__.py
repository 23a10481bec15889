"""toolkeeper: the governed tool layer between an LLM agent and the world."""

from toolkeeper.artifacts import ArtifactError, ArtifactStore, Projection, project_result
from toolkeeper.catalog import Catalog, CatalogProblem, load_catalog
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
from toolkeeper.dialects import normalize_schema
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
    PolicyError,
    RegistryError,
    ToolkeeperError,
)
from toolkeeper.functions import contract_of, tool
from toolkeeper.grants import Grant, GrantAuthority
from toolkeeper.importers import load_tool_list
from toolkeeper.invocation import InvocationRequest, Principal, Proposal
from toolkeeper.lint import Finding, LintConfig, LintReport, lint_catalog, lint_contract
from toolkeeper.policy import (
    CedarPolicyEngine,
    Condition,
    Decision,
    PolicyDecision,
    PolicyEngine,
    PolicyRequest,
    decide_safely,
    default_policies,
)
from toolkeeper.redaction import RedactingFilter, Redactor
from toolkeeper.repairs import Repair, apply_repairs
from toolkeeper.secrets import (
    CallableSecretProvider,
    EnvSecretProvider,
    FileSecretProvider,
    ResolvedSecrets,
    SecretBroker,
    SecretProvider,
    default_broker,
)
from toolkeeper.validation import ValidationResult, validate_arguments

__version__ = "0.1.0"

__all__ = [
    "ArtifactError",
    "ArtifactRef",
    "ArtifactStore",
    "CallableSecretProvider",
    "Catalog",
    "CatalogError",
    "CatalogProblem",
    "CedarPolicyEngine",
    "Classification",
    "ConcurrencyPolicy",
    "Condition",
    "ConfigError",
    "ContractError",
    "ContractExample",
    "DataClassification",
    "Decision",
    "EffectState",
    "EnvSecretProvider",
    "ErrorCategory",
    "ExampleError",
    "ExecutionMeta",
    "FieldError",
    "FileSecretProvider",
    "Finding",
    "Grant",
    "GrantAuthority",
    "Idempotency",
    "InvocationRequest",
    "LedgerError",
    "LintConfig",
    "LintReport",
    "ModelView",
    "PolicyDecision",
    "PolicyEngine",
    "PolicyError",
    "PolicyRequest",
    "Principal",
    "Projection",
    "Proposal",
    "Provenance",
    "RedactingFilter",
    "Redactor",
    "RegistryError",
    "Repair",
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
    "ValidationResult",
    "__version__",
    "apply_repairs",
    "contract_of",
    "decide_safely",
    "default_broker",
    "default_policies",
    "lint_catalog",
    "lint_contract",
    "load_catalog",
    "load_tool_list",
    "normalize_schema",
    "project_result",
    "tool",
    "validate_arguments",
]
