"""`SimpleCommand`: one program run, in the terms a policy judges; `ShellEffect`, its class."""

from __future__ import annotations

import dataclasses
from enum import StrEnum


class ShellEffect(StrEnum):
    """What running a command can do, from the least to the most."""

    READ_ONLY = "read_only"
    WRITES_WITHIN_ROOTS = "writes_within_roots"
    OPEN_WORLD = "open_world"
    """Writes outside the roots, uses the network, controls processes, runs code we cannot
    see (an interpreter, a build), or holds anything unknown."""


EFFECT_ORDER = (ShellEffect.READ_ONLY, ShellEffect.WRITES_WITHIN_ROOTS, ShellEffect.OPEN_WORLD)


def widest(effects: list[ShellEffect] | tuple[ShellEffect, ...]) -> ShellEffect:
    """The largest of `effects` (read-only when there are none)."""
    return max(effects, key=EFFECT_ORDER.index, default=ShellEffect.READ_ONLY)


@dataclasses.dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One program run, normalized: what it is, what it touches, and whether we know it.

    Paths are absolute and resolved through symlinks (`os.path.realpath`, which also
    resolves a file that does not exist yet to where it would be created). A path the text
    computes at run time is not listed: `dynamic` says some were left out."""

    program: str
    """The resolved executable path, or the bare name when it is a builtin or not found."""
    name: str
    """The basename the rule table knows it by, e.g. ``git``."""
    subcommand: str | None
    """``status``, ``stash list``; `None` for programs without subcommands."""
    options: tuple[str, ...]
    """Option names as given (``-l``, ``--output``); clusters split (``-la`` → ``-l``, ``-a``)."""
    operands: tuple[str, ...]
    argv: tuple[str, ...]
    """The words as bash passes them (after wrappers were stripped); unknown ones as written."""
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    network: bool
    process_control: bool
    known: bool
    """The program (and subcommand) is in the rule table."""
    effect: ShellEffect = ShellEffect.OPEN_WORLD
    """This command's class, given the roots `analyze` was called with."""
    dynamic: bool = False
    """Some word is computed at run time (``$x``, ``$(…)``, a glob's expansion)."""
    open_world: tuple[str, ...] = ()
    """Why the command is open world beyond writes, network and process control
    (``runs code from -c``, ``sets PATH``); empty for others."""
    cwd: str | None = None
    """The directory it runs in; `None` when a `cd` made it unknowable."""
    repository: str | None = None
    """For a version-control command, the repository's top directory it acts on."""
