"""Exceptions for developers embedding toolkeeper.

Outcomes of tool calls are envelopes, never exceptions (STYLE.md rule 9). These classes are
for misuse of the library and for bad configuration or catalog files:

    ToolkeeperError
    ├── ContractError        a contract definition is invalid
    │   └── ExampleError     a contract example does not validate against its input schema
    ├── CatalogError         a catalog file or module cannot be loaded
    ├── RegistryError        a registration conflicts with what is registered
    ├── ConfigError          a configuration value is invalid
    ├── PolicyError          a policy file, annotation or condition cannot be parsed
    ├── LedgerError          the ledger cannot be opened or written
    └── ApprovalError        an approval id is unknown or cannot take that decision
"""

from __future__ import annotations


class ToolkeeperError(Exception):
    """Base class of every exception toolkeeper raises on purpose."""


class ContractError(ToolkeeperError):
    """Raised when a tool contract is invalid; names the contract, the field and the fix."""

    def __init__(self, message: str, *, contract_id: str | None = None, field: str | None = None):
        super().__init__(message)
        self.contract_id = contract_id
        self.field = field


class ExampleError(ContractError):
    """Raised when a contract example does not validate against the contract's input schema."""


class CatalogError(ToolkeeperError):
    """Raised when a catalog (file, module, imported tool list) cannot be loaded."""

    def __init__(self, message: str, *, source: str | None = None):
        super().__init__(message)
        self.source = source


class RegistryError(ToolkeeperError):
    """Raised when registering a contract conflicts with one already registered."""


class ConfigError(ToolkeeperError):
    """Raised for an invalid configuration value; names the key, the value and the fix."""

    def __init__(self, message: str, *, key: str | None = None, value: object = None):
        super().__init__(message)
        self.key = key
        self.value = value


class PolicyError(ToolkeeperError):
    """Raised when policy text, a policy annotation or a condition cannot be parsed; names the
    source file, the line and the offending text."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        text: str | None = None,
    ):
        super().__init__(message)
        self.source = source
        self.line = line
        self.text = text


class LedgerError(ToolkeeperError):
    """Raised when the ledger cannot be opened, migrated, read or written.

    `transient` is true when the database refuses work for now whatever the rows (the
    connection is lost, the disk is full, the file is locked), so a retry may succeed; false
    when it refused these rows (a constraint, a value it cannot store)."""

    def __init__(self, message: str, *, transient: bool = True):
        super().__init__(message)
        self.transient = transient


class ApprovalError(ToolkeeperError):
    """Raised for an unknown approval id or a decision on an approval already decided."""

    def __init__(self, message: str, *, approval_id: str | None = None):
        super().__init__(message)
        self.approval_id = approval_id
