"""`analyze`: a command text → `CommandAnalysis`, what it runs and what that can do.

Three steps, each in its own module: `parse` walks tree-sitter-bash's tree into simple
commands (refusing text a reader and bash could read differently), `normalize` gives their
words meaning through the rule table, and `effect_of` classes each against the writable
roots. The analysis's effect is the widest of its commands'; a refused text is open world
and holds no commands. `account` renders it as sentences a reviewer can judge.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence

from toolkeeper.shell.command import ShellEffect, SimpleCommand, widest
from toolkeeper.shell.normalize import effect_of, normalize, within
from toolkeeper.shell.parse import Refusal, Word, parse
from toolkeeper.shell.rules import RuleTable, shipped_rules

__all__ = ["CommandAnalysis", "ShellEffect", "SimpleCommand", "analyze"]

_MAX_COMMANDS = 256
"""More simple commands than this in one text is a subcommand flood: refused, not judged."""
_DELETERS = frozenset({"rm", "rmdir", "shred", "unlink"})
# A variable only the shell itself reads: lowercase names no standard program looks up.
_SHELL_LOCAL = re.compile(r"(?=.*[a-z])(?!.*_proxy$)[A-Za-z_][A-Za-z0-9_]*")


@dataclasses.dataclass(frozen=True, slots=True)
class CommandAnalysis:
    """What a command text runs, in the terms a policy judges, and its widest effect."""

    command: str
    cwd: str
    commands: tuple[SimpleCommand, ...]
    effect: ShellEffect
    refused: str | None
    """Why the text cannot be judged at all (control characters, a construct not
    modelled, a parse error); `None` when it was analyzed."""
    summary: str
    """A short account of the parse for the ledger: constructs and programs."""
    roots: tuple[str, ...] = ()
    """The writable roots the effects were classed against (resolved)."""

    def account(self, roots: Sequence[str]) -> str:
        """Sentences a reviewer can judge: what runs where, and what each part touches."""
        if self.refused:
            return f"refuses `{_clip(self.command)}` in {self.cwd}: {self.refused}"
        resolved = [os.path.realpath(root) for root in roots]
        parts = [_sentence(command, resolved) for command in self.commands]
        return "; then ".join(parts) if parts else f"runs nothing in {self.cwd}"


def analyze(
    command: str, *, cwd: str, roots: Sequence[str], rules: RuleTable | None = None
) -> CommandAnalysis:
    """Parse, normalize and class `command` as run from `cwd` with writable `roots`.

    Never raises for any text: what cannot be judged is refused, and refused is open world.
    """
    table = rules or shipped_rules()
    cwd = os.path.realpath(cwd)
    roots = tuple(os.path.realpath(root) for root in roots)
    try:
        commands, constructs = _commands(command, cwd, roots, table, 0)
    except Refusal as refusal:
        return CommandAnalysis(
            command=command,
            cwd=cwd,
            commands=(),
            effect=ShellEffect.OPEN_WORLD,
            refused=refusal.reason,
            summary=f"refused: {refusal.reason}",
            roots=roots,
        )
    effect = widest([c.effect for c in commands])
    return CommandAnalysis(
        command=command,
        cwd=cwd,
        commands=tuple(commands),
        effect=effect,
        refused=None,
        summary=_summary(commands, constructs),
        roots=roots,
    )


def _commands(
    text: str, cwd: str | None, roots: Sequence[str], table: RuleTable, depth: int
) -> tuple[list[SimpleCommand], set[str]]:
    parsed = parse(text, cwd=cwd, depth=depth)
    constructs = set(parsed.constructs)
    commands: list[SimpleCommand] = []

    def reparse(inner: str, inner_cwd: str | None, inner_depth: int) -> list[SimpleCommand]:
        found, inner_constructs = _commands(inner, inner_cwd, roots, table, inner_depth)
        constructs.update(inner_constructs)
        constructs.add("re-parsed string")
        return found

    for name, value in parsed.environment:
        commands.append(_assignment(name, value, cwd, table, roots))
    for raw in parsed.commands:
        commands.extend(normalize(raw, table, roots, reparse))
        if len(commands) > _MAX_COMMANDS:
            raise Refusal(f"the command runs more than {_MAX_COMMANDS} simple commands")
    return commands, constructs


def _assignment(
    name: str, value: Word, cwd: str | None, table: RuleTable, roots: Sequence[str]
) -> SimpleCommand:
    """A variable set outside any command, as a command of the shell itself (name ``""``):
    open world unless the name is harmless or only the shell reads it."""
    reasons: tuple[str, ...] = ()
    if name not in table.harmless_variables and not _SHELL_LOCAL.fullmatch(name):
        reasons = (f"sets {name}, which can change what programs run or do",)
    command = SimpleCommand(
        program="",
        name="",
        subcommand=None,
        options=(),
        operands=(),
        argv=(f"{name}={value.value if value.value is not None else value.text}",),
        reads=(),
        writes=(),
        network=False,
        process_control=False,
        known=True,
        dynamic=value.value is None,
        open_world=reasons,
        cwd=cwd,
    )
    return dataclasses.replace(command, effect=effect_of(command, roots))


def _summary(commands: list[SimpleCommand], constructs: set[str]) -> str:
    names = [
        " ".join(part for part in (c.name or "(assignment)", c.subcommand) if part)
        for c in commands
    ]
    shape = f"[{', '.join(sorted(constructs))}] " if constructs else ""
    return f"{shape}{len(commands)} command{'s' if len(commands) != 1 else ''}: " + "; ".join(names)


def _sentence(command: SimpleCommand, roots: Sequence[str]) -> str:
    where = command.cwd or "a directory known only at run time"
    clauses: list[str] = []
    if command.writes:
        verb = "deletes" if command.name in _DELETERS else "writes"
        inside = [p for p in command.writes if within(p, roots)]
        outside = [p for p in command.writes if not within(p, roots)]
        if inside:
            clauses.append(f"{verb} files under writable root {', '.join(inside)}")
        if outside:
            clauses.append(f"{verb} {', '.join(outside)} OUTSIDE the writable roots")
    if command.reads:
        clauses.append(
            f"reads {', '.join(_clip(p, 80) for p in command.reads[:5])}"
            + (f" and {len(command.reads) - 5} more" if len(command.reads) > 5 else "")
        )
    if command.network:
        clauses.append("uses the network")
    if command.process_control:
        clauses.append("signals or controls other processes")
    if not command.known:
        clauses.append("is not in the rule table, so what it does is unknown")
    clauses.extend(
        reason for reason in command.open_world if command.known or "rule table" not in reason
    )
    if command.dynamic:
        clauses.append("some of its words are computed at run time")
    if not clauses:
        clauses.append("touches no named path")
    argv = " ".join(_quote(word) for word in command.argv)
    return f"runs `{_clip(argv)}` in {where}: {', '.join(clauses)} ({command.effect.value})"


def _quote(word: str) -> str:
    if word and re.fullmatch(r"[A-Za-z0-9_./=:,@%+-]+", word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
