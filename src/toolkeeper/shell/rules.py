"""The rule table: what each known program's words mean (`RuleTable`, `Rule`, `Wrapper`).

The shipped table is ``rules.toml`` beside this module; `RuleTable.load` lays user files over
it (a program's entry in a later file replaces the earlier one whole, so a user never
inherits half a rule). A program absent from the table is unknown, and an unknown program
is open world: the table is an allowlist of meanings, never a denylist.

A program entry (``[programs.NAME]``) says:

    operands        read | write | none | copy | move | pattern | link   what operands are
    values          options that take a value (``-o FILE``, ``--output=FILE``)
    reads_from      options whose value is a path read
    writes_to       options whose value is a path written
    writes_when     options that turn the operand reads into writes (``sed -i``)
    reads_when      options that turn the operand writes into reads (``gzip -c``)
    open_when       options that make the run open world (``--upload-pack``)
    network_when    options that use the network
    offline_when    options that keep a `network` program local (``--offline``)
    network, process_control, open_world   always so (open_world names why)
    open_with_operands     why an operand makes it open world (``hostname NAME``)
    queries         options that alone make it only answer (``python --version``)
    list_when       options that make it list, not extract (``tar -t``, ``unzip -l``)
    bundled_first   true: the first word may be options without a dash (``tar xvf``)
    known_options   when set, any other option makes it open world (``stty -echo``)
    query_operands  operands that only ask (``stty speed``)
    code_after      operands after this many are code it evaluates (``fx FILE EXPR``)
    default_takes_operands  a first operand naming no subcommand belongs to ``default``
    repository      read | write: a version-control command on the repository at cwd
    writes_with_operands   this many operands make it a write (a branch name: 1)
    open_when_writing      options that make a write open world (``--global``)
    writes_cwd      true: it writes files into its working directory (split)
    global_values   options before the subcommand that take a value
    subcommands     a table of subcommand → entry (nested for ``stash list``);
                    ``default`` names the entry used when none is given, or when the
                    first operand names none (``git reflog main`` is ``git reflog show main``)
    handler         git | find | sed | awk | shell | eval | date: code in `normalize`

A wrapper entry (``[wrappers.NAME]``) strips to the command it runs: ``values``,
``positional`` (leading operands it consumes, e.g. timeout's duration), ``assignments``
(``NAME=VALUE`` operands, as env takes), ``chdir`` (options that set the directory),
``open_world`` (why running through it is open world, e.g. sudo), ``appends`` (it adds
arguments at run time, as xargs does), ``flags`` (its options without a value; any
other option makes the run unknown), ``queries`` (options with which it runs nothing).
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from toolkeeper.errors import ConfigError

_OPERAND_KINDS = frozenset({"read", "write", "none", "copy", "move", "pattern", "link"})
_HANDLERS = frozenset({"git", "find", "sed", "awk", "shell", "eval", "date"})


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """The meaning of one program's (or subcommand's) words."""

    operands: str = "read"
    values: frozenset[str] = frozenset()
    reads_from: frozenset[str] = frozenset()
    writes_to: frozenset[str] = frozenset()
    writes_when: frozenset[str] = frozenset()
    reads_when: frozenset[str] = frozenset()
    """Options that turn operand writes into reads (``gzip -c`` writes standard output)."""
    open_when: frozenset[str] = frozenset()
    network_when: frozenset[str] = frozenset()
    offline_when: frozenset[str] = frozenset()
    """Options that keep a networked command local (``cargo metadata --no-deps``)."""
    network: bool = False
    process_control: bool = False
    open_world: str = ""
    open_with_operands: str = ""
    queries: frozenset[str] = frozenset()
    """Options that, given alone (no other option, no operand), make it only answer
    (``python --version``): ``ruby -v -e CODE`` still runs CODE, so alone is required."""
    list_when: frozenset[str] = frozenset()
    """Options that put it in a listing mode, whatever else is given (``tar -t``,
    ``unzip -l``): its open_world and operand writes do not apply, operands are read."""
    known_options: frozenset[str] = frozenset()
    """When set, any other option makes the run open world (stty's ``-echo`` is a setting)."""
    query_operands: frozenset[str] = frozenset()
    """Operands that only ask (``stty speed``); others trigger `open_with_operands`."""
    code_after: int = 0
    """Operands after this many are code it evaluates (``fx FILE EXPR``): open world."""
    default_takes_operands: bool = False
    """A first operand naming no subcommand is an operand of ``default`` (``dua DIR``)."""
    bundled_first: bool = False
    """Its first word may be an option bundle without a dash (``tar xvf``)."""
    """Why any operand makes the run open world (``hostname NAME`` sets the host name)."""
    repository: str = ""
    writes_with_operands: int = 0
    """This many operands make it a write (``git branch NAME``: 1, ``git config K V``: 2)."""
    open_when_writing: frozenset[str] = frozenset()
    """Options that make a write open world (``git config --global`` writes ~/.gitconfig)."""
    writes_cwd: bool = False
    """It writes files into its working directory whatever its operands (split's pieces)."""
    global_values: frozenset[str] = frozenset()
    subcommands: Mapping[str, Rule] = dataclasses.field(default_factory=dict)
    default: str = ""
    handler: str = ""

    def takes_value(self, option: str) -> bool:
        return (
            option in self.values
            or option in self.reads_from
            or option in self.writes_to
            or option in self.global_values
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Wrapper:
    """A program that runs another command given in its own operands."""

    values: frozenset[str] = frozenset()
    flags: frozenset[str] = frozenset()
    positional: int = 0
    assignments: bool = False
    chdir: frozenset[str] = frozenset()
    open_world: str = ""
    appends: bool = False
    queries: frozenset[str] = frozenset()
    """Options with which it runs nothing and only answers (``command -v``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class RuleTable:
    """Known programs and wrappers, plus environment variables harmless to set."""

    programs: Mapping[str, Rule]
    wrappers: Mapping[str, Wrapper]
    harmless_variables: frozenset[str]
    harmless_git_config: tuple[str, ...]
    """``git -c`` keys (or prefixes ending in ``.``) that run no code and change no remote."""

    @classmethod
    def load(cls, paths: Sequence[str | Path] = (), *, include_shipped: bool = True) -> RuleTable:
        """The shipped table with each file of `paths` laid over it, in order."""
        documents: list[tuple[str, Mapping[str, Any]]] = []
        if include_shipped:
            documents.append(("toolkeeper/shell/rules.toml", _shipped()))
        for path in paths:
            try:
                documents.append((str(path), tomllib.loads(Path(path).read_text("utf-8"))))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(
                    f"cannot read shell rules {path}: {exc}; fix the file or drop it",
                    key=str(path),
                ) from exc
        programs: dict[str, Rule] = {}
        wrappers: dict[str, Wrapper] = {}
        variables: set[str] = set()
        git_config: list[str] = []
        for source, document in documents:
            for name, entry in document.get("programs", {}).items():
                programs[name] = _rule(entry, f"{source}: programs.{name}")
                wrappers.pop(name, None)
            for name, entry in document.get("wrappers", {}).items():
                wrappers[name] = _wrapper(entry, f"{source}: wrappers.{name}")
                programs.pop(name, None)
            environment = document.get("environment", {})
            variables.update(environment.get("harmless", ()))
            git_config.extend(environment.get("harmless_git_config", ()))
        return cls(programs, wrappers, frozenset(variables), tuple(git_config))

    def __repr__(self) -> str:
        return f"RuleTable(programs={len(self.programs)}, wrappers={len(self.wrappers)})"


@functools.cache
def shipped_rules() -> RuleTable:
    """The shipped rule table (``rules.toml``), loaded once."""
    return RuleTable.load()


def _shipped() -> Mapping[str, Any]:
    text = resources.files("toolkeeper.shell").joinpath("rules.toml").read_text("utf-8")
    return tomllib.loads(text)


_RULE_KEYS = {field.name for field in dataclasses.fields(Rule)}
_WRAPPER_KEYS = {field.name for field in dataclasses.fields(Wrapper)}


def _rule(entry: Mapping[str, Any], where: str) -> Rule:
    unknown = set(entry) - _RULE_KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {sorted(unknown)}; known keys are {sorted(_RULE_KEYS)}",
            key=where,
        )
    fields: dict[str, Any] = {}
    for key, value in entry.items():
        if key == "subcommands":
            fields[key] = {
                name: _rule(sub, f"{where}.subcommands.{name}") for name, sub in value.items()
            }
        elif isinstance(value, list):
            fields[key] = frozenset(value)
        else:
            fields[key] = value
    rule = Rule(**fields)
    if rule.operands not in _OPERAND_KINDS:
        raise ConfigError(
            f"{where}: operands = {rule.operands!r}; write one of {sorted(_OPERAND_KINDS)}",
            key=where,
            value=rule.operands,
        )
    if rule.handler and rule.handler not in _HANDLERS:
        raise ConfigError(
            f"{where}: handler = {rule.handler!r}; write one of {sorted(_HANDLERS)}",
            key=where,
            value=rule.handler,
        )
    if rule.repository not in ("", "read", "write"):
        raise ConfigError(f"{where}: repository must be read or write", key=where)
    return rule


def _wrapper(entry: Mapping[str, Any], where: str) -> Wrapper:
    unknown = set(entry) - _WRAPPER_KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {sorted(unknown)}; known keys are {sorted(_WRAPPER_KEYS)}",
            key=where,
        )
    fields: dict[str, Any] = {
        key: frozenset(value) if isinstance(value, list) else value for key, value in entry.items()
    }
    return Wrapper(**fields)
