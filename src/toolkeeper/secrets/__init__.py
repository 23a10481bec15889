"""Credentials: providers that resolve secrets by reference, and the redactor that keeps
their values out of everything recorded or shown."""

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

__all__ = [
    "CallableSecretProvider",
    "EnvSecretProvider",
    "FileSecretProvider",
    "RedactingFilter",
    "Redactor",
    "ResolvedSecrets",
    "SecretBroker",
    "SecretProvider",
    "default_broker",
]
