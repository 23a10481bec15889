"""The tool contract: `ToolContract` and its policies, contracts from Python functions
(`@tool`), and the vendor names a contract is rendered under."""

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

__all__ = [
    "Classification",
    "ConcurrencyPolicy",
    "ContractExample",
    "DataClassification",
    "Idempotency",
    "ModelView",
    "ResultProjection",
    "RetryPolicy",
    "SideEffect",
    "ToolContract",
    "contract_of",
    "tool",
    "vendor_names",
]
