"""The gateway configuration file (TOML, YAML or JSON) and its validation.

Every key is checked by a pydantic model with ``extra="forbid"``; a mistake becomes one
`ConfigError` that names each bad key by its dotted path, shows the value (never a token) and
says how to fix it. Every relative path (``home``, ``policies``, a ``token_file``, an
``mcpServers`` file, an upstream's ``cwd``, the modules of ``tools``) is resolved against the
configuration file's directory, so ``toolkeeper serve /srv/gw/gateway.toml`` means the same
gateway from any working directory, and ``toolkeeper ledger list --config /srv/gw/gateway.toml``
finds its ledger.

    home = ".toolkeeper"                 # ledger, artifacts and tool state (beside this file)
    ledger_dsn_env = "TOOLKEEPER_LEDGER_DSN"  # optional: a PostgreSQL ledger shared by replicas
    tools = ["manuscripts"]              # modules of @toolkeeper.tool functions
    policies = ["policy.cedar"]          # Cedar files, on top of the shipped defaults
    stdio_principal = "editor"           # who a stdio client acts as
    call_timeout = 60                    # seconds a tool call may take when nothing else says

    [principals.editor]
    tenant = "press"
    capabilities = ["manuscripts:read", "manuscripts:write"]
    token_env = "EDITOR_TOKEN"           # or token_file = "editor.token", or token = "..."

    [http]
    host = "127.0.0.1"
    port = 8765

    [ledger]                             # optional; these are the defaults
    reconcile_interval = 300             # seconds between reconciliation passes (0: at start only)
    foreign_intent_after = 3600          # an intent another host wrote is abandoned after this
    argument_threshold = 65536           # recorded arguments above this many bytes: an artifact

    [ledger.retention]                   # optional: prune settled rows (none by default)
    max_age = "90d"
    max_rows = 5000000
    [limits]                             # optional; the defaults, see docs/limits.md
    argument_bytes = 1048576
    message_bytes = 2097152

    [telemetry]                          # optional (the otel extra); docs/observability.md
    otlp = true                          # spans and metrics over OTLP (OTEL_EXPORTER_OTLP_*)
    prometheus = "127.0.0.1:9464"        # serve /metrics for Prometheus

    [shell]                              # optional: the governed shell tool
    roots = ["repo"]                     # its only writable directories

    [mcpServers.search]                  # or mcpServers = "servers.json"; or [upstreams.search]
    command = "python"
    args = ["search_server.py"]
"""

from __future__ import annotations

import ipaddress
import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from toolkeeper.errors import ConfigError
from toolkeeper.gateway.config.errors import config_error
from toolkeeper.gateway.limits import DEFAULT_MESSAGE_BYTES
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.ledger.retention import RetentionPolicy, parse_duration
from toolkeeper.runtime.harness import ARGUMENT_THRESHOLD
from toolkeeper.runtime.invocation import Principal
from toolkeeper.runtime.limits import DEFAULT_LIMITS, MAX_ARGUMENT_DEPTH, Limits
from toolkeeper.runtime.reconciliation import FOREIGN_INTENT_AFTER
from toolkeeper.telemetry.exporting import TelemetryConfig

CALL_TIMEOUT = 60.0
"""The gateway's default seconds per tool call: what MCP clients commonly wait before they give
up on a request (the library's harness default is longer: there the caller is the program)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PrincipalConfig(_Strict):
    """One principal: who acts, in which tenant, with which capabilities, and (for HTTP) the
    bearer token that proves it."""

    tenant: str = "default"
    capabilities: list[str] = Field(default_factory=list)
    kind: str = "agent"
    token: SecretStr | None = None
    token_env: str | None = Field(
        default=None, description="Name of the environment variable holding the token."
    )
    token_file: Path | None = Field(
        default=None,
        description="A file holding the token (relative to the configuration file); "
        "`toolkeeper init` writes one readable by its owner only.",
    )

    @model_validator(mode="after")
    def _one_token_source(self) -> PrincipalConfig:
        sources = [self.token, self.token_env, self.token_file]
        if sum(source is not None for source in sources) > 1:
            raise ValueError(
                "set one of token, token_env and token_file, not several; prefer token_env or "
                "token_file so the token stays out of this file"
            )
        return self

    def resolve_token(self, key: str) -> str | None:
        """The bearer token, read from the environment when `token_env` names a variable and
        from the file `token_file` names."""
        if self.token is not None:
            return self.token.get_secret_value()
        if self.token_file is not None:
            return _read_token(self.token_file, key)
        if self.token_env is None:
            return None
        value = os.environ.get(self.token_env)
        if not value:
            raise ConfigError(
                f"{key}.token_env names ${self.token_env}, which is not set; export it "
                f"(export {self.token_env}=...) or remove token_env",
                key=f"{key}.token_env",
                value=self.token_env,
            )
        return value


def _read_token(path: Path, key: str) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(
            f"{key}.token_file: cannot read {path}: {exc.strerror}; write the principal's "
            "token there (one line) or remove token_file",
            key=f"{key}.token_file",
            value=str(path),
        ) from None
    if not token:
        raise ConfigError(
            f"{key}.token_file: {path} is empty; write the principal's token there",
            key=f"{key}.token_file",
            value=str(path),
        )
    return token


class OAuthConfig(_Strict):
    """OAuth 2.1 resource-server mode: tokens come from an authorization server and are checked
    by a `TokenVerifier` the deployment provides."""

    issuer_url: AnyHttpUrl
    resource_url: AnyHttpUrl = Field(description="This gateway's URL, the tokens' audience.")
    verifier: str = Field(
        description="Module path of a TokenVerifier instance, e.g. 'mycompany.auth:verifier'."
    )
    required_scopes: list[str] = Field(default_factory=list)
    check_audience: bool = True


class HttpConfig(_Strict):
    """Where and how `toolkeeper serve --http` listens."""

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    path: str = "/mcp"
    auth: Literal["token", "oauth", "none"] = "token"
    principal: str | None = Field(
        default=None, description="Who every request acts as when auth is 'none'."
    )
    stateless: bool = Field(
        default=False, description="Serve 2025 clients without sessions (no list_changed)."
    )
    json_response: bool = Field(
        default=True,
        description=(
            "Answer each POST with one JSON body: a call's stream carries nothing but its "
            "answer, and JSON costs less than SSE. false streams SSE, with keep-alives for "
            "calls longer than a proxy's idle timeout."
        ),
    )
    oauth: OAuthConfig | None = None

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"must start with '/', e.g. '/{value}'")
        return value

    @model_validator(mode="after")
    def _auth_fits(self) -> HttpConfig:
        if self.auth == "oauth" and self.oauth is None:
            raise ValueError("auth = 'oauth' needs an [http.oauth] table (issuer_url, ...)")
        if self.auth != "oauth" and self.oauth is not None:
            raise ValueError("[http.oauth] is set but auth is not 'oauth'; set auth = 'oauth'")
        if self.auth == "none":
            if self.principal is None:
                raise ValueError("auth = 'none' needs principal = '<id>': who requests act as")
            if not is_loopback(self.host):
                raise ValueError(
                    f"auth = 'none' on host {self.host!r} would serve every tool to anyone who "
                    "can reach it; use 127.0.0.1, or give principals tokens and keep auth = "
                    "'token'"
                )
        elif self.principal is not None:
            raise ValueError("principal is only used with auth = 'none'; remove it")
        return self


class RetentionConfig(_Strict):
    """Which settled rows the gateway prunes on its reconciliation interval. Rows in flight,
    with an unknown effect or waiting for approval are never pruned."""

    max_age: str | None = Field(
        default=None, description="Prune settled rows older than this: '90d', '12h'."
    )
    max_rows: int | None = Field(default=None, ge=0, description="Keep at most this many rows.")

    @field_validator("max_age")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None and parse_duration(value) is None:
            raise ValueError(f"{value!r} is not a duration; write e.g. '90d', '12h' or '30m'")
        return value

    def policy(self) -> RetentionPolicy:
        return RetentionPolicy(
            max_age=parse_duration(self.max_age) if self.max_age is not None else None,
            max_rows=self.max_rows,
        )


class LedgerConfig(_Strict):
    """Reconciliation, retention and row size of the gateway's ledger."""

    reconcile_interval: float = Field(
        default=300.0,
        ge=0,
        description="Seconds between reconciliation (and retention) passes; 0: at start only.",
    )
    foreign_intent_after: float = Field(
        default=FOREIGN_INTENT_AFTER,
        ge=0,
        description="Seconds after which an intent another host wrote counts as abandoned.",
    )
    argument_threshold: int = Field(
        default=ARGUMENT_THRESHOLD,
        ge=0,
        description="Recorded arguments above this many bytes are stored as an artifact.",
    )
    retention: RetentionConfig = Field(default_factory=RetentionConfig)


class LimitsConfig(_Strict):
    """How large a call may be (docs/limits.md): the harness's `Limits`, plus the largest
    JSON-RPC message the transports read."""

    argument_bytes: int = Field(default=DEFAULT_LIMITS.argument_bytes, ge=1)
    argument_depth: int = Field(default=DEFAULT_LIMITS.argument_depth, ge=1, le=MAX_ARGUMENT_DEPTH)
    argument_items: int = Field(default=DEFAULT_LIMITS.argument_items, ge=1)
    result_bytes: int = Field(default=DEFAULT_LIMITS.result_bytes, ge=1)
    offload_bytes: int = Field(default=DEFAULT_LIMITS.offload_bytes, ge=1)
    message_bytes: int = Field(
        default=DEFAULT_MESSAGE_BYTES,
        ge=1,
        description="The largest HTTP request body or stdio line read; larger ones are refused "
        "unparsed.",
    )

    @model_validator(mode="after")
    def _room_for_arguments(self) -> LimitsConfig:
        if self.message_bytes <= self.argument_bytes:
            raise ValueError(
                f"message_bytes ({self.message_bytes}) must be larger than argument_bytes "
                f"({self.argument_bytes}), so that a call over the argument limit still parses "
                "and is answered with a tool error; e.g. message_bytes = "
                f"{2 * self.argument_bytes}"
            )
        return self

    def harness_limits(self) -> Limits:
        return Limits(**self.model_dump(exclude={"message_bytes"}))


class ShellConfig(_Strict):
    """The governed `shell` tool (docs/shell-execution.md): ``shell = { roots = ["repo"] }``.
    Relative paths are beside the configuration file."""

    roots: list[Path] = Field(min_length=1)
    """The only directories a command may write; the first is the default working one."""
    timeout: float = Field(default=60.0, gt=0)
    network: bool = False
    policies: list[Path] = Field(default_factory=list)
    """Shell policy files (Cedar on programs, subcommands, paths), after the shipped
    read-only policy."""
    rules: list[Path] = Field(default_factory=list)
    """Rule table files extending the shipped one."""
    environment: dict[str, str] = Field(default_factory=dict)
    hidden: list[Path] | None = None
    """Paths commands see as empty directories (default: the user's home)."""
    unsandboxed_fallback: bool = False
    """Run commands without bubblewrap when it cannot start. Off: nothing runs then."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class GatewayConfig(_Strict):
    """A whole gateway: its state directory, tools, policies, principals, upstreams, HTTP,
    ledger upkeep and telemetry."""

    name: str = "toolkeeper"
    home: Path = Path(".toolkeeper")
    ledger_dsn_env: str | None = None
    """An environment variable holding a PostgreSQL DSN (it may carry a password, so the file
    names the variable, not the DSN). Unset: the SQLite ledger in `home`."""
    tools: list[str] = Field(default_factory=list)
    policies: list[Path] = Field(default_factory=list)
    principals: dict[str, PrincipalConfig] = Field(default_factory=dict)
    stdio_principal: str | None = None
    call_timeout: float = Field(
        default=CALL_TIMEOUT,
        gt=0,
        description=(
            "Seconds one call of a tool may take when neither its contract nor its upstream's "
            "call_timeout sets one."
        ),
    )
    upstreams: dict[str, UpstreamConfig] = Field(default_factory=dict)
    code_mode: bool = Field(
        default=False,
        description=(
            "Serve the run_code tool: a client sends a Python program whose every tool call "
            "is governed like a direct one (docs/code-mode.md; needs the codemode extra)."
        ),
    )
    code_tiers: dict[str, Literal["monty", "cpython"]] = Field(
        default_factory=dict,
        description=(
            "The sandbox tier each principal's programs run in when run_code names none: "
            "principal id (or '*' for everyone else) to 'monty' or 'cpython'."
        ),
    )
    code_spare: bool = Field(
        default=True,
        description=(
            "Keep one CPython-tier sandbox started ahead, so a program in that tier does not "
            "wait for bubblewrap and the interpreter to start (docs/code-mode-cpython.md)."
        ),
    )
    discovery: Literal["all", "search"] = Field(
        default="all",
        description=(
            "How tools are listed: 'all' lists every tool the principal may see; 'search' "
            "lists always_loaded plus search_tools and load_tools, and a session's loaded "
            "tools from the load on (docs/discovery.md)."
        ),
    )
    always_loaded: list[str] = Field(
        default_factory=list, description="Tool ids listed from the start with discovery."
    )
    http: HttpConfig = Field(default_factory=HttpConfig)
    ledger: LedgerConfig = Field(default_factory=LedgerConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    shell: ShellConfig | None = None
    base_dir: Path = Field(default=Path("."), exclude=True)
    """The configuration file's directory, which relative `tools` and `policies` live in."""

    @model_validator(mode="before")
    @classmethod
    def _paths_beside_file(cls, data: Any) -> Any:
        """A relative `home` or policy file means one beside the configuration file, not in
        whatever directory toolkeeper happens to run from. Values of the wrong type are left
        for field validation to report."""
        if not isinstance(data, dict) or "base_dir" not in data:
            return data
        base = Path(data["base_dir"])
        data = dict(data)
        home = data.get("home", ".toolkeeper")
        if isinstance(home, str | Path):
            data["home"] = base / home  # an absolute `home` stays itself
        policies = data.get("policies")
        if isinstance(policies, list):
            data["policies"] = [base / p if isinstance(p, str | Path) else p for p in policies]
        shell = data.get("shell")
        if isinstance(shell, dict):
            data["shell"] = _shell_paths_beside(shell, base)
        principals = data.get("principals")
        if isinstance(principals, dict):
            data["principals"] = {
                name: _token_file_beside(entry, base) for name, entry in principals.items()
            }
        return data

    @model_validator(mode="after")
    def _upstream_cwd_beside_file(self) -> GatewayConfig:
        """A relative upstream ``cwd`` means the configuration file's directory, like every
        other relative path here (the standard entry leaves it to the launching host)."""
        for name, upstream in self.upstreams.items():
            if upstream.cwd is not None and not Path(upstream.cwd).is_absolute():
                cwd = str(self.base_dir / upstream.cwd)
                self.upstreams[name] = upstream.model_copy(update={"cwd": cwd})
        return self

    @field_validator("stdio_principal")
    @classmethod
    def _stdio_principal_exists(cls, name: str | None, info: ValidationInfo) -> str | None:
        return _known_principal(name, info)

    @field_validator("http")
    @classmethod
    def _http_principal_exists(cls, http: HttpConfig, info: ValidationInfo) -> HttpConfig:
        _known_principal(http.principal, info)
        return http

    def ledger_dsn(self) -> str | None:
        """The PostgreSQL DSN from `ledger_dsn_env`, or None for the embedded SQLite ledger."""
        if self.ledger_dsn_env is None:
            return None
        dsn = os.environ.get(self.ledger_dsn_env)
        if not dsn:
            raise ConfigError(
                f"ledger_dsn_env = {self.ledger_dsn_env!r}, but that environment variable is "
                "unset or empty; export it (postgresql://user@host:5432/db) or remove the key "
                "to use the SQLite ledger in home",
                key="ledger_dsn_env",
                value=self.ledger_dsn_env,
            )
        return dsn

    def principal(self, name: str) -> Principal:
        entry = self.principals[name]
        return Principal(
            id=name,
            tenant=entry.tenant,
            capabilities=frozenset(entry.capabilities),
            kind=entry.kind,
        )

    def tokens(self) -> dict[str, Principal]:
        """Bearer token → principal, for every principal that has one; a token shared by two
        principals is refused, since nobody could tell which one a request acts as."""
        tokens: dict[str, Principal] = {}
        for name, entry in self.principals.items():
            token = entry.resolve_token(f"principals.{name}")
            if token is None:
                continue
            if token in tokens:
                raise ConfigError(
                    f"principals.{name} and principals.{tokens[token].id} have the same token; "
                    "give each principal its own",
                    key=f"principals.{name}.token",
                )
            tokens[token] = self.principal(name)
        return tokens

    def resolve(self, path: Path) -> Path:
        """`path` relative to the configuration file's directory."""
        return path if path.is_absolute() else self.base_dir / path


def _shell_paths_beside(shell: dict[str, Any], base: Path) -> dict[str, Any]:
    shell = dict(shell)
    for key in ("roots", "policies", "rules", "hidden"):
        value = shell.get(key)
        if isinstance(value, list):
            shell[key] = [base / p if isinstance(p, str | Path) else p for p in value]
    return shell


def _token_file_beside(entry: Any, base: Path) -> Any:
    if isinstance(entry, dict) and isinstance(entry.get("token_file"), str | Path):
        return {**entry, "token_file": base / entry["token_file"]}
    return entry


def _known_principal(name: str | None, info: ValidationInfo) -> str | None:
    if "principals" not in info.data:
        return name  # [principals] itself is invalid and reported; nothing to check against
    principals = info.data["principals"]
    if name is not None and name not in principals:
        known = ", ".join(sorted(principals)) or "none are defined"
        raise ValueError(
            f"names principal {name!r}, which is not under [principals] (known: {known}); "
            f"add [principals.{name}] or name a known one"
        )
    return name


def _standard_servers(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """Move the standard ``mcpServers`` block (inline, or a path to its JSON file) to
    ``upstreams``, where `GatewayConfig` validates it."""
    if "mcpServers" not in data:
        return data
    data = dict(data)
    servers = data.pop("mcpServers")
    if "upstreams" in data:
        raise ConfigError(
            "both mcpServers and upstreams are set; keep one of them", key="mcpServers"
        )
    if isinstance(servers, str):
        servers = _read_servers_file(base_dir / servers, servers)
    data["upstreams"] = servers
    return data


def _read_servers_file(path: Path, value: str) -> Any:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"mcpServers = {value!r}: cannot read {path}: {exc.strerror}; fix: give the path "
            "of a JSON file with an mcpServers object, relative to this configuration file",
            key="mcpServers",
            value=value,
        ) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"mcpServers = {value!r}: {path} is not valid JSON (line {exc.lineno}): {exc.msg}",
            key="mcpServers",
            value=value,
        ) from None
    if isinstance(data, dict) and isinstance(data.get("mcpServers"), dict):
        return data["mcpServers"]
    return data


def load_config(path: str | Path) -> GatewayConfig:
    """Read and validate a gateway configuration file (.toml, .yaml/.yml or .json)."""
    path = Path(path)
    data = _parse(path)
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path} must hold a table of settings at the top level, not {type(data).__name__}",
            key="(file)",
        )
    base_dir = path.resolve().parent
    servers_key = "mcpServers" if "mcpServers" in data else "upstreams"
    data = _standard_servers(data, base_dir)
    try:
        return GatewayConfig.model_validate({**data, "base_dir": base_dir})
    except ValidationError as exc:
        raise config_error(path, exc, GatewayConfig, servers_key=servers_key) from None


def _parse(path: Path) -> Any:
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml", ".json"):
        raise ConfigError(
            f"{path}: unsupported configuration type {suffix!r}; use .toml, .yaml or .json",
            key="(file)",
            value=str(path),
        )
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read configuration {path}: {exc.strerror}", key="(file)", value=str(path)
        ) from None
    try:
        if suffix == ".toml":
            return tomllib.loads(text)
        if suffix == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"{path} is not valid {suffix[1:].upper()}: {exc}", key="(file)", value=str(path)
        ) from None
