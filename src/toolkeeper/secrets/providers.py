"""Credential binding: secrets resolved by name into the executor's context, nowhere else.

A contract names the credentials it needs (`ToolContract.credentials`); stage 6 of the
pipeline (DESIGN.md, *bind credentials*) asks a `SecretBroker` for them, and the values
reach tool code only through `ToolContext.secrets`. They never appear in arguments, ledger
rows, logs or anything the model sees: every value is registered with the broker's
`Redactor` before the broker hands it out, so the projection stage and `RedactingFilter`
can scrub it from whatever the tool returns or logs.

Where values come from is a seam, `SecretProvider`, with three implementations: the
environment, a directory of files (Docker and Kubernetes secrets), and any callable (a
vault client, a keyring).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from toolkeeper.secrets.redaction import Redactor

logger = logging.getLogger(__name__)

_SEPARATORS = frozenset(filter(None, ("/", os.sep, os.altsep)))

DEFAULT_ENV_PREFIX = "TOOLKEEPER_SECRET_"
"""`default_broker` reads credential `github_token` from `TOOLKEEPER_SECRET_GITHUB_TOKEN`."""


class SecretProvider(Protocol):
    """A source of secret values, looked up by credential name."""

    def get(self, name: str) -> str | None:
        """The value of `name`, or None when this provider does not have it."""
        ...


class EnvSecretProvider:
    """Secrets from environment variables.

    Credential `name` is read from `{prefix}{NAME}` (the name upper-cased), falling back to
    `{prefix}{name}` exactly as written. The prefix is always applied: it confines what a
    contract can name to variables meant as secrets, so a contract declaring
    `credentials = ["AWS_SECRET_ACCESS_KEY"]` cannot read the process's own credentials.
    `environ` defaults to `os.environ`, read at each lookup.
    """

    def __init__(self, *, prefix: str = "", environ: Mapping[str, str] | None = None) -> None:
        self.prefix = prefix
        self._environ: Mapping[str, str] = os.environ if environ is None else environ

    def __repr__(self) -> str:
        return f"EnvSecretProvider(prefix={self.prefix!r})"

    def get(self, name: str) -> str | None:
        value = self._environ.get(f"{self.prefix}{name.upper()}")
        if value is None:
            value = self._environ.get(f"{self.prefix}{name}")
        return value


class FileSecretProvider:
    """Secrets from one file per name in a directory, as Docker and Kubernetes mount them.

    The file's text is the value, with trailing newlines stripped. A name containing a path
    separator or `..` is refused (None), and so is a file whose real path, after following
    symlinks, lies outside the directory: a contract's credential name must never become a
    way to read arbitrary files. A file readable by other users is still read, with one
    warning per name, since refusing it would break a deployment over a permissions fix.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"FileSecretProvider({str(self.directory)!r})"

    def get(self, name: str) -> str | None:
        if not name or ".." in name or "\0" in name or any(s in name for s in _SEPARATORS):
            return None
        root = self.directory.resolve()
        path = (root / name).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            return None
        try:
            mode = path.stat().st_mode
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        if mode & stat.S_IROTH and name not in self._warned:
            self._warned.add(name)
            logger.warning(
                "secret file %s is readable by other users (mode %s); chmod o-r it",
                path,
                stat.filemode(mode),
            )
        return text.rstrip("\r\n")


class CallableSecretProvider:
    """Secrets from a function: the adapter for a vault client, a keyring or a test."""

    def __init__(self, fn: Callable[[str], str | None]) -> None:
        self._fn = fn

    def __repr__(self) -> str:
        return f"CallableSecretProvider({getattr(self._fn, '__qualname__', self._fn)!r})"

    def get(self, name: str) -> str | None:
        return self._fn(name)


@dataclass(frozen=True, slots=True)
class ResolvedSecrets:
    """The outcome of one `SecretBroker.resolve`: the values found and the names not found."""

    values: Mapping[str, str]
    """Read-only name → value; what `ToolContext.secrets` is built from."""
    missing: tuple[str, ...] = ()
    """Requested names no provider had, in request order."""

    def __post_init__(self) -> None:
        if not isinstance(self.values, MappingProxyType):
            object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    def __repr__(self) -> str:
        # Names only: a repr ends up in logs, tracebacks and debugger views.
        return f"ResolvedSecrets(names={sorted(self.values)!r}, missing={list(self.missing)!r})"


class SecretBroker:
    """Resolves credential names through providers and registers every value for redaction."""

    def __init__(
        self, providers: Sequence[SecretProvider] = (), *, redactor: Redactor | None = None
    ) -> None:
        self.providers: tuple[SecretProvider, ...] = tuple(providers)
        self.redactor = Redactor() if redactor is None else redactor

    def __repr__(self) -> str:
        return f"SecretBroker(providers={list(self.providers)!r}, redactor={self.redactor!r})"

    def resolve(self, names: Sequence[str]) -> ResolvedSecrets:
        """Look each name up in the providers, in order; the first that has it wins.

        A provider that raises, returns an empty string or returns a non-string is treated
        as not having the name, so the next provider is asked. Each value is registered with
        the redactor before this returns, so nothing can print it unredacted afterwards.
        """
        values: dict[str, str] = {}
        missing: list[str] = []
        for name in dict.fromkeys(names):
            value = self._lookup(name)
            if value is None:
                missing.append(name)
            else:
                self.redactor.add(value)
                values[name] = value
        return ResolvedSecrets(MappingProxyType(values), tuple(missing))

    def _lookup(self, name: str) -> str | None:
        for provider in self.providers:
            try:
                value = provider.get(name)
            except Exception as exc:
                # The message may quote a secret another lookup already resolved; the
                # traceback is left out because its frames can show the provider's source.
                logger.warning(
                    "secret provider %r failed to look up %r: %s: %s",
                    provider,
                    name,
                    type(exc).__name__,
                    self.redactor.redact_text(str(exc)),
                )
                continue
            if isinstance(value, str) and value:
                return value
            if value is not None and not isinstance(value, str):
                logger.warning(
                    "secret provider %r returned %s for %r, not a string; ignored",
                    provider,
                    type(value).__name__,
                    name,
                )
        return None


def default_broker() -> SecretBroker:
    """A broker over the environment, with the `TOOLKEEPER_SECRET_` prefix.

    Credential `github_token` is read from `TOOLKEEPER_SECRET_GITHUB_TOKEN` (or, failing
    that, `TOOLKEEPER_SECRET_github_token`).
    """
    return SecretBroker([EnvSecretProvider(prefix=DEFAULT_ENV_PREFIX)])
