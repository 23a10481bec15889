"""The canonical action contract (`ToolContract`) and its policy parts.

A contract is protocol-neutral and stable; what a model sees (`ModelView`) may vary per model
family, the contract does not (seed 000 §1, §15). Everything the runtime needs to govern a call
lives here: effect class, idempotency, capabilities, classification, timeout, retry,
concurrency, projection, verifier, preview and credential names.

Contracts load from Python, JSON, YAML and TOML and round-trip losslessly: `None` is the
default of every optional field, so a TOML file (which has no null) reads back identically.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import tomllib
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import jsonschema
import jsonschema_rs
import tomli_w
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toolkeeper.errors import ContractError, ExampleError
from toolkeeper.runtime.envelope import ErrorCategory
from toolkeeper.schema.document import canonical_json

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
SemverKey = tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]
"""A sort key whose order is semver precedence (`semver_key`)."""


def semver_key(version: str | None) -> SemverKey:
    """Ascending semver 2.0.0 precedence of `version` (None counts as 0.0.0); the one ordering
    of versions in toolkeeper. A release outranks its pre-releases; pre-release identifiers
    compare left to right, numeric ones numerically and below alphanumeric ones, and a shorter
    run of equal identifiers ranks lower (`1.0.0-rc.2` < `1.0.0-rc.10` < `1.0.0`). Build
    metadata is ignored, as semver says."""
    match = SEMVER.match(version or "0.0.0")
    if match is None:
        raise ValueError(f"{version!r} is not semver; write it as MAJOR.MINOR.PATCH")
    major, minor, patch, pre = match.groups()
    identifiers = (
        tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in pre.split("."))
        if pre
        else ()
    )
    return (int(major), int(minor), int(patch), 0 if pre else 1, identifiers)


CONTRACT_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,199}$")
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class SideEffect(StrEnum):
    """How far a call can change the world."""

    NONE = "none"
    REVERSIBLE = "reversible"
    COMMITTING = "committing"


class Idempotency(StrEnum):
    """Whether repeating a call is harmless."""

    NATURAL = "natural"
    KEYED = "keyed"
    NONE = "none"


class Classification(StrEnum):
    """Data classification of inputs and outputs, from least to most sensitive."""

    PUBLIC = "public"
    INTERNAL = "internal"
    CONFIDENTIAL = "confidential"
    SECRET = "secret"


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetryPolicy(_Part):
    """How the dispatcher may retry. Retries also need an idempotent contract or a proven
    non-effect; this policy alone never licenses retrying an unknown write."""

    max_attempts: int = Field(default=1, ge=1, le=20)
    backoff_initial: float = Field(default=0.1, ge=0, description="Seconds before attempt 2.")
    backoff_multiplier: float = Field(default=2.0, ge=1)
    backoff_max: float = Field(default=5.0, ge=0)
    retryable_categories: tuple[ErrorCategory, ...] = (
        ErrorCategory.UNAVAILABLE,
        ErrorCategory.TIMEOUT,
        ErrorCategory.RATE_LIMITED,
    )

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        return min(
            self.backoff_max, self.backoff_initial * self.backoff_multiplier ** (attempt - 1)
        )


class ConcurrencyPolicy(_Part):
    """What a call reads and writes, for scheduling. Templates name argument fields in braces,
    e.g. ``"manuscript:{manuscript_id}"``."""

    read_set: tuple[str, ...] = ()
    write_set: tuple[str, ...] = ()
    concurrency_group: str | None = None
    ordering: Literal["any", "in_order"] = "any"


class ResultProjection(_Part):
    """What of a result reaches the model; the rest goes to the artifact store."""

    fields: tuple[str, ...] | None = Field(
        default=None, description="Top-level output fields kept for the model; None keeps all."
    )
    summary_template: str | None = Field(
        default=None, description="str.format template over the output, e.g. 'Found {count}'."
    )
    artifact_threshold: int = Field(
        default=16_384, ge=0, description="Structured content over this many bytes is stored aside."
    )


class DataClassification(_Part):
    """Classification of inputs and outputs; per-field overrides are keyed by JSON pointer."""

    inputs: Classification = Classification.INTERNAL
    outputs: Classification = Classification.INTERNAL
    fields: dict[str, Classification] = Field(default_factory=dict)


class ModelView(_Part):
    """The model-facing surface of a contract for one model family."""

    name: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] | None = None


class ContractExample(_Part):
    """A known-good call, validated against the input schema when the contract loads."""

    arguments: dict[str, Any]
    description: str | None = None


_DIGEST_EXCLUDE = {"implementation_digest", "import_warnings"}


class ToolContract(BaseModel):
    """The canonical, protocol-neutral contract of one tool at one version."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="Stable tool id; the default model-facing name.")
    version: str | None = Field(default=None, description="Explicit semver, e.g. '1.2.0'.")
    description: str
    when_to_use: str | None = None
    when_not_to_use: str | None = None
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}, "additionalProperties": False}
    )
    output_schema: dict[str, Any] | None = None
    side_effect: SideEffect | None = Field(
        default=None, description="Undeclared is treated as committing."
    )
    open_world: bool = False
    idempotency: Idempotency | None = Field(
        default=None, description="Undeclared is treated as none."
    )
    required_capabilities: tuple[str, ...] = ()
    data_classification: DataClassification = Field(default_factory=DataClassification)
    timeout: float | None = Field(default=None, gt=0, description="Seconds.")
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    concurrency: ConcurrencyPolicy = Field(default_factory=ConcurrencyPolicy)
    result_projection: ResultProjection = Field(default_factory=ResultProjection)
    verifier: str | None = Field(default=None, description="Name of a read-back verifier.")
    preview: str | None = Field(default=None, description="Id of the paired preview tool.")
    resource_version: str | None = Field(
        default=None, description="Name of a reader of the target's resource version."
    )
    credentials: tuple[str, ...] = ()
    examples: tuple[ContractExample, ...] = ()
    model_views: dict[str, ModelView] = Field(default_factory=dict)
    annotations: dict[str, Any] | None = Field(
        default=None, description="Upstream hints (MCP annotations); never trusted for policy."
    )
    implementation_digest: str | None = None
    import_warnings: tuple[str, ...] = ()

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not CONTRACT_ID.match(value):
            raise ValueError(
                f"tool id {value!r} must be 1-200 characters of letters, digits, '_', '.', ':', "
                "'/', '-', starting with a letter, digit or '_'"
            )
        return value

    @field_validator("version")
    @classmethod
    def _check_version(cls, value: str | None) -> str | None:
        if value is not None and not SEMVER.match(value):
            raise ValueError(f"version {value!r} is not semver; write it as MAJOR.MINOR.PATCH")
        return value

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _check_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None or _fast_schema_check(value):
            return value
        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "(root)"
            raise ValueError(f"not a valid JSON Schema 2020-12 at {where}: {exc.message}") from None
        return value

    @model_validator(mode="after")
    def _check_examples(self) -> ToolContract:
        validator = jsonschema.Draft202012Validator(self.input_schema)
        for index, example in enumerate(self.examples):
            errors = sorted(validator.iter_errors(example.arguments), key=lambda e: list(e.path))
            if errors:
                first = errors[0]
                where = "/" + "/".join(str(p) for p in first.path)
                raise ExampleError(
                    f"contract {self.id!r}: examples[{index}] does not match input_schema at "
                    f"{where}: {first.message}. Fix the example or the schema.",
                    contract_id=self.id,
                    field=f"examples/{index}",
                )
        return self

    # -- derived facts ------------------------------------------------------------------

    @property
    def ref(self) -> str:
        """`id@version`, the registry key and the name the ledger records."""
        return f"{self.id}@{self.version or '0.0.0'}"

    @property
    def effective_side_effect(self) -> SideEffect:
        """Undeclared side effects count as committing: deny or ask when unsure."""
        return self.side_effect or SideEffect.COMMITTING

    @property
    def effective_idempotency(self) -> Idempotency:
        return self.idempotency or Idempotency.NONE

    @property
    def is_read_only(self) -> bool:
        return self.effective_side_effect is SideEffect.NONE

    @property
    def is_idempotent(self) -> bool:
        return self.effective_idempotency in (Idempotency.NATURAL, Idempotency.KEYED)

    def content_digest(self) -> str:
        """sha256 over the canonical JSON of the contract's content (not its digests)."""
        return self._content_digest

    @cached_property
    def _content_digest(self) -> str:
        # Cached: the pipeline reads the digest several times per call, and the contract is
        # frozen, so its content cannot change under the cache.
        data = self.model_dump(mode="json", exclude=_DIGEST_EXCLUDE)
        # surrogatepass: a lone surrogate in a schema (a JSON escape can hold one) still gets
        # a digest; valid text encodes as UTF-8 either way, so no other digest changes.
        text = canonical_json(data).encode("utf-8", "surrogatepass")
        return "sha256:" + hashlib.sha256(text).hexdigest()

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        if update:
            copied.__dict__.pop("_content_digest", None)  # the content changed
        return copied

    def digest(self) -> str:
        """The implementation digest when known, else the content digest."""
        return self.implementation_digest or self.content_digest()

    def view(self, family: str) -> ModelView:
        """The model view for `family`, falling back to the contract's own surface."""
        override = self.model_views.get(family, ModelView())
        return ModelView(
            name=override.name or self.id,
            description=override.description or self.model_description(),
            input_schema=override.input_schema or self.input_schema,
        )

    def model_description(self) -> str:
        """Description plus when-to-use and when-not-to-use, as a model should read it."""
        parts = [self.description.strip()]
        if self.when_to_use:
            parts.append(f"Use when: {self.when_to_use.strip()}")
        if self.when_not_to_use:
            parts.append(f"Do not use when: {self.when_not_to_use.strip()}")
        return "\n".join(parts)

    # -- serialization ------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict without null fields (TOML has no null; defaults restore them)."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolContract:
        """Build a contract from plain data; errors name the contract, field and fix."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise _contract_error(data, exc) from None

    @classmethod
    def load(cls, path: str | Path) -> ToolContract:
        """Load one contract from a .json, .yaml/.yml or .toml file."""
        return cls.from_dict(read_data_file(Path(path)))

    # -- imports from formats in the wild (see toolkeeper.importers.formats) -------------------

    @classmethod
    def from_mcp_tool(cls, tool: dict[str, Any], **overrides: Any) -> ToolContract:
        from toolkeeper.importers.formats import from_mcp_tool

        return from_mcp_tool(tool, **overrides)

    @classmethod
    def from_openai_function(cls, tool: dict[str, Any], **overrides: Any) -> ToolContract:
        from toolkeeper.importers.formats import from_openai_function

        return from_openai_function(tool, **overrides)

    @classmethod
    def from_anthropic_tool(cls, tool: dict[str, Any], **overrides: Any) -> ToolContract:
        from toolkeeper.importers.formats import from_anthropic_tool

        return from_anthropic_tool(tool, **overrides)

    @classmethod
    def from_bfcl_function(cls, doc: dict[str, Any], **overrides: Any) -> ToolContract:
        from toolkeeper.importers.formats import from_bfcl_function

        return from_bfcl_function(doc, **overrides)

    @classmethod
    def from_function(cls, fn: Callable[..., Any], **options: Any) -> ToolContract:
        from toolkeeper.contract.functions import contract_from_function

        return contract_from_function(fn, **options)


def _fast_schema_check(schema: dict[str, Any]) -> bool:
    """True when the Rust meta-schema check alone settles validity (~1000× cheaper than
    `check_schema`, which loading a large catalog would otherwise spend its time in). Patterns
    are left to `check_schema`, the only check that also compiles them as regexes."""
    try:
        return jsonschema_rs.meta.is_valid(schema) and "pattern" not in json.dumps(schema)
    except (ValueError, TypeError):
        return False


def read_data_file(path: Path) -> Any:
    """Parse a JSON, YAML or TOML file by its suffix; errors name the file and the fix."""
    suffix = path.suffix.lower()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ContractError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        if suffix == ".json":
            return json.loads(text)
        if suffix in (".yaml", ".yml"):
            return yaml.safe_load(text)
        if suffix == ".toml":
            return tomllib.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        raise ContractError(f"{path} is not valid {suffix[1:].upper()}: {exc}") from exc
    raise ContractError(f"{path}: unsupported file type {suffix!r}; use .json, .yaml or .toml")


def _known_fields(loc: tuple[Any, ...]) -> list[str]:
    """Field names valid where an unknown field was found (top level or a policy part)."""
    model: Any = ToolContract
    for part in loc[:-1]:
        field = model.model_fields.get(str(part)) if hasattr(model, "model_fields") else None
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


def _contract_error(data: Any, exc: ValidationError) -> ContractError:
    contract_id = data.get("id") if isinstance(data, dict) else None
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(contract)"
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = f"unknown field {err['loc'][-1]!r}"
            close = difflib.get_close_matches(str(err["loc"][-1]), _known_fields(err["loc"]), 1)
            message += f"; did you mean {close[0]!r}?" if close else "; remove it"
        problems.append(f"{where}: {message}")
    first_field = ".".join(str(p) for p in exc.errors()[0]["loc"]) if exc.errors() else None
    name = repr(contract_id) if contract_id else "(no id)"
    return ContractError(
        f"invalid tool contract {name}: " + "; ".join(problems),
        contract_id=contract_id,
        field=first_field,
    )
