"""`UpstreamConfig`: one upstream MCP server, as a standard ``mcpServers`` entry plus ours.

The standard part is what Claude Desktop, Cursor and VS Code write: a stdio ``command`` with
``args``, ``env`` and ``cwd``, or a Streamable HTTP ``url`` with ``headers``. Our keys say how
the gateway treats the server's tools: a ``namespace`` prefix for their ids, per-tool
``tools`` overrides (the operator, not the upstream, vouches for effects), what each scan
finding class does (``scan``), and whether the stdio command runs under bubblewrap.

Values of ``env`` and ``headers`` may name a variable of the gateway's environment as
``${NAME}``, so a token need not be written into the file; nothing else of the gateway's
environment reaches an upstream. What such a reference reads is a credential: the gateway
registers it with its redactor before the upstream starts (docs/redaction.md).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, StdioServerParameters
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toolkeeper.contract.model import SEMVER, Idempotency, SideEffect
from toolkeeper.errors import ConfigError
from toolkeeper.executors.sandbox import Sandbox
from toolkeeper.gateway.scanning.findings import FINDING_CLASSES, ScanAction

PASSED_THROUGH = ("PATH", "HOME", "LANG")
"""The gateway's variables a stdio upstream inherits; everything else it gets is in `env`."""

NAMESPACE = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,63})?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ToolOverride(BaseModel):
    """What the operator says about one upstream tool; each set field replaces the cautious
    default (committing, open world, not idempotent) or the upstream's text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    side_effect: SideEffect | None = None
    idempotency: Idempotency | None = None
    open_world: bool | None = None
    required_capabilities: tuple[str, ...] | None = None
    timeout: float | None = Field(default=None, gt=0, description="Seconds.")
    version: str | None = None
    description: str | None = Field(
        default=None, description="Replaces the upstream's description in the contract."
    )
    enabled: bool = True

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str | None) -> str | None:
        if value is not None and not SEMVER.match(value):
            raise ValueError(f"{value!r} is not semver; write it as MAJOR.MINOR.PATCH")
        return value

    def contract_fields(self) -> dict[str, Any]:
        """The set fields as `ToolContract` overrides."""
        return self.model_dump(exclude_none=True, exclude={"enabled"})


class UpstreamConfig(BaseModel):
    """One upstream MCP server: how to reach it and how to govern its tools."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["stdio", "http", "streamable-http", "streamableHttp"] | None = Field(
        default=None, description="Optional transport tag as other clients write it."
    )
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(
        default_factory=dict,
        description="The only variables the child gets besides PATH, HOME and LANG.",
    )
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    namespace: str = Field(default="", description="Prefix of the tool ids, e.g. 'github.'.")
    tools: dict[str, ToolOverride] = Field(default_factory=dict)
    scan: dict[str, ScanAction] = Field(
        default_factory=dict, description="Finding class → block | warn."
    )
    scan_classifier: bool = Field(
        default=False,
        description=(
            "Add the shipped classifier's second opinion to the scan as a `classifier` finding "
            "(medium: it warns unless `scan` maps `classifier` to block). Off by default."
        ),
    )
    sandbox: Literal["none", "bubblewrap"] = "none"
    timeout: float = Field(default=30.0, gt=0, description="Seconds to connect and list.")
    call_timeout: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Seconds one call of this server's tools may take, unless the tool's own `timeout` "
            "override says otherwise; unset, the gateway's `call_timeout` applies."
        ),
    )
    protocol: Literal["auto", "legacy"] = Field(
        default="auto",
        description=(
            "'auto' speaks 2026-07-28 when the server does; 'legacy' keeps the 2025-11-25 "
            "handshake, for servers whose tools ask their client mid-call (elicitation, "
            "sampling) the 2025 way, which a 2026 connection has no channel for."
        ),
    )

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not NAMESPACE.match(value):
            raise ValueError(
                f"{value!r} must be up to 64 of letters, digits, '_', '.', ':', '/', '-'; "
                "end it with a separator, e.g. 'github.'"
            )
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [name for name in value if not _ENV_NAME.match(name)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a variable name; use letters, digits and '_'")
        return value

    @field_validator("scan")
    @classmethod
    def _scan_classes(cls, value: dict[str, ScanAction]) -> dict[str, ScanAction]:
        unknown = sorted(set(value) - set(FINDING_CLASSES))
        if unknown:
            raise ValueError(
                f"unknown finding class {', '.join(map(repr, unknown))}; "
                f"use one of {', '.join(FINDING_CLASSES)}"
            )
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> UpstreamConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give either command (a stdio server) or url (Streamable HTTP), not both or neither"
            )
        if self.url is not None:
            stdio_only = [k for k in ("args", "env", "cwd") if getattr(self, k)]
            if stdio_only or self.sandbox != "none":
                keys = ", ".join([*stdio_only, *(["sandbox"] if self.sandbox != "none" else [])])
                raise ValueError(f"{keys} only apply to a stdio command; remove them for a url")
            if self.type == "stdio":
                raise ValueError("type is 'stdio' but a url is given; use type 'http'")
        elif self.headers:
            raise ValueError("headers only apply to a url; pass values to a command via env")
        elif self.type not in (None, "stdio"):
            raise ValueError(f"type is {self.type!r} but a command is given; use type 'stdio'")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def override(self, tool: str) -> ToolOverride:
        return self.tools.get(tool, ToolOverride())

    def stdio_parameters(self, server: str) -> StdioServerParameters:
        """How to start the stdio command: with PATH, HOME, LANG and the configured `env` as its
        whole environment, under bubblewrap when `sandbox` asks for it.

        Values travel in the child's environment, never on a command line: ``/proc/PID/cmdline``
        is readable by every local user, and `env` holds the upstream's credentials. The SDK
        merges a few of the gateway's own variables into every child's environment; ``env -u``
        (or bwrap's ``--unsetenv``) drops those by name.
        """
        assert self.command is not None
        env = {k: os.environ[k] for k in PASSED_THROUGH if k in os.environ}
        env |= self.resolved_env(server)
        unset = [name for name in DEFAULT_INHERITED_ENV_VARS if name not in env]
        if self.sandbox == "bubblewrap":
            bwrap, *args = self._sandboxed(server, unset)
            return StdioServerParameters(command=bwrap, args=args, env=env)
        return StdioServerParameters(
            command=shutil.which("env") or "/usr/bin/env",
            args=[*(a for name in unset for a in ("-u", name)), self.command, *self.args],
            env=env,
            cwd=self.cwd,
        )

    def _sandboxed(self, server: str, unset: list[str]) -> list[str]:
        """The bwrap command line: the same sandbox as a shell command's (no network, a
        read-only host, a private /tmp, no capabilities; the child dies with the gateway),
        with no writable root — a local server is no safer than the code it runs."""
        sandbox = Sandbox(
            roots=(),
            hidden=(),
            readable=tuple(Path(path) for path in self._named_under_tmp()),
            bwrap=_bwrap(server),
        )
        return sandbox.command([self.command or "", *self.args], cwd=self.cwd, unset=unset)

    def _named_under_tmp(self) -> list[str]:
        """Paths under /tmp the command needs — its interpreter's installation, a script or a
        working directory it names — shown read-only through the private /tmp."""
        candidates = [shutil.which(self.command or "") or "", *self.args, self.cwd or ""]
        found = []
        for candidate in candidates:
            path = Path(candidate)
            if not candidate or not path.is_absolute() or not path.exists():
                continue
            # Not resolved: a virtual environment's interpreter is a symlink out of /tmp, but
            # the environment itself (its site-packages) is what must be visible.
            if path.parts[:2] != ("/", "tmp"):
                continue
            root = path.parent.parent if path.parent.name == "bin" else path
            found.append(str(root))
        return sorted(set(found))

    def resolved_env(self, server: str) -> dict[str, str]:
        """`env` with ``${NAME}`` references read from the gateway's environment."""
        return {k: _resolve(v, f"mcpServers.{server}.env.{k}") for k, v in self.env.items()}

    def resolved_headers(self, server: str) -> dict[str, str]:
        return {k: _resolve(v, f"mcpServers.{server}.headers.{k}") for k, v in self.headers.items()}

    def credentials(self, server: str) -> list[str]:
        """What every ``${NAME}`` in `env` and `headers` reads from the gateway's environment:
        the credentials this upstream is handed. Values written literally are configuration,
        not credentials (``LOG_LEVEL = "info"`` must not redact every "info")."""
        names = [
            match.group(1)
            for value in (*self.env.values(), *self.headers.values())
            for match in _REFERENCE.finditer(value)
        ]
        # An unset name is left to `resolved_env`/`resolved_headers`, which say how to fix it.
        return [os.environ[name] for name in names if name in os.environ]


def _bwrap(server: str) -> str:
    """The bwrap executable, or a `ConfigError` saying how to install it."""
    path = shutil.which("bwrap")
    if path is None:
        raise ConfigError(
            f"mcpServers.{server}.sandbox is 'bubblewrap' but the bwrap executable is not on "
            "PATH; install bubblewrap (apt-get install bubblewrap) or set sandbox = 'none'",
            key=f"mcpServers.{server}.sandbox",
            value="bubblewrap",
        )
    return path


def _resolve(value: str, key: str) -> str:
    def lookup(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(
                f"{key} refers to ${{{name}}}, which is not set in the gateway's environment; "
                f"export {name} or write the value into the config",
                key=key,
                value=value,
            )
        return os.environ[name]

    return _REFERENCE.sub(lookup, value)


def parse_upstreams(
    servers: Mapping[str, Any], *, section: str = "mcpServers"
) -> dict[str, UpstreamConfig]:
    """Validate a ``{name: entry}`` mapping; a mistake raises `ConfigError` naming the key
    (``mcpServers.github.url``) and the fix."""
    if not isinstance(servers, Mapping):
        raise ConfigError(
            f"{section} must be a mapping of server name to entry, not {type(servers).__name__}",
            key=section,
        )
    parsed = {}
    for name, entry in servers.items():
        try:
            parsed[str(name)] = UpstreamConfig.model_validate(entry)
        except ValidationError as exc:
            raise _config_error(f"{section}.{name}", entry, exc) from None
    return parsed


def _config_error(prefix: str, entry: Any, exc: ValidationError) -> ConfigError:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in (prefix, *first["loc"]))
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = (
            f"unknown key; an entry takes command, args, env, cwd, url, headers, namespace, "
            f"tools, scan, sandbox, timeout, call_timeout (got {first['loc'][-1]!r})"
        )
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return ConfigError(f"{where}: {message}{more}", key=where, value=first.get("input"))
