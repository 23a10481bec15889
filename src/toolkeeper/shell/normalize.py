"""Normalize: a parsed simple command + the rule table → `SimpleCommand`s a policy can judge.

Wrappers (``env``, ``timeout``, ``sudo``, ``xargs``…) are stripped to the command they run;
``find -exec``, ``sh -c`` and ``eval`` yield the commands inside them as well. Paths are made
absolute against the working directory and resolved through symlinks. Whatever the table
does not know, or a word computed at run time could change, is recorded as a reason the
command is open world: unknown is never read as safe.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
from collections.abc import Callable, Sequence

from toolkeeper.shell.command import ShellEffect, SimpleCommand
from toolkeeper.shell.parse import RawCommand, Redirect, Word
from toolkeeper.shell.rules import Rule, RuleTable, Wrapper

Reparse = Callable[[str, str | None, int], list[SimpleCommand]]
"""Parse and normalize a command string found inside a command (``sh -c``, ``eval``)."""

_HARMLESS_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_WRITE_OPS = frozenset({">", ">>", "&>", "&>>", ">|", "<>", ">&"})
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_SYSTEM_DIRS = frozenset({"/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"})


@dataclasses.dataclass(slots=True)
class _Facts:
    """What one command does, gathered while its words are read."""

    cwd: str | None
    options: list[str] = dataclasses.field(default_factory=list)
    operands: list[Word] = dataclasses.field(default_factory=list)
    values: list[tuple[str, Word]] = dataclasses.field(default_factory=list)
    reads: list[str] = dataclasses.field(default_factory=list)
    writes: list[str] = dataclasses.field(default_factory=list)
    open_world: list[str] = dataclasses.field(default_factory=list)
    network: bool = False
    process_control: bool = False
    dynamic: bool = False
    repository: str | None = None
    git_dirs: list[str] = dataclasses.field(default_factory=list)
    """``--git-dir``/``--work-tree`` places: the repository a git command acts on."""

    def read(self, word: Word) -> None:
        if word.value is not None and _URL.match(word.value):
            self.network = True  # `gron https://…`, `xmllint http://…`: a read is a fetch
            return
        path = resolve_path(word, self.cwd)
        if path is None:
            self.dynamic = True
        elif path not in _HARMLESS_SINKS:
            self.reads.append(path)

    def write(self, word: Word, why: str = "") -> None:
        path = resolve_path(word, self.cwd)
        if path is None:
            self.dynamic = True
            self.open_world.append(f"writes {word.text!r}, a path known only at run time")
        elif path not in _HARMLESS_SINKS:
            self.writes.append(path)


def resolve_path(word: Word, cwd: str | None) -> str | None:
    """The absolute, symlink-resolved path `word` names from `cwd`; for a glob, the deepest
    directory its matches all lie under; `None` when unknowable here."""
    value = word.value
    if value is None:
        return None
    if word.glob:
        cut = min(value.index(c) for c in "*?[" if c in value)
        value = os.path.dirname(value[:cut]) or "."
    if not os.path.isabs(value):
        if cwd is None:
            return None
        value = os.path.join(cwd, value)
    return os.path.realpath(value)


def normalize(
    raw: RawCommand, table: RuleTable, roots: Sequence[str], reparse: Reparse
) -> list[SimpleCommand]:
    """The commands `raw` runs: itself (wrappers stripped) and any it runs inside."""
    facts = _Facts(cwd=raw.cwd)
    for name, value in raw.assignments:
        _assignment(name, value, table, facts)
    _redirects(raw.redirects, facts)
    return _program(list(raw.words), raw.depth, table, roots, reparse, facts)


def _assignment(name: str, value: Word, table: RuleTable, facts: _Facts) -> None:
    if name not in table.harmless_variables:
        facts.open_world.append(f"sets {name}, which can change what programs run or do")


def environment_reasons(environment: list[tuple[str, Word]], table: RuleTable) -> list[str]:
    """Why variables set outside commands (``export PATH=…``) make the text open world."""
    return [
        f"sets {name}, which can change what programs run or do"
        for name, _ in environment
        if name not in table.harmless_variables
    ]


def _redirects(redirects: list[Redirect], facts: _Facts) -> None:
    for redirect in redirects:
        if redirect.target is None:
            continue
        if (redirect.target.value or "").startswith(("/dev/tcp/", "/dev/udp/")):
            facts.network = True  # bash opens a socket for these names
        if redirect.op in _WRITE_OPS:
            facts.write(redirect.target)
            if redirect.op == "<>":
                facts.read(redirect.target)
        else:
            facts.read(redirect.target)


def _program(
    words: list[Word],
    depth: int,
    table: RuleTable,
    roots: Sequence[str],
    reparse: Reparse,
    facts: _Facts,
) -> list[SimpleCommand]:
    nested: list[SimpleCommand] = []
    while words and words[0].value in table.wrappers:
        wrapper_name = words[0].value or ""
        stripped = _strip_wrapper(words, table.wrappers[wrapper_name], table, facts)
        if stripped is None:
            return [
                _unknown(
                    words, facts, roots, f"{wrapper_name} is used in a way the table does not know"
                )
            ]
        if not stripped:
            # `command -v git`, `env` alone: a query or a print, nothing more runs.
            return [_finish(words[0].value or "", words, None, facts, roots, known=True)]
        words = stripped
    if not words:
        return [_finish("", [], None, facts, roots, known=True)]
    head = words[0]
    if head.value is None or head.glob:
        return [_unknown(words, facts, roots, f"the program {head.text!r} is computed at run time")]
    name = os.path.basename(head.value)
    if "/" in head.value and not _is_system_program(head.value, facts.cwd):
        return [_unknown(words, facts, roots, f"{head.value} is not the system's {name}")]
    rule = table.programs.get(name)
    if rule is None:
        return [_unknown(words, facts, roots, f"{name} is not in the rule table")]
    if rule.bundled_first and len(words) > 1 and re.fullmatch(r"[A-Za-z]+", words[1].value or ""):
        bundle = "-" + (words[1].value or "")
        words = [words[0], Word(bundle, bundle), *words[2:]]
    if rule.handler == "git":
        rule, subcommand = _git_globals(words, rule, table, facts)
    else:
        rule, subcommand = _subcommand(words, rule, facts)
    if rule is None:
        return [
            _unknown(words, facts, roots, f"{name} {subcommand or ''} is not in the rule table")
        ]
    known = True
    if rule.handler == "find":
        nested += _find(words, table, roots, reparse, depth, facts)
    else:
        _apply(rule, facts)
        if rule.handler in ("shell", "eval"):
            nested += _shell(rule.handler, name, facts, reparse, depth)
        elif rule.handler == "sed":
            _sed(facts)
        elif rule.handler == "awk":
            _awk(facts)
        elif rule.handler == "date" and any(
            not (word.value or "").startswith("+") for word in facts.operands
        ):
            facts.open_world.append("date with an operand sets the system clock")
    command = _finish(name, words, subcommand, facts, roots, known=known, program=head.value)
    return [command, *nested]


def _is_system_program(path: str, cwd: str | None) -> bool:
    """A program named by path is the table's program only where the system keeps it."""
    if not os.path.isabs(path):
        return False
    real = os.path.realpath(path)
    found = _which(os.path.basename(path))
    return os.path.dirname(path) in _SYSTEM_DIRS or (found is not None and real == found)


@functools.lru_cache(maxsize=1024)
def _which_cached(name: str, path: str) -> str | None:
    found = shutil.which(name, path=path)
    return os.path.realpath(found) if found else None


def _which(name: str) -> str | None:
    return _which_cached(name, os.environ.get("PATH", os.defpath))


def _strip_wrapper(
    words: list[Word], wrapper: Wrapper, table: RuleTable, facts: _Facts
) -> list[Word] | None:
    """The command a wrapper runs (its words), `[]` if it runs none, `None` if unknowable."""
    if wrapper.open_world:
        facts.open_world.append(wrapper.open_world)
    index = 1
    positional = wrapper.positional
    while index < len(words):
        value = words[index].value
        if value is None:
            return None
        if value == "--":
            index += 1
            break
        if value.startswith("-") and value != "-":
            option, _, attached = value.partition("=")
            if option in wrapper.queries:
                return []
            if option in wrapper.values or (option[:2] in wrapper.values and len(option) > 2):
                taken = attached or (option[2:] if option not in wrapper.values else "")
                if not taken:
                    index += 1
                    if index >= len(words):
                        return None
                    taken_word = words[index]
                else:
                    taken_word = Word(taken, taken)
                key = option if option in wrapper.values else option[:2]
                if key in wrapper.chdir:
                    facts.cwd = resolve_path(taken_word, facts.cwd)
                index += 1
                continue
            if option in wrapper.flags or all(f"-{c}" in wrapper.flags for c in option[1:]):
                index += 1
                continue
            return None
        if wrapper.assignments and "=" in value and re.fullmatch(r"[A-Za-z_]\w*=.*", value, re.S):
            variable = value.split("=", 1)[0]
            if variable not in table.harmless_variables:
                facts.open_world.append(f"sets {variable}, which can change what programs do")
            index += 1
            continue
        if positional:
            positional -= 1
            index += 1
            continue
        break
    rest = words[index:]
    if wrapper.appends:
        facts.dynamic = True
        rest = [*rest, Word("<arguments from stdin>", None)] if rest else []
        if not rest:
            rest = [Word("echo", "echo"), Word("<arguments from stdin>", None)]
    return rest


def _subcommand(words: list[Word], rule: Rule, facts: _Facts) -> tuple[Rule | None, str | None]:
    """Read options and operands; descend into subcommands named by the first operand."""
    names: list[str] = []
    start = 1
    while rule.subcommands:
        index = _first_operand(words, start, rule)
        if index is None:
            if rule.default:
                names.append(rule.default)
                rule = rule.subcommands[rule.default]
            break
        _options(words[start:index], rule, facts)
        word = words[index]
        sub = rule.subcommands.get(word.value or "")
        takes = names or rule.default_takes_operands
        if sub is None and rule.default and word.value is not None and takes:
            # `git reflog main`: the default subcommand, with this word as its operand.
            names.append(rule.default)
            rule = rule.subcommands[rule.default]
            start = index
            break
        names.append(word.text)
        if sub is None:
            return None, " ".join(names)
        rule = sub
        start = index + 1
    _options(words[start:], rule, facts)
    return rule, " ".join(names) if names else None


def _first_operand(words: list[Word], start: int, rule: Rule) -> int | None:
    index = start
    while index < len(words):
        value = words[index].value
        if value is None or not value.startswith("-") or value == "-":
            return index
        if value == "--":
            return index + 1 if index + 1 < len(words) else None
        option = value.split("=", 1)[0]
        if "=" not in value and (rule.takes_value(option) or rule.takes_value(value[:2])):
            index += 1 if value == option and len(option) > 2 and option[1] != "-" else 2
        else:
            index += 1
    return None


def _options(words: list[Word], rule: Rule, facts: _Facts) -> None:
    """Split `words` into options (with values) and operands, GNU style (options may follow
    operands until ``--``)."""
    index = 0
    ended = False
    while index < len(words):
        word = words[index]
        value = word.value
        index += 1
        if ended or value is None or not value.startswith("-") or value == "-":
            if not ended and _could_be_option(word) and _has_dangerous_options(rule):
                facts.open_world.append(
                    f"{word.text!r} is computed at run time and could be an option"
                )
            facts.operands.append(word)
            continue
        if value == "--":
            ended = True
            continue
        if value.startswith("--") or _single_dash_option(value, rule):
            name, equals, attached = value.partition("=")
            facts.options.append(name)
            if equals:
                facts.values.append((name, Word(attached, attached)))
            elif rule.takes_value(name) and index < len(words):
                facts.values.append((name, words[index]))
                index += 1
            continue
        for position, char in enumerate(value[1:], start=2):
            option = "-" + char
            facts.options.append(option)
            if rule.takes_value(option):
                attached = value[position:]
                if attached:
                    facts.values.append((option, Word(attached, attached)))
                elif index < len(words):
                    facts.values.append((option, words[index]))
                    index += 1
                break


def _single_dash_option(value: str, rule: Rule) -> bool:
    """``-exec``, ``-delete``: long options written with one dash that the rule names."""
    name = value.split("=", 1)[0]
    return len(name) > 2 and any(
        name in group
        for group in (
            rule.values,
            rule.open_when,
            rule.writes_when,
            rule.writes_to,
            rule.network_when,
            rule.reads_from,
        )
    )


def _could_be_option(word: Word) -> bool:
    """Could this word, known only at run time, begin with ``-``? Not when its text starts
    with a literal character other than ``-`` (``_ID=$(…)``, ``"name-$x"``)."""
    if word.value is not None and not word.glob:
        return False
    first = word.text.lstrip("\"'")[:1]
    return not first or first in "-$`\\{*?[~"


def _has_dangerous_options(rule: Rule) -> bool:
    return bool(rule.open_when or rule.writes_when or rule.writes_to or rule.network_when)


def _apply(rule: Rule, facts: _Facts) -> None:
    """Give the options and operands the meaning `rule` assigns them."""
    options = set(facts.options)
    alone = bool(options) and options <= rule.queries and not facts.operands
    if alone or options & rule.list_when:
        # `python --version`, `unzip -l`, `tar -tf`: it only answers.
        rule = dataclasses.replace(
            rule, open_world="", operands="read", writes_when=frozenset(), writes_cwd=False
        )
    networked = rule.network and not options & rule.offline_when
    facts.network = facts.network or networked or bool(options & rule.network_when)
    facts.process_control = facts.process_control or rule.process_control
    if rule.open_world:
        facts.open_world.append(rule.open_world)
    settings = [w for w in facts.operands if w.value not in rule.query_operands]
    if rule.open_with_operands and settings:
        facts.open_world.append(rule.open_with_operands)
    if rule.known_options and options - rule.known_options:
        unknown = ", ".join(sorted(options - rule.known_options))
        facts.open_world.append(f"option {unknown} is not one the table knows to only read")
    if rule.code_after and len(facts.operands) > rule.code_after:
        facts.open_world.append("evaluates an operand as code")
        facts.operands = facts.operands[: rule.code_after]
    for option in sorted(options & rule.open_when):
        facts.open_world.append(f"option {option} can run other programs or reach other hosts")
    for option, value in facts.values:
        if option in rule.reads_from:
            facts.read(value)
        elif option in rule.writes_to:
            facts.write(value)
    if rule.writes_cwd:
        facts.write(Word(".", "."))
    writes = bool(options & rule.writes_when)
    operands = facts.operands
    kind = rule.operands
    if kind == "pattern":
        if not any(
            option in rule.values and option in ("-e", "-f", "--regexp", "--file")
            for option in options
        ):
            operands = operands[1:]
        kind = "read"
    if rule.repository:
        facts.repository = _repository(facts.cwd)
        counted = rule.writes_with_operands and len(operands) >= rule.writes_with_operands
        if rule.repository == "write" or writes or counted:
            if options & rule.open_when_writing:
                facts.open_world.append(
                    f"writes with {', '.join(sorted(options & rule.open_when_writing))}, "
                    "outside the repository"
                )
            if facts.repository is None:
                facts.open_world.append(
                    "acts on a repository whose place is known only at run time"
                )
            else:
                facts.writes.append(facts.repository)
            facts.writes.extend(facts.git_dirs)
        else:
            facts.reads.extend([facts.repository] if facts.repository else [])
            facts.reads.extend(facts.git_dirs)
        if kind == "none":
            return
    if kind == "read":
        for word in operands:
            (facts.write if writes else facts.read)(word)
    elif kind == "write":
        for word in operands:
            (facts.read if options & rule.reads_when else facts.write)(word)
    elif kind in ("copy", "move"):
        target = next((w for o, w in facts.values if o in ("-t", "--target-directory")), None)
        if target is None and len(operands) < 2:
            # `uniq IN`, `split IN`: with no second operand the output is standard output.
            for word in operands:
                (facts.write if kind == "move" else facts.read)(word)
            return
        sources = operands if target is not None else operands[:-1]
        destination = target if target is not None else (operands[-1] if operands else None)
        for word in sources:
            (facts.write if kind == "move" else facts.read)(word)
        if destination is not None:
            facts.write(destination)
    elif kind == "link":
        # A link hands out the target: writing through it writes the target.
        for word in operands:
            facts.write(word)
        if len(operands) == 1 and operands[0].value is not None:
            facts.write(
                Word(os.path.basename(operands[0].value), os.path.basename(operands[0].value))
            )


def _repository(cwd: str | None) -> str | None:
    """The top of the work tree holding `cwd` (where ``.git`` is), or `cwd` itself."""
    if cwd is None:
        return None
    here = cwd
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return cwd
        here = parent


def _git_globals(
    words: list[Word], rule: Rule, table: RuleTable, facts: _Facts
) -> tuple[Rule | None, str | None]:
    """Read git's global options (``-C``, ``-c``, ``--git-dir``…), then its subcommand."""
    index = 1
    while index < len(words):
        word = words[index]
        value = word.value
        if value is None:
            facts.open_world.append(f"{word.text!r} is computed at run time and could be an option")
            return rule, None
        if not value.startswith("-"):
            break
        name, equals, attached = value.partition("=")
        taken: Word | None = None
        if name in rule.global_values:
            if equals:
                taken = Word(attached, attached)
            elif index + 1 < len(words):
                index += 1
                taken = words[index]
            else:
                return None, name
        elif name.startswith("-c") and len(name) > 2:
            name, taken = "-c", Word(value[2:], value[2:])
        facts.options.append(name)
        if name == "-C" and taken is not None:
            facts.cwd = resolve_path(taken, facts.cwd)
        elif name == "-c" and taken is not None:
            _git_config(taken, table, facts)
        elif name in rule.open_when:
            facts.open_world.append(f"git {name} can run other programs")
        elif name in ("--git-dir", "--work-tree") and taken is not None:
            # The repository acted on is there, not at cwd: a write subcommand writes it.
            path = resolve_path(taken, facts.cwd)
            if path is None:
                facts.open_world.append(f"git {name} names a place known only at run time")
            else:
                facts.git_dirs.append(path)
        index += 1
    return _subcommand([Word("git", "git"), *words[index:]], rule, facts)


def _git_config(setting: Word, table: RuleTable, facts: _Facts) -> None:
    key = (setting.value or "").split("=", 1)[0].lower()
    harmless = any(
        key == entry or (entry.endswith(".") and key.startswith(entry))
        for entry in table.harmless_git_config
    )
    if setting.value is None or not harmless:
        facts.open_world.append(
            f"git -c {setting.text} sets configuration that can run programs or reach hosts"
        )


def _find(
    words: list[Word],
    table: RuleTable,
    roots: Sequence[str],
    reparse: Reparse,
    depth: int,
    facts: _Facts,
) -> list[SimpleCommand]:
    """find: start paths are read; ``-delete`` writes them; ``-exec``… runs a command per
    match (normalized too, its ``{}`` unknown); ``-fprint FILE`` writes FILE."""
    nested: list[SimpleCommand] = []
    index = 1
    while (
        index < len(words)
        and (words[index].value or "").startswith("-")
        and words[index].value in ("-H", "-L", "-P")
    ):
        facts.options.append(words[index].value or "")
        index += 1
    starts: list[Word] = []
    while index < len(words):
        value = words[index].value
        if value is not None and (value.startswith("-") or value in ("(", "!", ")")):
            break
        starts.append(words[index])
        index += 1
    if not starts:
        starts = [Word(".", ".")]
    expression = words[index:]
    deletes = False
    position = 0
    while position < len(expression):
        word = expression[position]
        value = word.value
        position += 1
        if value is None:
            facts.open_world.append(
                f"{word.text!r} is computed at run time and could be a find action"
            )
            continue
        if value.startswith("-"):
            facts.options.append(value)
        if value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = position
            while end < len(expression) and expression[end].value not in (";", "+"):
                end += 1
            inner = [
                Word(w.text, None) if w.value is not None and "{}" in w.value else w
                for w in expression[position:end]
            ]
            position = end + 1
            inner_facts = _Facts(cwd=facts.cwd if value in ("-exec", "-ok") else None, dynamic=True)
            nested += _program(inner, depth, table, roots, reparse, inner_facts)
        elif value == "-delete":
            deletes = True
        elif value in ("-fprint", "-fprint0", "-fls", "-fprintf") and position < len(expression):
            facts.write(expression[position])
            position += 2 if value == "-fprintf" else 1
    for start in starts:
        (facts.write if deletes else facts.read)(start)
    return nested


_SED_WRITES = re.compile(r"(^|[;\n{}]\s*|\d\s*|\$\s*|/\s*)[wWe]\b|(^|[;\n{}])\s*[wWe]\s")


def _sed(facts: _Facts) -> None:
    """sed: the first operand is the script unless -e/-f gave one; a script that writes
    files (``w``, ``s///w``) or runs commands (``e``, ``s///e``) is open world."""
    scripts = [w for o, w in facts.values if o in ("-e", "--expression")]
    files = [w for o, w in facts.values if o in ("-f", "--file")]
    operands = facts.operands
    if not scripts and not files and operands:
        scripts, operands = [operands[0]], operands[1:]
        facts.reads = [p for p in facts.reads if p != resolve_path(scripts[0], facts.cwd)]
        facts.writes = [p for p in facts.writes if p != resolve_path(scripts[0], facts.cwd)]
    for file in files:
        facts.open_world.append(f"runs the sed script in {file.text}, which is not read here")
    for script in scripts:
        if script.value is None:
            facts.open_world.append("the sed script is computed at run time")
        elif not _sed_script_is_plain(script.value):
            facts.open_world.append("the sed script can write files or run commands (w, W, e)")


_SED_SUBSTITUTE = re.compile(r"s(.)(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1([a-zA-Z0-9]*)", re.S)
_SED_ADDRESS = re.compile(r"\\(.)(?:\\.|(?!\1).)*\1|/(?:\\.|[^/])*/", re.S)
_SED_TRANSLATE = re.compile(r"y(.)(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1", re.S)
_SED_TEXT = re.compile(r"[aic]\\?\s[^\n]*|[aic]\\\n[^\n]*")


def _sed_script_is_plain(script: str) -> bool:
    for match in _SED_SUBSTITUTE.finditer(script):
        if set(match.group(2)) & set("ewW"):
            return False
    rest = _SED_SUBSTITUTE.sub(";", script)
    rest = _SED_TRANSLATE.sub(";", rest)
    rest = _SED_ADDRESS.sub(" ", rest)
    rest = _SED_TEXT.sub(";", rest)
    rest = re.sub(r"#[^\n]*", "", rest)
    return not re.search(r"[ewW]", rest)


_AWK_ESCAPES = re.compile(r"\bsystem\s*\(|\|\s*getline|\bgetline\b|\|\s*\"|print[f]?[^;}]*[>|]|\|&")


def _awk(facts: _Facts) -> None:
    """awk: the first operand is the program unless -f named a file; a program that runs
    commands (``system``, pipes) or writes files (``print > f``) is open world."""
    files = [w for o, w in facts.values if o in ("-f", "--file")]
    operands = facts.operands
    for file in files:
        facts.open_world.append(f"runs the awk program in {file.text}, which is not read here")
    if not files and operands:
        program = operands[0]
        facts.reads = [p for p in facts.reads if p != resolve_path(program, facts.cwd)]
        if program.value is None:
            facts.open_world.append("the awk program is computed at run time")
        elif _AWK_ESCAPES.search(program.value):
            facts.open_world.append("the awk program can run commands or write files")
    if any(o == "-i" and (w.value or "").startswith("inplace") for o, w in facts.values):
        for word in operands[1:]:
            facts.write(word)


def _shell(
    handler: str, name: str, facts: _Facts, reparse: Reparse, depth: int
) -> list[SimpleCommand]:
    """``sh -c STRING`` and ``eval WORDS``: the string is parsed and judged in turn."""
    if handler == "eval":
        if any(word.value is None for word in facts.operands):
            facts.open_world.append("eval runs text computed at run time")
            return []
        text = " ".join(word.value or "" for word in facts.operands)
    else:
        scripts = [w for o, w in facts.values if o == "-c"]
        if not scripts:
            facts.open_world.append(f"{name} runs a script or its standard input, not read here")
            return []
        if scripts[0].value is None:
            facts.open_world.append(f"{name} -c runs text computed at run time")
            return []
        text = scripts[0].value
        facts.reads = []
    if not text.strip():
        return []
    return reparse(text, facts.cwd, depth + 1)


def _unknown(words: list[Word], facts: _Facts, roots: Sequence[str], why: str) -> SimpleCommand:
    facts.open_world.append(why)
    head = words[0] if words else Word("", "")
    name = os.path.basename(head.value) if head.value else head.text
    facts.operands = list(words[1:])
    return _finish(name, words, None, facts, roots, known=False, program=head.value or head.text)


def _finish(
    name: str,
    words: list[Word],
    subcommand: str | None,
    facts: _Facts,
    roots: Sequence[str],
    *,
    known: bool,
    program: str | None = None,
) -> SimpleCommand:
    program = program or name
    if "/" not in program and known:
        program = _which(program) or program
    elif "/" in program:
        program = os.path.realpath(
            program if os.path.isabs(program) else os.path.join(facts.cwd or "/", program)
        )
    dynamic = facts.dynamic or any(word.value is None or word.glob for word in words)
    reads = tuple(dict.fromkeys(facts.reads))
    writes = tuple(dict.fromkeys(facts.writes))
    open_world = tuple(dict.fromkeys(facts.open_world))
    return SimpleCommand(
        program=program,
        name=name,
        subcommand=subcommand,
        options=tuple(facts.options),
        operands=tuple(
            word.value if word.value is not None else word.text for word in facts.operands
        ),
        argv=tuple(word.value if word.value is not None else word.text for word in words),
        reads=reads,
        writes=writes,
        network=facts.network,
        process_control=facts.process_control,
        known=known,
        dynamic=dynamic,
        open_world=open_world,
        cwd=facts.cwd,
        repository=facts.repository,
        effect=_effect(
            known=known,
            reasons=open_world,
            reaches_out=facts.network or facts.process_control,
            writes=writes,
            roots=roots,
        ),
    )


def within(path: str, roots: Sequence[str]) -> bool:
    """Is `path` one of `roots` or under one? Both must be resolved already (`realpath`)."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def effect_of(command: SimpleCommand, roots: Sequence[str]) -> ShellEffect:
    """The command's class: open world if anything is unknown, reaches out, or writes
    outside `roots`; writes within roots if it writes at all; otherwise read-only."""
    return _effect(
        known=command.known,
        reasons=command.open_world,
        reaches_out=command.network or command.process_control,
        writes=command.writes,
        roots=roots,
    )


def _effect(
    *,
    known: bool,
    reasons: Sequence[str],
    reaches_out: bool,
    writes: Sequence[str],
    roots: Sequence[str],
) -> ShellEffect:
    if not known or reasons or reaches_out:
        return ShellEffect.OPEN_WORLD
    if writes:
        if all(within(path, roots) for path in writes):
            return ShellEffect.WRITES_WITHIN_ROOTS
        return ShellEffect.OPEN_WORLD
    return ShellEffect.READ_ONLY
