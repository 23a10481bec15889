"""`ShellPolicy` and `decide`: Cedar judges each simple command on what it does.

The Cedar model (beside the tool model of ``policy/cedar.py``):

    principal  Toolkeeper::Principal::"<id>"   tenant, kind, capabilities
    action     Toolkeeper::Action::"run"
    resource   Toolkeeper::Program::"<name>"   name, path (resolved), known
    context    command, cwd, argv, subcommand ("" if none), options (Set), operands,
               reads (Set), writes (Set), network, process_control, dynamic, effect
               ("read_only" | "writes_within_roots" | "open_world"), open_world (Set of
               reasons), roots (Set), repository ("" if none), writes_within_roots,
               writes_within_repository, reads_within_roots

Paths are absolute and resolved, so ``context.writes.contains("/etc/passwd")`` means what it
says; "all writes under a root" is a set question Cedar cannot ask, so it arrives computed
(``writes_within_roots``: every write lies under a writable root and none is unknown).

A text is decided command by command and the most cautious answer wins (deny >
require_approval > allow). A refused text is denied without asking Cedar; a satisfied
forbid denies; no satisfied permit denies; an evaluation error denies. ``@approval("required")``
on a permit asks a human, ``@id`` names the policy, as in the tool policies.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cedarpy

from toolkeeper.errors import PolicyError
from toolkeeper.policy.cedar import (
    _read_annotations,
    compile_policies,
    policy_sources,
    principal_entity,
)
from toolkeeper.policy.decision import Decision, PolicyDecision
from toolkeeper.shell.analysis import CommandAnalysis
from toolkeeper.shell.command import SimpleCommand
from toolkeeper.shell.normalize import within

if TYPE_CHECKING:
    # Only named in annotations: importing the runtime here would tie the shell package to
    # the harness that registers it.
    from toolkeeper.runtime.invocation import Principal

_PROGRAM_TYPE = "Toolkeeper::Program"
_PRINCIPAL_TYPE = "Toolkeeper::Principal"
_ACTION = {"type": "Toolkeeper::Action", "id": "run"}
_CAUTION = (
    Decision.ALLOW,
    Decision.ALLOW_WITH_CONDITIONS,
    Decision.REQUIRE_APPROVAL,
    Decision.DENY,
)
DECISION_CACHE_ENTRIES = 4096
"""How many Cedar answers a `ShellPolicy` keeps by default (oldest dropped first)."""

SHIPPED_POLICIES = {
    "read_only": "shell_readonly.cedar",
    "example": "shell_example.cedar",
}
"""The shell policies shipped in ``toolkeeper/policy``: the read-only policy a shell tool
uses by default, and the example of docs/shell.md (git and rm rules)."""


@functools.cache
def shipped_policy_text(name: str) -> str:
    """The text of a shipped shell policy (`SHIPPED_POLICIES` names them)."""
    if name not in SHIPPED_POLICIES:
        raise PolicyError(
            f"no shipped shell policy {name!r}; choose one of {sorted(SHIPPED_POLICIES)}"
        )
    return resources.files("toolkeeper.policy").joinpath(SHIPPED_POLICIES[name]).read_text("utf-8")


@dataclasses.dataclass(frozen=True, slots=True)
class ShellDecision:
    """The decision on a whole text, and the decision on each command it runs."""

    decision: Decision
    policy_ids: tuple[str, ...]
    reasons: tuple[str, ...]
    commands: tuple[tuple[SimpleCommand, PolicyDecision], ...] = ()

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOW


class ShellPolicy:
    """Cedar policies over shell commands, parsed once.

    `shipped` names shipped policies to start from (``"read_only"``, ``"example"``);
    `policy_files` and `policies` add operator text after them. A forbid beats every permit,
    so an operator file can only narrow what a forbid in the shipped text rules out.
    `decision_cache_entries` bounds the answers kept per (principal, program, context); 0
    keeps none."""

    def __init__(
        self,
        *,
        shipped: Sequence[str] = ("read_only",),
        policy_files: Sequence[str | Path] = (),
        policies: str = "",
        decision_cache_entries: int = DECISION_CACHE_ENTRIES,
    ) -> None:
        sources = [
            (f"toolkeeper/policy/{SHIPPED_POLICIES.get(n, n)}", shipped_policy_text(n))
            for n in shipped
        ]
        sources += policy_sources(policy_files, policies)
        self._policy_set, statements = compile_policies(sources)
        self._policies = _read_annotations(self._policy_set, statements)
        for policy in self._policies.values():
            if policy.conditions:
                raise PolicyError(
                    f"policy {policy.label}: @conditions constrain tool arguments; a shell "
                    "policy decides on the command's context, so write the constraint in `when`"
                )
        self._sources = tuple(source for source, _ in sources)
        # Building and parsing the context costs more than evaluating it; keys no policy
        # names are left out (a policy cannot read what it never mentions).
        text = "\n".join(text for _, text in sources)
        self._reads = frozenset(key for key in _CONTEXT_KEYS if re.search(rf"\b{key}\b", text))
        self._cache_entries = decision_cache_entries
        self._cache: dict[tuple[Principal, str, str, bool, str], PolicyDecision] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ShellPolicy(policies={len(self._policies)}, sources={list(self._sources)})"

    @property
    def cached_entries(self) -> int:
        """How many Cedar answers the cache holds now; never above ``decision_cache_entries``."""
        return len(self._cache)

    def decide_command(
        self, command: SimpleCommand, *, principal: Principal, roots: Sequence[str], text: str
    ) -> PolicyDecision:
        """Cedar's answer for one simple command; never raises (an error is a deny)."""
        try:
            full = _context(command, roots, text)
            context = json.dumps({key: full[key] for key in self._reads}, sort_keys=True)
            key = (principal, command.name, command.program, command.known, context)
            known = self._cache.get(key)
            if known is not None:
                return known
            result = cedarpy.is_authorized(
                {
                    "principal": {"type": _PRINCIPAL_TYPE, "id": principal.id},
                    "action": _ACTION,
                    "resource": {"type": _PROGRAM_TYPE, "id": command.name},
                    "context": context,
                },
                self._policy_set,
                _entities(principal, command.name, command.program, command.known),
            )
            decision = self._interpret(result, command)
        except Exception as exc:
            return PolicyDecision(
                Decision.DENY,
                ("toolkeeper.engine_error",),
                (f"Cedar evaluation failed: {type(exc).__name__}: {exc}",),
            )
        if self._cache_entries and "toolkeeper.evaluation_error" not in decision.policy_ids:
            with self._lock:
                if len(self._cache) >= self._cache_entries:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = decision
        return decision

    def _interpret(self, result: cedarpy.AuthzResult, command: SimpleCommand) -> PolicyDecision:
        fired = sorted(
            (self._policies[pid] for pid in result.diagnostics.reasons), key=lambda p: p.order
        )
        labels = tuple(policy.label for policy in fired)
        errors = tuple(result.diagnostics.errors)
        label = (
            " ".join(part for part in (command.name, command.subcommand) if part) or "(assignment)"
        )
        if result.decision is cedarpy.Decision.Deny and fired:
            return PolicyDecision(
                Decision.DENY,
                labels,
                tuple(f"{label}: forbidden by {name}" for name in labels) + errors,
            )
        if errors:
            return PolicyDecision(Decision.DENY, ("toolkeeper.evaluation_error",), errors)
        if result.decision is not cedarpy.Decision.Allow:
            return PolicyDecision(
                Decision.DENY,
                ("toolkeeper.default_deny",),
                (f"{label}: no policy permits running it ({command.effect.value})",),
            )
        asking = [policy for policy in fired if policy.approval]
        if asking:
            return PolicyDecision(
                Decision.REQUIRE_APPROVAL,
                labels,
                (f"{label}: approval required by {', '.join(p.label for p in asking)}",),
            )
        return PolicyDecision(Decision.ALLOW, labels, (f"{label}: allowed by {', '.join(labels)}",))


def decide(
    analysis: CommandAnalysis, *, principal: Principal, policy: ShellPolicy
) -> ShellDecision:
    """Decide a whole text: refused → deny; otherwise each command by Cedar, the most
    cautious answer winning. Reasons name the command each comes from."""
    if analysis.refused is not None:
        return ShellDecision(
            Decision.DENY, ("toolkeeper.shell.refused",), (f"refused: {analysis.refused}",)
        )
    decided = tuple(
        (
            command,
            policy.decide_command(
                command, principal=principal, roots=analysis.roots, text=analysis.command
            ),
        )
        for command in analysis.commands
    )
    if not decided:
        return ShellDecision(Decision.ALLOW, (), ("the command runs nothing",))
    worst = max((d.decision for _, d in decided), key=_CAUTION.index)
    chosen = [d for _, d in decided if d.decision is worst]
    return ShellDecision(
        worst,
        tuple(dict.fromkeys(pid for d in chosen for pid in d.policy_ids)),
        tuple(dict.fromkeys(reason for d in chosen for reason in d.reasons)),
        decided,
    )


_CONTEXT_KEYS = (
    "command",
    "cwd",
    "argv",
    "subcommand",
    "options",
    "operands",
    "reads",
    "writes",
    "network",
    "process_control",
    "dynamic",
    "known",
    "effect",
    "open_world",
    "roots",
    "repository",
    "writes_within_roots",
    "writes_within_repository",
    "reads_within_roots",
)


def _context(command: SimpleCommand, roots: Sequence[str], text: str) -> dict[str, Any]:
    unknown_writes = any("known only at run time" in reason for reason in command.open_world)
    repository = command.repository or ""
    return {
        "command": text,
        "cwd": command.cwd or "",
        "argv": list(command.argv),
        "subcommand": command.subcommand or "",
        "options": sorted(set(command.options)),
        "operands": list(command.operands),
        "reads": sorted(set(command.reads)),
        "writes": sorted(set(command.writes)),
        "network": command.network,
        "process_control": command.process_control,
        "dynamic": command.dynamic,
        "known": command.known,
        "effect": command.effect.value,
        "open_world": sorted(set(command.open_world)),
        "roots": sorted(set(roots)),
        "repository": repository,
        "writes_within_roots": not unknown_writes
        and all(within(path, roots) for path in command.writes),
        "writes_within_repository": bool(repository)
        and not unknown_writes
        and all(within(path, [repository]) for path in command.writes),
        "reads_within_roots": all(within(path, roots) for path in command.reads),
    }


@functools.lru_cache(maxsize=1024)
def _entities(principal: Principal, name: str, program: str, known: bool) -> cedarpy.Entities:
    # Parsing entities costs more than evaluating the policies; a shell sees the same few
    # (principal, program) pairs again and again.
    return cedarpy.Entities.from_json_str(
        json.dumps(
            [
                principal_entity(principal),
                {
                    "uid": {"type": _PROGRAM_TYPE, "id": name},
                    "attrs": {"name": name, "path": program, "known": known},
                    "parents": [],
                },
            ]
        )
    )
