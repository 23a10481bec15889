"""Running one argv for a tool: the writable roots snapshotted, the argv run in the sandbox,
the roots snapshotted again, and the result reported with the ending apart from the effect.
The shell tool and every narrow CLI tool run through `SandboxedCommand`.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from toolkeeper.artifacts.store import ArtifactStore
from toolkeeper.errors import ConfigError
from toolkeeper.executors import ToolAnswer, ToolFailure
from toolkeeper.executors.sandbox import (
    BWRAP,
    ResourceLimits,
    Sandbox,
    SandboxUnavailable,
    Spares,
)
from toolkeeper.runtime.envelope import ErrorCategory
from toolkeeper.secrets.redaction import Redactor
from toolkeeper.shell.results import Changes, Snapshot, shell_output

if TYPE_CHECKING:
    from toolkeeper.runtime.harness import Harness

GRACE = 10.0
"""Seconds the pipeline's timeout adds to the command's own: for the snapshots, the kill and
storing the output, so a command past its time is reported by us, not cut off mid-report."""


class SandboxedCommand:
    """Runs one argv in the sandbox and reports how it ended and what it changed. Given
    `spares`, each command runs in a sandbox of its own started ahead (the default for the
    shell and CLI tools; see `Spares`)."""

    source = "shell"

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        timeout: float,
        redactor: Redactor,
        artifacts: ArtifactStore,
        spares: Spares | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.timeout = timeout
        self.redactor = redactor
        self.artifacts = artifacts
        self.spares = spares

    async def run(
        self, argv: Sequence[str], *, cwd: str, stdin: bytes | None = None, pty: bool = False
    ) -> dict[str, Any]:
        """The command's structured result; raises `ToolFailure` when it timed out (with
        the result) or when the sandbox could not start (nothing ran)."""
        roots, hidden = self.sandbox.roots, self.sandbox.hidden
        before = await anyio.to_thread.run_sync(Snapshot.of, roots, hidden)
        try:
            completed = await self.sandbox.run(
                argv, cwd=cwd, timeout=self.timeout, stdin=stdin, pty=pty, spares=self.spares
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


def sandbox_for(
    harness: Harness,
    roots: Sequence[str | Path],
    *,
    network: bool = False,
    environment: Mapping[str, str] | None = None,
    limits: ResourceLimits | None = None,
    unsandboxed_fallback: bool = False,
    bwrap: str = BWRAP,
    hidden: Sequence[str | Path] | None = None,
) -> Sandbox:
    """The sandbox a tool of `harness` runs its commands in; the roots must exist. `hidden`
    paths are covered by an empty directory (default: the user's home)."""
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
    # The harness's own home (ledger, artifacts) is always hidden, with the user's home
    # unless `hidden` names other paths: a command has no business reading the audit trail,
    # stored results, or the keys and tokens under ~.
    covered = (*(Path(p) for p in (hidden if hidden is not None else [Path.home()])),)
    covered += (Path(harness.home).resolve(),)
    return Sandbox(
        roots=tuple(Path(r) for r in roots),
        network=network,
        limits=limits or ResourceLimits(),
        environment=dict(environment or {}),
        hidden=covered,
        unsandboxed_fallback=unsandboxed_fallback,
        bwrap=bwrap,
    )


_SPARES: weakref.WeakKeyDictionary[Harness, Spares] = weakref.WeakKeyDictionary()


def spares_for(harness: Harness) -> Spares:
    """The pool of spare sandboxes the shell and CLI tools of `harness` share (one spare
    per sandbox spec), closed when the harness closes or is collected."""
    spares = _SPARES.get(harness)
    if spares is None:
        spares = _SPARES[harness] = Spares()
        harness.on_close(spares.close)
        weakref.finalize(harness, spares.close)
    return spares
