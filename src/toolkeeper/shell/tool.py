"""The `shell` tool: one contract, judged per command, run in the sandbox.

``harness.register_shell(roots=[...], timeout=..., network=False)`` registers it; a call is
``Proposal(call_id, "shell", {"command": "...", "cwd": "..."})`` and goes through the one
pipeline like any tool. What is particular to the shell is in three pieces:

- `ShellAnalyzer` (the entry's call analyzer, `CallFacts`): parses and normalizes the command
  (`toolkeeper.shell.analysis`), so policy judges its effect class — read-only, writes within
  the roots, open world — and its programs, subcommands and paths (`toolkeeper.shell.policy`),
  the approver reads its account, the ledger row keeps its parse summary, and an approval is
  bound to the argv digest, the working directory and the sandbox's environment.
- `SandboxedCommand` (the executor): snapshots the writable roots, runs the argv under
  bubblewrap, snapshots again, and reports the ending apart from the effect
  (`toolkeeper.shell.results`). The narrow CLI tools (`toolkeeper.shell.cli_tools`) run
  through it too.
- The contract declares the worst case (committing, open world, not idempotent), so the
  pipeline writes an intent before every command and never retries one on its own.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from toolkeeper.artifacts.store import ArtifactStore
from toolkeeper.contract.model import (
    Idempotency,
    ResultProjection,
    RetryPolicy,
    SideEffect,
    ToolContract,
)
from toolkeeper.errors import ConfigError
from toolkeeper.executors import ToolAnswer, ToolFailure
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import ErrorCategory
from toolkeeper.runtime.invocation import Principal
from toolkeeper.runtime.registry import CallFacts
from toolkeeper.secrets.redaction import Redactor
from toolkeeper.shell.results import OUTPUT_SCHEMA, Changes, Snapshot, shell_output
from toolkeeper.shell.sandbox import ResourceLimits, Sandbox, SandboxUnavailable

if TYPE_CHECKING:
    from toolkeeper.runtime.harness import Harness

SHELL = "/bin/bash"
GRACE = 10.0
"""Seconds the pipeline's timeout adds to the command's own: for the snapshots, the kill and
storing the output, so a command past its time is reported by us, not cut off mid-report."""
MAX_COMMAND = 65536


def shell_argv(command: str) -> list[str]:
    """How a command string runs: bash without startup files, so nothing but the text
    that was judged executes."""
    return [SHELL, "--noprofile", "--norc", "-c", command]


class SandboxedCommand:
    """Runs one argv in the sandbox and reports how it ended and what it changed."""

    source = "shell"

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        timeout: float,
        redactor: Redactor,
        artifacts: ArtifactStore,
    ) -> None:
        self.sandbox = sandbox
        self.timeout = timeout
        self.redactor = redactor
        self.artifacts = artifacts

    async def run(
        self, argv: Sequence[str], *, cwd: str, stdin: bytes | None = None, pty: bool = False
    ) -> dict[str, Any]:
        """The command's structured result; raises `ToolFailure` when it timed out (with
        the result) or when the sandbox could not start (nothing ran)."""
        roots, hidden = self.sandbox.roots, self.sandbox.hidden
        before = await anyio.to_thread.run_sync(Snapshot.of, roots, hidden)
        try:
            completed = await self.sandbox.run(
                argv, cwd=cwd, timeout=self.timeout, stdin=stdin, pty=pty
            )
        except SandboxUnavailable as exc:
            raise ToolFailure(
                f"the sandbox could not start, so nothing ran: {exc.reason}",
                category=ErrorCategory.UNAVAILABLE,
                effect_committed=False,
                suggested_fix="Tell the operator: bubblewrap must be able to start here "
                "(toolkeeper never runs a command unsandboxed unless configured to).",
            ) from exc
        after = await anyio.to_thread.run_sync(Snapshot.of, roots, hidden)
        changes = Changes.between(before, after)
        output = await anyio.to_thread.run_sync(
            lambda: shell_output(
                completed,
                changes,
                timeout=self.timeout,
                network=self.sandbox.network,
                redactor=self.redactor,
                artifacts=self.artifacts,
            )
        )
        if completed.timed_out:
            # What changed is known (the roots are the only place it could write), so the
            # effect is stated, not left unknown — unless the network was open.
            known = changes.complete and not self.sandbox.network
            raise ToolFailure(
                f"the command {output['account']}",
                category=ErrorCategory.TIMEOUT,
                effect_committed=(changes.count > 0) if known else None,
                suggested_fix="Run something that finishes sooner, or split the work.",
                answer=ToolAnswer(
                    output,
                    ({"type": "text", "text": output["account"]},),
                    structured=True,
                    is_error=True,
                ),
            )
        return output


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
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


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
        policy: Any = None,
        rules: Any = None,
    ) -> None:
        self.sandbox = sandbox
        self.default_cwd = default_cwd
        self.policy = policy
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
        from toolkeeper.shell.analysis import analyze
        from toolkeeper.shell.policy import decide

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
        decision = decide(analysis, principal=principal, policy=self.policy)
        side_effect, open_world = _EFFECTS[str(analysis.effect)]
        bound["analysis"] = digest([list(c.argv) for c in analysis.commands])
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
            decision=getattr(decision, "decision", decision),
            bound=bound,
        )


_EFFECTS = {
    "read_only": (SideEffect.NONE, False),
    # A write within the roots is not undoable in general (rm): committing, so the shipped
    # policy asks a human unless an operator policy permits it.
    "writes_within_roots": (SideEffect.COMMITTING, False),
    "open_world": (SideEffect.COMMITTING, True),
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
    policy: Any = None,
    rules: Any = None,
    unsandboxed_fallback: bool = False,
) -> ToolContract:
    """Register the `shell` tool on `harness` (see the module docstring)."""
    sandbox = sandbox_for(
        harness,
        roots,
        network=network,
        environment=environment,
        limits=limits,
        unsandboxed_fallback=unsandboxed_fallback,
    )
    default_cwd = Path(os.path.realpath(cwd)) if cwd is not None else sandbox.roots[0]
    runner = SandboxedCommand(
        sandbox, timeout=timeout, redactor=harness.redactor, artifacts=harness.artifacts
    )
    return harness.register(
        shell_contract(roots=sandbox.roots, timeout=timeout, network=network),
        executor=ShellExecutor(runner, default_cwd),
        analyzer=ShellAnalyzer(sandbox, default_cwd=default_cwd, policy=policy, rules=rules),
    )


def sandbox_for(
    harness: Harness,
    roots: Sequence[str | Path],
    *,
    network: bool = False,
    environment: Mapping[str, str] | None = None,
    limits: ResourceLimits | None = None,
    unsandboxed_fallback: bool = False,
) -> Sandbox:
    """The sandbox a tool of `harness` runs its commands in; the roots must exist."""
    if not roots:
        raise ConfigError(
            "a sandboxed command needs at least one writable root; pass roots=[<directory>]",
            key="roots",
            value=list(roots),
        )
    for root in roots:
        if not Path(root).is_dir():
            raise ConfigError(
                f"writable root {root} is not a directory; create it or drop it from roots",
                key="roots",
                value=str(root),
            )
    # The harness's own home (ledger, artifacts) is hidden with the user's: a command has
    # no business reading the audit trail or stored results.
    hidden = (Path.home(), Path(harness.home).resolve())
    return Sandbox(
        roots=tuple(Path(r) for r in roots),
        network=network,
        limits=limits or ResourceLimits(),
        environment=dict(environment or {}),
        hidden=hidden,
        unsandboxed_fallback=unsandboxed_fallback,
    )
