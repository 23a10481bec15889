"""The lint vocabulary: every rule's code and severity, a `Finding`, and the `LintConfig`.

Codes are stable, so CI configurations and ``--ignore`` lists keep meaning what they meant:
a retired check keeps its code unused. docs/lint.md lists the rules; a test keeps its table
equal to `RULES`. The hundreds group the checks: TK0 catalog, TK1 names,
TK2 descriptions, TK3 input schema, TK4 output, TK5 effects and runtime policy, TK6 version,
TK7 examples.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from toolkeeper.errors import ConfigError


class Severity(StrEnum):
    """Error: breaks safety or correctness. Warning: hurts tool choice or first-call success.
    Info: advice."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Rule:
    """One lint check: its stable code, how bad a violation is, what it means, the usual fix."""

    code: str
    severity: Severity
    title: str
    fix: str


_E, _W, _I = Severity.ERROR, Severity.WARNING, Severity.INFO
RULES: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        Rule(
            "TK001",
            _E,
            "a catalog file or entry could not be loaded",
            "fix the file as the message says; the other files still load",
        ),
        Rule(
            "TK002",
            _E,
            "two contracts share one id@version",
            "bump the version of the newer one, or rename one id",
        ),
        Rule(
            "TK003",
            _W,
            "the importer reported a problem with the upstream definition",
            "fix the upstream tool (or override the field) and import again",
        ),
        Rule(
            "TK004",
            _I,
            "imported tools start with the importer's cautious defaults (one note per catalog)",
            "review the tools, then declare their effects, version and timeout",
        ),
        Rule(
            "TK101",
            _W,
            "name does not state an action and an object",
            "name it verb_object, e.g. get_manuscript_metadata; git_create_branch, issue_read pass",
        ),
        Rule(
            "TK102",
            _W,
            "name is illegal for some model families (the adapter renames it)",
            "accept the rename, or set model_views.FAMILY.name",
        ),
        Rule("TK103", _E, "name is illegal for every model family", "use 1-64 of [A-Za-z0-9_-]"),
        Rule(
            "TK104",
            _E,
            "a model view's name is illegal for its family",
            "choose a name that family accepts",
        ),
        Rule(
            "TK105",
            _W,
            "model view keyed by an unknown family",
            "key views by openai, anthropic, gemini or mcp",
        ),
        Rule(
            "TK106",
            _W,
            "two tools claim one vendor name, so one is shown with a hash suffix",
            "rename one, or set model_views.FAMILY.name",
        ),
        Rule(
            "TK201",
            _W,
            "description is missing or too short to choose the tool by (and what else it lacks)",
            "say what the tool does, to which object, with what result; when to use it, and not",
        ),
        Rule(
            "TK202",
            _W,
            "nothing says when to use the tool",
            "set when_to_use (a function: a 'Use when:' docstring line)",
        ),
        Rule(
            "TK203",
            _W,
            "nothing says when not to use the tool",
            "set when_not_to_use, naming the tool to use instead (a function: 'Do not use when:')",
        ),
        Rule(
            "TK204",
            _W,
            "model description is over the token budget (--max-tokens)",
            "keep what picks the tool and makes the first call right",
        ),
        Rule(
            "TK301",
            _E,
            "input schema root is not an object",
            'wrap arguments in {"type": "object", "properties": ...}',
        ),
        Rule(
            "TK302",
            _W,
            "too many input properties (default 12)",
            "split the tool by task, or drop rarely used options",
        ),
        Rule(
            "TK303",
            _W,
            "input nested too deeply (default 2), or recursive",
            "lift nested fields to the top level",
        ),
        Rule(
            "TK304",
            _W,
            "root oneOf/anyOf: mutually exclusive modes in one tool",
            "one tool per mode, each with a flat schema",
        ),
        Rule(
            "TK305",
            _W,
            "a parameter (mode, action, operation…) switches between actions",
            "one narrow tool per action",
        ),
        Rule(
            "TK306",
            _W,
            "free-form parameter: an object without properties, or untyped",
            "declare its properties, or give it a type",
        ),
        Rule(
            "TK307", _W, "object accepts undeclared properties", 'set "additionalProperties": false'
        ),
        Rule(
            "TK308",
            _W,
            "parameter has no description",
            "describe meaning, unit and format in one line",
        ),
        Rule(
            "TK309",
            _E,
            "required names a property that is not declared",
            "declare the property or drop it from required",
        ),
        Rule(
            "TK310",
            _I,
            "string parameter lists its allowed values in prose",
            "declare them as an enum",
        ),
        Rule(
            "TK311",
            _I,
            "parameter name is cryptic (q, n, sg)",
            "use a self-describing name: query, limit",
        ),
        Rule("TK401", _I, "no output schema", "declare output_schema"),
        Rule(
            "TK402",
            _W,
            "a projected field is not in the output schema",
            "fix result_projection.fields",
        ),
        Rule(
            "TK403",
            _W,
            "summary template is malformed or names unknown fields",
            "fix result_projection.summary_template",
        ),
        Rule(
            "TK404",
            _I,
            "no summary template; the model gets a generic summary",
            "set result_projection.summary_template",
        ),
        Rule(
            "TK501",
            _E,
            "side effect not declared (treated as committing)",
            "set side_effect: none, reversible or committing",
        ),
        Rule(
            "TK502",
            _E,
            "committing tool does not declare idempotency",
            "set idempotency: keyed, natural or none",
        ),
        Rule("TK503", _W, "committing tool has no timeout of its own", "set timeout in seconds"),
        Rule(
            "TK504",
            _E,
            "automatic retries of a non-idempotent committing tool",
            "set retry.max_attempts: 1, or idempotency: keyed",
        ),
        Rule("TK505", _W, "committing tool has no verifier", "set verifier to a read-back check"),
        Rule("TK506", _I, "no timeout declared", "set timeout in seconds"),
        Rule(
            "TK507",
            _W,
            "preview names a tool that is not in the catalog",
            "add the preview tool, or fix the id",
        ),
        Rule("TK508", _I, "committing tool declares no write set", "set concurrency.write_set"),
        Rule(
            "TK509",
            _W,
            "side effect differs from the upstream's annotations",
            "review, then declare side_effect yourself",
        ),
        Rule(
            "TK601",
            _E,
            "a tool that changes the world has no explicit version",
            'set version: "1.0.0" (a function: @tool(version="1.0.0", ...))',
        ),
        Rule("TK701", _I, "no examples", "add one known-good call"),
    )
}
"""Every lint code, in the order docs/lint.md's table lists them."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One violation: where in which contract, what is wrong, and what to do about it."""

    code: str
    severity: Severity
    contract: str
    """The contract's ref (id@version), or the file a load problem came from."""
    path: str
    """JSON pointer into the contract, e.g. ``/input_schema/properties/mode``."""
    message: str
    fix: str
    source: str | None = None
    """Where the contract was loaded from, when it came from a catalog."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "contract": self.contract,
            "source": self.source,
            "path": self.path,
            "message": self.message,
            "fix": self.fix,
        }

    def with_source(self, source: str | None) -> Finding:
        return self if source is None else replace(self, source=source)


def finding(code: str, contract: str, path: str, message: str, fix: str) -> Finding:
    """A finding with the severity `RULES` gives its code."""
    return Finding(code, RULES[code].severity, contract, path, message, fix)


@dataclass(frozen=True, slots=True)
class LintConfig:
    """Budgets and code selection. `select` and `ignore` take codes or prefixes (``TK3``)."""

    max_description_tokens: int = 300
    max_properties: int = 12
    max_depth: int = 2
    min_description_words: int = 5
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for key in ("max_description_tokens", "max_properties", "max_depth"):
            value = getattr(self, key)
            if value < 1:
                raise ConfigError(f"{key} must be at least 1, got {value}", key=key, value=value)
        for key in ("select", "ignore"):
            for selector in getattr(self, key):
                if not any(code.startswith(selector.upper()) for code in RULES):
                    raise ConfigError(
                        f"{key}: {selector!r} matches no lint code; use a code like TK501 or a "
                        "prefix like TK5 (docs/lint.md lists the codes)",
                        key=key,
                        value=selector,
                    )

    def enabled(self, code: str) -> bool:
        return (not self.select or _matches(code, self.select)) and not self.ignores(code)

    def ignores(self, code: str) -> bool:
        """Whether `--ignore` names `code` (or a prefix of it)."""
        return _matches(code, self.ignore)


def _matches(code: str, selectors: tuple[str, ...]) -> bool:
    return any(code.startswith(selector.upper()) for selector in selectors)


def markdown_table() -> str:
    """The rule table of docs/lint.md, generated from `RULES` (a test keeps the doc equal):
    ``python -c "from toolkeeper.lint.rules import markdown_table; print(markdown_table())"``.
    """
    rows = [
        f"| {r.code} | {r.severity.value} | {r.title} | {r.fix.replace('|', '&#124;')} |"
        for r in RULES.values()
    ]
    return "\n".join(["| code | severity | what | fix |", "| --- | --- | --- | --- |", *rows])
