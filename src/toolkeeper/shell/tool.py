"""The `shell` tool: one contract, judged per command, run in the sandbox.

``harness.register_shell(roots=[...], timeout=..., network=False)`` registers it; a call is
``Proposal(call_id, "shell", {"command": "...", "cwd": "..."})`` and goes through the one
pipeline like any tool. What is particular to the shell is in three pieces:

- `ShellAnalyzer` (the entry's call analyzer, `CallFacts`): parses and normalizes the command
  (`toolkeeper.shell.analysis`), so policy judges its effect class — read-only, writes within
  the roots, open world — and its programs, subcommands and paths (`toolkeeper.shell.policy`),
  the approver reads its account, the ledger row keeps its parse summary, and an approval is
  bound to the argv digest, the working directory and the sandbox's environment.
- `ShellExecutor`: runs the command string with bash in the sandbox through
  `SandboxedCommand` (`toolkeeper.shell.execution`), which reports the ending apart from
  the effect. The narrow CLI tools (`toolkeeper.shell.cli_tools`) run through it too.
- The contract declares the worst case (committing, open world, not idempotent), so the
  pipeline writes an intent before every command and never retries one on its own.
"""

from __future__ import annotations

import hashlib
import os
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
from toolkeeper.executors.sandbox import BWRAP, ResourceLimits, Sandbox
from toolkeeper.policy import PolicyDecision
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.invocation import Principal
from toolkeeper.runtime.registry import CallFacts
from toolkeeper.schema.document import canonical_json
from toolkeeper.shell.analysis import analyze
from toolkeeper.shell.command import ShellEffect
from toolkeeper.shell.execution import GRACE, SandboxedCommand, sandbox_for, spares_for
from toolkeeper.shell.policy import ShellPolicy, decide
from toolkeeper.shell.results import OUTPUT_SCHEMA
from toolkeeper.shell.rules import RuleTable

if TYPE_CHECKING:
    from toolkeeper.runtime.harness import Harness

SHELL = "/bin/bash"
MAX_COMMAND = 65536


def shell_argv(command: str) -> list[str]:
    """How a command string runs: bash without startup files, so nothing but the text
    that was judged executes."""
    return [SHELL, "--noprofile", "--norc", "-c", command]


class ShellExecutor:
    """The shell tool's executor: the command string, run by bash in the sandbox."""

    source = "shell"

    def __init__(self, runner: SandboxedCommand, default_cwd: Path) -> None:
        self.runner = runner
        self.default_cwd = default_cwd

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        cwd = working_directory(arguments.get("cwd"), self.default_cwd)
        stdin = arguments.get("stdin")
        return await self.runner.run(
            shell_argv(arguments["command"]),
            cwd=str(cwd),
            stdin=stdin.encode() if isinstance(stdin, str) else None,
            pty=bool(arguments.get("pty", False)),
        )


def working_directory(given: str | None, default: Path) -> Path:
    """`given` resolved (relative to `default`, through symlinks); `default` when absent."""
    if not given:
        return default
    return Path(os.path.realpath(default / given))


def digest(value: Any) -> str:
    """The sha256 of `value`'s canonical JSON, as the pipeline digests arguments."""
    return "sha256:" + hashlib.sha256(canonical_json(value).encode()).hexdigest()


def shell_contract(*, roots: Sequence[Path], timeout: float, network: bool) -> ToolContract:
    """The one contract of the shell tool, for these roots."""
    listed = ", ".join(str(r) for r in roots)
    return ToolContract(
        id="shell",
        version="1.0.0",
        description=(
            "Run a bash command in a sandbox whose only writable directories are "
            f"{listed}; the network is {'open' if network else 'off'}. Returns the exit "
            "code, what the command changed, and the head and tail of stdout and stderr."
        ),
        when_to_use="Reading files, building and testing code, version control in the "
        "writable directories.",
        when_not_to_use="Business actions with a dedicated tool; anything outside the "
        "writable directories.",
        input_schema={
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_COMMAND,
                    "description": "The bash command line.",
                },
                "cwd": {
                    "type": "string",
                    "description": f"Working directory (default {roots[0]}); relative paths "
                    "are taken from it.",
                },
                "stdin": {"type": "string", "description": "Text given on stdin (default none)."},
                "pty": {
                    "type": "boolean",
                    "default": False,
                    "description": "Run with stdout on a terminal.",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        },
        output_schema=OUTPUT_SCHEMA,
        side_effect=SideEffect.COMMITTING,
        open_world=True,
        idempotency=Idempotency.NONE,
        timeout=timeout + GRACE,
        retry=RetryPolicy(max_attempts=1),
        result_projection=ResultProjection(summary_template="{account}", artifact_threshold=32768),
    )


class ShellAnalyzer:
    """The shell entry's call analyzer: parse, normalize and judge one command."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        default_cwd: Path,
        policy: ShellPolicy | None = None,
        rules: RuleTable | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.default_cwd = default_cwd
        self.policy = policy or ShellPolicy()
        self.rules = rules
        self._environment = digest(
            {
                "env": sandbox.env(),
                "roots": [str(r) for r in sandbox.roots],
                "network": sandbox.network,
                "limits": repr(sandbox.limits),
            }
        )

    def __call__(self, arguments: dict[str, Any], principal: Principal) -> CallFacts:
        command = arguments["command"]
        cwd = working_directory(arguments.get("cwd"), self.default_cwd)
        roots = self.sandbox.roots
        bound = {
            "argv": digest(shell_argv(command)),
            "cwd": str(cwd),
            "environment": self._environment,
        }
        if not any(cwd == r or r in cwd.parents for r in roots) or not cwd.is_dir():
            return CallFacts(
                side_effect=SideEffect.COMMITTING,
                open_world=True,
                account=f"run `{command}` in {cwd}",
                refusal=f"the working directory {cwd} is not a directory inside the writable "
                f"roots ({', '.join(map(str, roots))})",
                bound=bound,
            )
        analysis = analyze(command, cwd=str(cwd), roots=[str(r) for r in roots], rules=self.rules)
        judged = decide(analysis, principal=principal, policy=self.policy)
        side_effect, open_world = _EFFECTS[analysis.effect]
        # The words and the resolved paths: a symlink swapped after approval changes where
        # the same words write, and makes the approval stale.
        bound["analysis"] = digest([[list(c.argv), list(c.writes)] for c in analysis.commands])
        return CallFacts(
            side_effect=side_effect,
            open_world=open_world,
            account=analysis.account([str(r) for r in roots]),
            summary={
                "summary": analysis.summary,
                "effect": str(analysis.effect),
                "commands": [
                    {
                        "program": c.program,
                        "subcommand": c.subcommand,
                        "writes": list(c.writes),
                        "network": c.network,
                        "known": c.known,
                    }
                    for c in analysis.commands
                ],
            },
            refusal=analysis.refused,
            decision=PolicyDecision(judged.decision, judged.policy_ids, judged.reasons),
            bound=bound,
        )


_EFFECTS = {
    ShellEffect.READ_ONLY: (SideEffect.NONE, False),
    # A write within the roots is not undoable in general (rm): committing, so the shipped
    # policy asks a human unless an operator policy permits it.
    ShellEffect.WRITES_WITHIN_ROOTS: (SideEffect.COMMITTING, False),
    ShellEffect.OPEN_WORLD: (SideEffect.COMMITTING, True),
}


def register_shell(
    harness: Harness,
    *,
    roots: Sequence[str | Path],
    timeout: float = 60.0,
    network: bool = False,
    cwd: str | Path | None = None,
    environment: Mapping[str, str] | None = None,
    limits: ResourceLimits | None = None,
    policy: ShellPolicy | None = None,
    rules: RuleTable | None = None,
    unsandboxed_fallback: bool = False,
    bwrap: str = BWRAP,
    hidden: Sequence[str | Path] | None = None,
) -> ToolContract:
    """Register the `shell` tool on `harness` (see the module docstring). `policy` is the
    shell policy (default: the shipped read-only one), `rules` the rule table (default: the
    shipped one). `hidden` paths are covered by an empty directory (default: the user's
    home; the harness's home always). `unsandboxed_fallback=True` is the operator's explicit
    opt-out of failing closed when bubblewrap (`bwrap`) cannot start."""
    sandbox = sandbox_for(
        harness,
        roots,
        network=network,
        environment=environment,
        limits=limits,
        unsandboxed_fallback=unsandboxed_fallback,
        bwrap=bwrap,
        hidden=hidden,
    )
    default_cwd = Path(os.path.realpath(cwd)) if cwd is not None else sandbox.roots[0]
    spares = spares_for(harness)
    runner = SandboxedCommand(
        sandbox,
        timeout=timeout,
        redactor=harness.redactor,
        artifacts=harness.artifacts,
        spares=spares,
    )
    spares.prepare(sandbox, default_cwd)  # the first command need not wait for bwrap
    return harness.register(
        shell_contract(roots=sandbox.roots, timeout=timeout, network=network),
        executor=ShellExecutor(runner, default_cwd),
        analyzer=ShellAnalyzer(sandbox, default_cwd=default_cwd, policy=policy, rules=rules),
    )
