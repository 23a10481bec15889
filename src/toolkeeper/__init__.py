"""toolkeeper: the governed tool layer between an LLM agent and the world."""

from toolkeeper.adapters import RenderReport, run_tool_calls
from toolkeeper.artifacts.store import ArtifactError, ArtifactStore, Projection, project_result
from toolkeeper.contract.functions import contract_of, tool
from toolkeeper.contract.model import (
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
from toolkeeper.contract.naming import vendor_names
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
from toolkeeper.executors import Executor, ToolFailure
from toolkeeper.executors.inprocess import FunctionExecutor
from toolkeeper.importers.catalog import Catalog, CatalogProblem, load_catalog
from toolkeeper.importers.formats import load_tool_list
from toolkeeper.ledger import InvocationRecord, Ledger, LedgerEvent
from toolkeeper.ledger.sqlite import SQLiteLedger
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
from toolkeeper.runtime.approvals import Approvals
from toolkeeper.runtime.assess import Assessment, Verdict, assess_invocation
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import (
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
from toolkeeper.runtime.grants import Grant, GrantAuthority
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.invocation import InvocationRequest, Principal, Proposal
from toolkeeper.schema.dialects import normalize_schema
from toolkeeper.secrets.providers import (
    CallableSecretProvider,
    EnvSecretProvider,
    FileSecretProvider,
    ResolvedSecrets,
    SecretBroker,
    SecretProvider,
    default_broker,
)
from toolkeeper.secrets.redaction import RedactingFilter, Redactor
from toolkeeper.validation.arguments import ValidationResult, validate_arguments
from toolkeeper.validation.repairs import Repair, apply_repairs

__version__ = "0.1.0"

__all__ = [
    "ApprovalError",
    "Approvals",
    "ArtifactError",
    "ArtifactRef",
    "ArtifactStore",
    "Assessment",
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
    "Executor",
    "FieldError",
    "FileSecretProvider",
    "Finding",
    "FunctionExecutor",
    "Grant",
    "GrantAuthority",
    "Harness",
    "Idempotency",
    "InvocationRecord",
    "InvocationRequest",
    "Ledger",
    "LedgerError",
    "LedgerEvent",
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
    "RenderReport",
    "Repair",
    "ResolvedSecrets",
    "ResultEnvelope",
    "ResultProjection",
    "RetryPolicy",
    "SQLiteLedger",
    "SecretBroker",
    "SecretProvider",
    "SideEffect",
    "Status",
    "ToolContext",
    "ToolContract",
    "ToolError",
    "ToolFailure",
    "ToolkeeperError",
    "ValidationResult",
    "Verdict",
    "__version__",
    "apply_repairs",
    "assess_invocation",
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
    "run_tool_calls",
    "tool",
    "validate_arguments",
    "vendor_names",
]
