"""The parser front: command text → the simple commands bash would run, as words.

tree-sitter-bash reads the text; this module walks its tree and keeps what a policy needs:
every simple command (in lists, pipelines, subshells, loops, command and process
substitutions, heredoc bodies), its words, the variables assigned before it, the
redirections around it, and the working directory it runs in as far as `cd` lets us know.

A word is *static* when bash would give it the same value whatever the environment holds
(plain and quoted text); anything expanded at run time (``$x``, ``$(…)``, ``$'\\x72'``, brace
expansion, ``~user``) is *dynamic* and its value `None`: the rules never guess one.
Globs keep their text and are flagged, since their value is a set of paths under a prefix.

The text is refused before parsing when it holds characters a reader and bash could see
differently (control characters, invisible or non-standard spaces, bidi controls, lone
surrogates), and while parsing when tree-sitter reports an ERROR or MISSING node or the tree
holds a construct this walk does not model (function definitions could shadow any program).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import unicodedata
from collections.abc import Iterator

import tree_sitter
import tree_sitter_bash

MAX_COMMAND_CHARS = 64 * 1024
"""Longer texts are refused: no reviewer reads them and the walk's cost grows with them."""
MAX_DEPTH = 64
"""Deeper nesting (of the tree or of ``sh -c`` re-parses) is refused, not recursed into."""

_GLOB_CHARS = frozenset("*?[")
_ALLOWED_CONTROL = frozenset("\n\t")
# Unicode categories that render as nothing, as a space, or not at all: a reviewer could
# read `ls` where bash reads something else (or the reverse).
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


class Refusal(Exception):
    """Raised inside the walk when the text cannot be judged; `analyze` turns it into a value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclasses.dataclass(frozen=True, slots=True)
class Word:
    """One shell word: its value if static, else `None`; `text` is the source as written."""

    text: str
    value: str | None
    glob: bool = False

    @property
    def static(self) -> bool:
        return self.value is not None


@dataclasses.dataclass(frozen=True, slots=True)
class Redirect:
    """A redirection: `op` as written (``>``, ``>>``, ``<``, ``&>``, ``<<``, ``<<<``…), and
    the target word for file redirections (`None` for a descriptor copy or a heredoc)."""

    op: str
    target: Word | None


@dataclasses.dataclass(slots=True)
class RawCommand:
    """A simple command as parsed, before the rule table gives its words meaning."""

    words: list[Word]
    assignments: list[tuple[str, Word]]
    redirects: list[Redirect]
    cwd: str | None
    """The working directory it runs in; `None` when a `cd` made it unknowable."""
    text: str
    depth: int = 0
    """How many ``sh -c``/``eval`` re-parses led here."""


@dataclasses.dataclass(slots=True)
class _Scope:
    cwd: str | None
    commands: list[RawCommand]
    environment: list[tuple[str, Word]]
    """Variables set or exported outside any command (``PATH=/x; ls``, ``export A=1``)."""
    depth: int
    constructs: set[str] = dataclasses.field(default_factory=set)
    """The compound constructs met (list, pipeline, subshell…), for the ledger's summary."""
    pending: bool = False
    """`cwd` holds only if the last statement succeeded (it ran `cd`, maybe in an `&&` chain)."""


@functools.cache
def _language() -> tree_sitter.Language:
    return tree_sitter.Language(tree_sitter_bash.language())


_PARSERS = threading.local()


def _parser() -> tree_sitter.Parser:
    # A tree-sitter parser holds parse state: one per thread, since the harness analyzes
    # commands on worker threads.
    parser: tree_sitter.Parser | None = getattr(_PARSERS, "parser", None)
    if parser is None:
        parser = _PARSERS.parser = tree_sitter.Parser(_language())
    return parser


def refusal_of_text(text: str) -> str | None:
    """Why `text` is refused before parsing, or `None`."""
    if len(text) > MAX_COMMAND_CHARS:
        return f"the command is {len(text)} characters long; at most {MAX_COMMAND_CHARS} are read"
    if not text.strip():
        return "the command is empty"
    for index, char in enumerate(text):
        if char in _ALLOWED_CONTROL or " " <= char <= "~":
            continue
        category = unicodedata.category(char)
        if category in _REFUSED_CATEGORIES or (category == "Zs" and char != " "):
            name = unicodedata.name(char, f"U+{ord(char):04X}")
            return (
                f"character {index} is {name} (U+{ord(char):04X}), which a reader and bash "
                "could see differently; write it out or quote it visibly"
            )
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Parsed:
    """What `parse` found: the simple commands in the order met, the variables set outside
    any command, and the compound constructs around them."""

    commands: tuple[RawCommand, ...]
    environment: tuple[tuple[str, Word], ...]
    constructs: frozenset[str]


def parse(text: str, *, cwd: str | None, depth: int = 0) -> Parsed:
    """Walk `text` as bash would run it; raises `Refusal` when the text cannot be judged."""
    reason = refusal_of_text(text)
    if reason:
        raise Refusal(reason)
    if depth > MAX_DEPTH:
        raise Refusal(f"the command nests more than {MAX_DEPTH} shell re-parses")
    data = text.encode("utf-8", "surrogatepass")
    tree = _parser().parse(data)
    root = tree.root_node
    if root.has_error:
        bad = _first_error(root)
        where = f" at line {bad.start_point[0] + 1}, column {bad.start_point[1] + 1}" if bad else ""
        raise Refusal(f"the shell parser could not read the command{where}")
    scope = _Scope(cwd=cwd, commands=[], environment=[], depth=depth)
    _statement(root, scope, 0)
    return Parsed(tuple(scope.commands), tuple(scope.environment), frozenset(scope.constructs))


def _first_error(node: tree_sitter.Node) -> tree_sitter.Node | None:
    # A loop, not recursion: an unbalanced text can nest errors thousands deep.
    while not (node.type == "ERROR" or node.is_missing):
        child = next((c for c in node.children if c.has_error or c.is_missing), None)
        if child is None:
            return None
        node = child
    return node


def _text(node: tree_sitter.Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


# Nodes whose children are statements to walk in order, in the same scope.
_SEQUENCES = frozenset(
    {
        "program",
        "compound_statement",
        "do_group",
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "case_item",
        "negated_command",
    }
)
# Nodes that run their contents in a subshell: a `cd` inside does not leak out.
_SUBSHELLS = frozenset({"subshell", "command_substitution", "process_substitution"})
# Nodes that only compute values; commands hide in them only through substitutions.
_EXPRESSIONS = frozenset(
    {
        "test_command",
        "binary_expression",
        "unary_expression",
        "ternary_expression",
        "parenthesized_expression",
        "postfix_expression",
        "arithmetic_expansion",
        "c_style_for_statement",
        "case_statement",
        "for_statement",
        "comment",
    }
)


_CONSTRUCTS = {
    "list": "list",
    "pipeline": "pipeline",
    "subshell": "subshell",
    "command_substitution": "command substitution",
    "process_substitution": "process substitution",
    "redirected_statement": "redirection",
    "if_statement": "if",
    "while_statement": "while",
    "for_statement": "for",
    "c_style_for_statement": "for",
    "case_statement": "case",
    "compound_statement": "group",
    "negated_command": "negation",
}


def _statement(node: tree_sitter.Node, scope: _Scope, level: int) -> None:
    if level > MAX_DEPTH:
        raise Refusal(f"the command nests deeper than {MAX_DEPTH} levels")
    kind = node.type
    if not node.is_named:
        return
    if kind in _CONSTRUCTS:
        scope.constructs.add(_CONSTRUCTS[kind])
    if kind == "command":
        _command(node, scope, [], level)
    elif kind == "redirected_statement":
        _redirected(node, scope, level)
    elif kind == "list":
        _list(node, scope, level)
    elif kind == "pipeline" or kind in _SUBSHELLS:
        for child in node.named_children:
            _scoped(child, scope, level)
    elif kind in _SEQUENCES:
        if kind == "do_group" and _changes_directory(node):
            # A loop body that runs `cd` starts its second pass somewhere else.
            scope.cwd = None
        for child in node.children:
            if child.is_named and scope.pending:
                # After `;` or a newline the next statement runs whether `cd` worked or not.
                scope.cwd, scope.pending = None, False
            _statement(child, scope, level + 1)
    elif kind == "variable_assignment":
        name, word = _assignment(node, scope, level)
        scope.environment.append((name, word))
    elif kind == "variable_assignments":
        for child in node.named_children:
            _statement(child, scope, level + 1)
    elif kind in ("declaration_command", "unset_command"):
        _declaration(node, scope, level)
    elif kind in _EXPRESSIONS or kind in _VALUE_NODES:
        # Loop bodies and case arms are statements; the rest are values that can only run
        # commands through substitutions.
        for child in node.children:
            if child.type in ("do_group", "case_item", "compound_statement"):
                _statement(child, scope, level + 1)
            else:
                _substitutions(child, scope, level + 1)
    elif kind == "heredoc_body":
        _substitutions(node, scope, level + 1)
    else:
        raise Refusal(f"the command uses a construct that is not modelled here: {kind}")


def _changes_directory(node: tree_sitter.Node) -> bool:
    return any(part in ("cd", "pushd", "popd") for part in _text(node).replace(";", " ").split())


def _scoped(node: tree_sitter.Node, scope: _Scope, level: int) -> None:
    """Walk `node` as bash would in a subshell: a `cd` inside does not change our cwd."""
    cwd, pending = scope.cwd, scope.pending
    _statement(node, scope, level + 1)
    scope.cwd, scope.pending = cwd, pending


def _list(node: tree_sitter.Node, scope: _Scope, level: int) -> None:
    children = [child for child in node.children if child.type != "comment"]
    left, op, right = children[0], children[1].type, children[2]
    _statement(left, scope, level + 1)
    if op != "&&" and scope.pending:
        # `cd DIR || rest`: rest runs exactly when cd failed, wherever that left us.
        scope.cwd, scope.pending = None, False
    # `cd DIR && rest`: rest runs only if cd succeeded, so in DIR; `pending` stays set.
    _statement(right, scope, level + 1)


def change_directory(cwd: str | None, operands: list[Word]) -> str | None:
    """Where `cd OPERANDS` from `cwd` leads, or `None` if that is unknowable here."""
    if not operands:
        return os.path.realpath(os.path.expanduser("~"))
    if len(operands) != 1 or operands[0].value is None or operands[0].glob:
        return None
    target = operands[0].value
    if target == "-":
        return None
    if os.path.isabs(target):
        return os.path.realpath(target)
    if cwd is None:
        return None
    return os.path.realpath(os.path.join(cwd, target))


def _redirected(node: tree_sitter.Node, scope: _Scope, level: int) -> None:
    start = len(scope.commands)
    body = node.child_by_field_name("body")
    redirects: list[Redirect] = []
    trailing: list[tree_sitter.Node] = []
    if body is not None:
        _statement(body, scope, level + 1)
    for child in node.children:
        if not child.is_named or (body is not None and _same(child, body)):
            continue
        if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            redirects.extend(_redirects(child, scope, level, trailing))
        else:
            trailing.append(child)
    if redirects and len(scope.commands) == start:
        # `> file` alone (or around a body that runs no program) still opens the file.
        scope.commands.append(
            RawCommand([], [], [], cwd=scope.cwd, text=_text(node), depth=scope.depth)
        )
    for command in scope.commands[start:]:
        command.redirects.extend(redirects)
    for child in trailing:
        _statement(child, scope, level + 1)


def _same(a: tree_sitter.Node, b: tree_sitter.Node) -> bool:
    return a.start_byte == b.start_byte and a.end_byte == b.end_byte and a.type == b.type


def _redirects(
    node: tree_sitter.Node, scope: _Scope, level: int, trailing: list[tree_sitter.Node]
) -> Iterator[Redirect]:
    kind = node.type
    if kind == "file_redirect":
        op = next((_text(c) for c in node.children if not c.is_named), ">")
        destination = node.child_by_field_name("destination")
        if destination is None:
            raise Refusal(f"a redirection without a target: {_text(node)}")
        _substitutions(destination, scope, level + 1)
        if op in (">&", "<&") and (destination.type == "number" or _text(destination) == "-"):
            yield Redirect(op, None)  # a descriptor copy or close, not a file
        else:
            yield Redirect(op, word(destination))
    elif kind == "herestring_redirect":
        for child in node.named_children:
            _substitutions(child, scope, level + 1)
        yield Redirect("<<<", None)
    else:  # heredoc_redirect: its body expands unless the delimiter is quoted
        yield Redirect("<<", None)
        for child in node.named_children:
            if child.type == "file_redirect":
                yield from _redirects(child, scope, level, trailing)
            elif child.type == "heredoc_body":
                _substitutions(child, scope, level + 1)
            elif child.type not in ("heredoc_start", "heredoc_end"):
                # `cat <<EOF | grep x`: tree-sitter hangs the rest of the pipeline here.
                trailing.append(child)


def _command(node: tree_sitter.Node, scope: _Scope, redirects: list[Redirect], level: int) -> None:
    words: list[Word] = []
    assignments: list[tuple[str, Word]] = []
    own_redirects = list(redirects)
    trailing: list[tree_sitter.Node] = []
    for child in node.children:
        if not child.is_named:
            continue
        if child.type == "variable_assignment":
            assignments.append(_assignment(child, scope, level))
        elif child.type == "command_name":
            for part in child.named_children:
                _substitutions(part, scope, level + 1)
                words.append(word(part))
        elif child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            own_redirects.extend(_redirects(child, scope, level, trailing))
        elif child.type == "subshell":
            raise Refusal("a subshell in argument position is not modelled here")
        else:
            _substitutions(child, scope, level + 1)
            words.append(word(child))
    scope.commands.append(
        RawCommand(
            words=words,
            assignments=assignments,
            redirects=own_redirects,
            cwd=scope.cwd,
            text=_text(node),
            depth=scope.depth,
        )
    )
    if words and words[0].value in ("cd", "pushd", "popd"):
        # Whether it succeeded is known only to an `&&` chain (`_list`); see `pending`.
        operands = [w for w in words[1:] if not (w.value or "-").startswith("-") or w.value == "-"]
        changes = words[0].value == "cd" and len(operands) == len(words) - 1
        scope.cwd = change_directory(scope.cwd, operands) if changes else None
        scope.pending = True
    for child in trailing:
        _statement(child, scope, level + 1)


def _assignment(node: tree_sitter.Node, scope: _Scope, level: int) -> tuple[str, Word]:
    name_node = node.child_by_field_name("name")
    value_node = node.child_by_field_name("value")
    name = _text(name_node) if name_node is not None else _text(node).split("=", 1)[0]
    if value_node is None:
        return name, Word("", "")
    _substitutions(value_node, scope, level + 1)
    return name, word(value_node)


def _declaration(node: tree_sitter.Node, scope: _Scope, level: int) -> None:
    for child in node.named_children:
        if child.type == "variable_assignment":
            scope.environment.append(_assignment(child, scope, level))
        elif child.type == "variable_name":
            scope.environment.append((_text(child), Word(_text(child), None)))
        else:
            _substitutions(child, scope, level + 1)


# Value nodes tree-sitter-bash produces; anything else in a value position is refused.
_VALUE_NODES = frozenset(
    {
        "word",
        "string",
        "raw_string",
        "ansi_c_string",
        "translated_string",
        "string_content",
        "concatenation",
        "number",
        "simple_expansion",
        "expansion",
        "variable_name",
        "special_variable_name",
        "subscript",
        "array",
        "brace_expression",
        "extglob_pattern",
        "regex",
        "test_operator",
        "file_descriptor",
        "heredoc_content",
        "heredoc_start",
        "heredoc_end",
        "command_name",
        "arithmetic_expansion",
        "binary_expression",
        "unary_expression",
        "ternary_expression",
        "parenthesized_expression",
        "postfix_expression",
        "heredoc_body",
    }
)


def _substitutions(node: tree_sitter.Node, scope: _Scope, level: int) -> None:
    """Walk every command and process substitution inside a value, each in a subshell."""
    if level > MAX_DEPTH:
        raise Refusal(f"the command nests deeper than {MAX_DEPTH} levels")
    if node.type in ("command_substitution", "process_substitution"):
        scope.constructs.add(_CONSTRUCTS[node.type])
        _scoped(node, scope, level)
        return
    if node.is_named and node.type not in _VALUE_NODES:
        raise Refusal(f"the command uses a construct that is not modelled here: {node.type}")
    for child in node.children:
        _substitutions(child, scope, level + 1)


def word(node: tree_sitter.Node) -> Word:
    """The value bash gives one word node, when it is static."""
    text = _text(node)
    value, glob = _value(node)
    return Word(text, value, glob)


def _value(node: tree_sitter.Node) -> tuple[str | None, bool]:
    kind = node.type
    text = _text(node)
    if kind == "word":
        return _unquoted(text)
    if kind == "number":
        return text, False
    if kind == "raw_string":
        return text[1:-1], False
    if kind in ("string", "translated_string"):
        parts: list[str] = []
        for child in node.named_children:
            if child.type != "string_content":
                return None, False
            parts.append(_double_quoted(_text(child)))
        return "".join(parts), False
    if kind == "ansi_c_string":
        inner = text[2:-1]
        # Escapes (`$'\x72m'`) spell a different word than the text shows: left unknown.
        return (inner, False) if "\\" not in inner else (None, False)
    if kind == "concatenation":
        values: list[str] = []
        glob = False
        for child in node.children:
            part, part_glob = _value(child)
            if part is None:
                return None, False
            values.append(part)
            glob = glob or part_glob
        joined = "".join(values)
        if _braces(text):
            return None, False
        return joined, glob
    return None, False


def _braces(text: str) -> bool:
    """Does unquoted `text` look like a brace expansion (``{a,b}``, ``{1..3}``)?"""
    open_at = text.find("{")
    return open_at >= 0 and "}" in text[open_at:] and ("," in text or ".." in text)


def _unquoted(text: str) -> tuple[str | None, bool]:
    if _braces(text):
        return None, False
    if text.startswith("~"):
        head, _, rest = text.partition("/")
        if head != "~":
            return None, False  # ~user, ~+, ~-: someone else's home or the shell's state
        text = os.path.expanduser("~") + ("/" + rest if "/" in text else "")
    out: list[str] = []
    glob = False
    escaped = False
    for char in text:
        if escaped:
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            glob = glob or char in _GLOB_CHARS
            out.append(char)
    return "".join(out), glob


def _double_quoted(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in '$`"\\\n':
            if text[index + 1] != "\n":
                out.append(text[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)
