"""How often the shipped read-only shell policy refuses, or asks a human about, an ordinary
read-only command — measured on tldr-pages examples (benchmarks/data/tldr_pages.md).

    python benchmarks/shell_false_refusals.py [--show N]

Which examples count as read-only is decided from the example's own text, never by the
analyzer under test (`is_read_only` below, fixed before any result was seen):

1. the command line names the page's program (this drops tldr's keystroke lines, e.g.
   less's ``q``);
2. the description says nothing of writing, changing, running or reaching out (no word of
   `_NOT_READ_ONLY`: save, write, delete, install, download, run, execute, set, kill,
   remote, server, url…). The list only ever grew, when a write slipped through it
   ("revert", "unset", "replace", "discard"); no word was dropped to let a command in;
3. the command redirects output to no file other than /dev/null and uses no ``sudo``;
4. bash itself accepts it (``bash -n``): a page's typo (an unterminated quote) is not an
   ordinary command.

Placeholders are filled in as tldr clients do: ``{{[-a|--all]}}`` → ``-a``, ``{{path/to/file}}``
→ ``path/to/file``, ``{{file1 file2 ...}}`` → ``file1 file2``; a placeholder standing for any
command (``{{command}}``, ``{{somecommand}}``, ``{{program}}``, ``{{arguments_source}}``)
becomes ``ls``, a command that
stands for itself. Every command runs from a scratch directory that is also the only
writable root.

The rate reported is (refused + sent to approval) / read-only examples. The text rule errs:
it calls some writes read-only ("Split a file…", "Unstage a file…"). Those it missed are
listed in `REVIEWED_WRITES`, each with what it writes, and a second rate is printed without
them; the review only ever removes commands the rule wrongly let in, never a read-only one
the analyzer refused.
"""

from __future__ import annotations

import argparse
import collections
import functools
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from toolkeeper.policy import Decision
from toolkeeper.runtime.invocation import Principal
from toolkeeper.shell.analysis import analyze
from toolkeeper.shell.policy import ShellPolicy, decide

DATA = Path(__file__).parent / "data" / "tldr_pages.md"

_NOT_READ_ONLY = re.compile(
    r"\b(save|saving|write|writes|writing|written|overwrit\w*|into (a|the) (target )?file|"
    r"to (a|the) file|create|creates|creating|delete|deletes|deleting|remove|removes|"
    r"removing|rename|move|moves|copy|copies|append|appends|in-place|in place|set|sets|"
    r"setting|change|changes|modify|modifies|install|installs|uninstall|update|updates|"
    r"upgrade|download|downloads|upload|push|pull|fetch|clone|commit|commits|send|sends|"
    r"run|runs|running|execute|executes|start|starts|stop|stops|kill|kills|restart|"
    r"terminate|signal|edit|edits|editor|apply|applies|add|adds|reset|restore|checkout|"
    r"switch|merge|rebase|stash|login|log in|connect|connects|remote|server|url|urls|"
    r"http|https|network|extract|compress|decompress|archive|mount|unmount|format a|"
    r"interactive|interactively|clear|clears|replace in|patch|store|stores|import|export|"
    r"generate|generates|build|builds|compile|compiles|launch|open|opens|attach|revert|"
    r"unset|replace|discard)\b",
    re.IGNORECASE,
)
_ANY_COMMAND = frozenset(
    {"command", "somecommand", "some_command", "program", "cmd", "arguments_source"}
)
_FILE_REDIRECT = re.compile(r"(?<![0-9&<])>>?\s*(?!\s*/dev/null)(?!&)")


_LDD = "may run the binary: the page itself warns against untrusted ones"
REVIEWED_WRITES = {
    "git help --web subcommand": "opens a web browser",
    "git restore --staged path/to/file": "changes the index",
    "git restore --staged :/": "changes the index",
    "git reset": "changes the index",
    "git reset -p path/to/file": "changes the index",
    "git bisect reset": "checks out another commit",
    "git bisect run path/to/test_script script arguments...": "runs a script at each step",
    "git archive --output path/to/file.tar HEAD:path/to/directory": "writes the archive file",
    "split -l 10 path/to/file": "writes the pieces into the directory",
    "split -n 5 path/to/file": "writes the pieces into the directory",
    "split -b 512 path/to/file": "writes the pieces into the directory",
    "split -C 512 path/to/file": "writes the pieces into the directory",
    "gzip -cd path/to/compressed_file.gz | split -l 1000 - split/": "writes the pieces",
    "coredumpctl debug": "runs a debugger",
    "coredumpctl debug ls": "runs a debugger",
    "coredumpctl debug -A \"-iex 'set debuginfod enabled on' -iex 'set pagination off' -ex bt\"": (
        "runs a debugger"
    ),
    "pygmentize -f html -l lexer -o output filename": "writes the HTML file",
    "pygmentize -f html -O linenos=1 -l lexer -o output filename": "writes the HTML file",
    "ldd path/to/binary": _LDD,
    "ldd --verbose path/to/binary": _LDD,
    "ldd --unused path/to/binary": _LDD,
    "ldd --data-relocs path/to/binary": _LDD,
    "ldd --function-relocs path/to/binary": _LDD,
    "neofetch --enable infoname": "creates its config file on first run (the page says so)",
    "neofetch --os_arch on": "creates its config file on first run (the page says so)",
    "neofetch --cpu_brand on": "creates its config file on first run (the page says so)",
    "glow github.com/user/repo": "fetches a README from GitHub",
    "systemctl enable unit": "enables a unit",
    "systemctl mask unit": "masks a unit",
    "systemctl daemon-reload": "reloads the service manager",
    "stty -echo": "changes the terminal's settings",
    "htmlq --pretty --filename in.html --output out.html": "writes out.html",
    "swapon path/to/file": "enables swap",
    "swapon --all": "enables swap",
    "swapon -L label": "enables swap",
}
"""Commands the text rule calls read-only that write (found by reading each refused one)."""


@dataclass(frozen=True)
class Example:
    page: str
    commit: str
    description: str
    command: str

    @property
    def program(self) -> str:
        return self.page.split("/", 1)[1].removesuffix(".md")


def load(path: Path = DATA) -> list[Example]:
    """Every (description, command) pair of the stored tldr pages, placeholders filled."""
    examples: list[Example] = []
    page = commit = description = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            page, _, commit = line[2:].partition(" @")
        elif line.startswith("- "):
            description = line[2:].strip()
        elif line.startswith("`") and line.endswith("`") and page:
            examples.append(Example(page, commit, description, fill(line[1:-1])))
    return examples


def fill(command: str) -> str:
    """Fill tldr's ``{{placeholders}}`` the way tldr clients render them."""

    def one(match: re.Match[str]) -> str:
        inner = match.group(1)
        if inner in _ANY_COMMAND:
            return "ls"
        alternatives = re.fullmatch(r"\[(.*)\]", inner)
        if alternatives:
            return alternatives.group(1).split("|")[0]
        if "|" in inner and " " not in inner:
            return inner.split("|")[0]
        return re.sub(r"\s*\.\.\.$", "", inner)

    return re.sub(r"\{\{(.*?)\}\}(?!\})", one, command)


def is_read_only(example: Example) -> bool:
    """The independent rule of the module docstring."""
    words = re.findall(r"[\w.+-]+", example.command)
    program = example.program.split("-")[0] if example.program.startswith("git-") else None
    names = {example.program, program} - {None}
    if not names & set(words):
        return False
    if _NOT_READ_ONLY.search(example.description):
        return False
    if _FILE_REDIRECT.search(example.command) or "sudo" in words:
        return False
    return _bash_accepts(example.command)


@functools.cache
def _bash_accepts(command: str) -> bool:
    """Does bash's own parser accept the text (``bash -n``: parse, never run)?"""
    done = subprocess.run(["bash", "-n", "-c", command], capture_output=True, check=False)
    return done.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", type=int, default=50, help="list this many misses")
    args = parser.parse_args()
    examples = load()
    policy = ShellPolicy()
    principal = Principal("benchmark")
    outcomes: dict[bool, collections.Counter[str]] = {
        True: collections.Counter(),
        False: collections.Counter(),
    }
    misses: list[tuple[Example, str]] = []
    reviewed = 0
    with tempfile.TemporaryDirectory() as scratch:
        for example in examples:
            analysis = analyze(example.command, cwd=scratch, roots=[scratch])
            decision = decide(analysis, principal=principal, policy=policy)
            read_only = is_read_only(example)
            outcomes[read_only][decision.decision.value] += 1
            if read_only and example.command in REVIEWED_WRITES:
                reviewed += 1
                if decision.decision is Decision.ALLOW:
                    print(f"  reviewed as a write but allowed: {example.command!r}")
            if read_only and decision.decision is not Decision.ALLOW:
                misses.append((example, analysis.refused or "; ".join(decision.reasons)))
    pages = {e.page for e in examples}
    read_only_total = sum(outcomes[True].values())
    missed = read_only_total - outcomes[True][Decision.ALLOW.value]
    print(f"tldr-pages examples: {len(examples)} commands from {len(pages)} pages ({DATA.name})")
    others = len(examples) - read_only_total
    print(f"read-only by the text rule: {read_only_total}; the others: {others}")
    print(f"read-only commands under the shipped read-only policy: {dict(outcomes[True])}")
    print(f"other commands under the same policy: {dict(outcomes[False])}")
    rate = missed / read_only_total if read_only_total else 0.0
    print(
        f"false refusal rate (refused or sent to approval): {missed}/{read_only_total} = {rate:.2%}"
    )
    truly = read_only_total - reviewed
    real = [m for m in misses if m[0].command not in REVIEWED_WRITES]
    print(
        f"without the {reviewed} reviewed writes: {len(real)}/{truly} = "
        f"{len(real) / truly if truly else 0.0:.2%}"
    )
    for example, why in misses[: args.show]:
        print(f"  {example.page}: {example.command!r}\n      {why[:160]}")
    sys.exit(0)


if __name__ == "__main__":
    main()
