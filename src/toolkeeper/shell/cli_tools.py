"""Narrow tools over one CLI invocation: ``git_commit(message)`` instead of raw shell.

A business action (seed 000 §8, layer L4) should not be a shell string the model writes:
``harness.register_cli("git_commit", argv=["git", "commit", "-m", "{message}"], cwd=repo)``
declares a contract whose only freedom is its typed parameters. Each ``{name}`` element of
the template is replaced by the argument as one whole argv element — never through a shell,
so no quoting, globbing, substitution or second command can come of it — and the command
runs in the same sandbox as the shell tool, with the same result. The contract's effect is
declared by whoever registers it, like any contract's.

Option injection (``git fetch --upload-pack=…`` style, a value read as an option): a
parameter with the default schema may not start with ``-`` unless the template puts a
``--`` before it; the schema says so, so the model is told at validation, with the fix. A
registrant who gives a parameter its own schema decides for it (``-m {message}`` may take
``"--amend"`` as a message: git reads the word after ``-m`` as its value).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkeeper.contract.model import (
    Idempotency,
    ResultProjection,
    RetryPolicy,
    SideEffect,
    ToolContract,
)
from toolkeeper.errors import ConfigError
from toolkeeper.executors.sandbox import ResourceLimits
from toolkeeper.runtime.context import ToolContext
from toolkeeper.shell.execution import GRACE, SandboxedCommand, sandbox_for, spares_for
from toolkeeper.shell.results import OUTPUT_SCHEMA

if TYPE_CHECKING:
    from toolkeeper.runtime.harness import Harness

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
NOT_AN_OPTION = "^(?!-)"
"""The pattern a parameter in an operand position must match: it cannot start with '-'."""


class CliTemplate:
    """An argv template: literal elements and whole-element ``{name}`` placeholders."""

    def __init__(self, argv: Sequence[str]) -> None:
        if not argv or _PLACEHOLDER.fullmatch(argv[0]):
            raise ConfigError(
                f"argv {list(argv)!r} must start with a literal program name",
                key="argv",
                value=list(argv),
            )
        self.argv = tuple(argv)
        self.parameters: dict[str, bool] = {}  # name → may start with '-'
        for index, element in enumerate(self.argv):
            match = _PLACEHOLDER.fullmatch(element)
            if match is None:
                if "{" in element or "}" in element:
                    raise ConfigError(
                        f"argv element {element!r} mixes text and a placeholder; a parameter "
                        "must be a whole element, e.g. ['--author', '{author}']",
                        key="argv",
                        value=element,
                    )
                continue
            # After a "--" no program reads an option; elsewhere a leading dash could be one.
            after_separator = "--" in self.argv[:index]
            name = match.group(1)
            self.parameters[name] = self.parameters.get(name, True) and after_separator

    def fill(self, arguments: Mapping[str, Any]) -> list[str]:
        """The argv with each placeholder replaced by its argument, as one element."""
        out = []
        for element in self.argv:
            match = _PLACEHOLDER.fullmatch(element)
            out.append(str(arguments[match.group(1)]) if match else element)
        return out


class CliExecutor:
    """A narrow CLI tool's executor: the template filled, run in the sandbox."""

    source = "cli"

    def __init__(self, template: CliTemplate, runner: SandboxedCommand, cwd: Path) -> None:
        self.template = template
        self.runner = runner
        self.cwd = cwd

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        return await self.runner.run(self.template.fill(arguments), cwd=str(self.cwd))


def cli_contract(
    name: str,
    template: CliTemplate,
    *,
    description: str,
    parameters: Mapping[str, Mapping[str, Any]],
    side_effect: SideEffect,
    idempotency: Idempotency,
    timeout: float,
    version: str,
) -> ToolContract:
    """The contract of one CLI tool: one property per placeholder."""
    unknown = sorted(set(parameters) - set(template.parameters))
    if unknown:
        raise ConfigError(
            f"parameters {unknown} appear in no argv element; add '{{{unknown[0]}}}' to argv or "
            "drop them",
            key="parameters",
            value=unknown,
        )
    properties = {}
    for field, dash_allowed in template.parameters.items():
        if field in parameters:  # the registrant's schema stands as written
            properties[field] = dict(parameters[field])
            continue
        schema: dict[str, Any] = {"type": "string", "minLength": 1}
        if not dash_allowed:
            schema["pattern"] = NOT_AN_OPTION
        properties[field] = schema
    shown = " ".join(template.argv)
    return ToolContract(
        id=name,
        version=version,
        description=f"{description} Runs `{shown}` in a sandbox.",
        input_schema={
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        },
        output_schema=OUTPUT_SCHEMA,
        side_effect=side_effect,
        idempotency=idempotency,
        timeout=timeout + GRACE,
        retry=RetryPolicy(max_attempts=1),
        result_projection=ResultProjection(summary_template="{account}", artifact_threshold=32768),
    )


def register_cli(
    harness: Harness,
    name: str,
    *,
    argv: Sequence[str],
    cwd: str | Path,
    description: str,
    parameters: Mapping[str, Mapping[str, Any]] | None = None,
    side_effect: SideEffect = SideEffect.COMMITTING,
    idempotency: Idempotency = Idempotency.NONE,
    roots: Sequence[str | Path] | None = None,
    timeout: float = 60.0,
    network: bool = False,
    environment: Mapping[str, str] | None = None,
    limits: ResourceLimits | None = None,
    hidden: Sequence[str | Path] | None = None,
    version: str = "1.0.0",
) -> ToolContract:
    """Register a narrow tool over one CLI invocation (see the module docstring).
    `parameters` gives a JSON Schema per placeholder (default: a non-empty string); `roots`
    defaults to `cwd`, the only place the command may write."""
    template = CliTemplate(argv)
    where = Path(os.path.realpath(cwd))
    sandbox = sandbox_for(
        harness,
        roots or [where],
        network=network,
        environment=environment,
        limits=limits,
        hidden=hidden,
    )
    contract = cli_contract(
        name,
        template,
        description=description,
        parameters=parameters or {},
        side_effect=side_effect,
        idempotency=idempotency,
        timeout=timeout,
        version=version,
    )
    spares = spares_for(harness)
    runner = SandboxedCommand(
        sandbox,
        timeout=timeout,
        redactor=harness.redactor,
        artifacts=harness.artifacts,
        spares=spares,
    )
    spares.prepare(sandbox, where)
    return harness.register(contract, executor=CliExecutor(template, runner, where))
