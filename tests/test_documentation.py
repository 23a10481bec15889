"""Every code block in README.md and docs/*.md runs or parses, so the docs cannot drift from
the code they describe.

- ```python blocks run in order, one namespace per file, in a temporary working directory
  (with `examples/` and `tests/` linked in, since the docs point at shipped files). A block that
  needs a network server or a real vendor key is preceded by `<!-- not run: REASON -->`;
  the reason is required, and the block must still compile.
- ```sh, ```bash and ```console blocks: every `toolkeeper ...` line must parse with the
  CLI's own argparse parser (nothing is executed: some of them start servers).
- ```toml blocks (all but contract files) load with the gateway's configuration loader.
- ```cedar blocks parse with the policy engine. A ```cedar or ```toml block whose first line
  is a comment naming a relative path (`// ops/payments.cedar`, `# gateway.toml`) is also
  written there, so a later python block of the same file can read it.
- Every relative link and every backticked repository path (`docs/...`, `examples/...`,
  `tests/...`, `benchmarks/...`, `scripts/...`, `src/...`) names a file that exists.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolkeeper.cli import build_parser
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.policy import CedarPolicyEngine

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"<!--\s*not run:?(.*?)-->\s*$", re.DOTALL)
PATH_COMMENT = re.compile(r"^\s*(?://|#)\s*([\w./-]+\.(?:cedar|toml))\s*$")
REPO_PATH = re.compile(r"`(?:python )?((?:docs|examples|tests|benchmarks|scripts|src)/[\w./-]*\w)")
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, text, the line it starts on and its not-run reason."""

    language: str
    text: str
    line: int
    not_run: str | None


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip()
        marker = NOT_RUN.search(before[-300:]) if before.endswith("-->") else None
        found.append(
            Block(
                language=match.group(1),
                text=match.group(2),
                line=text.count("\n", 0, match.start()) + 1,
                not_run=marker.group(1).strip() if marker else None,
            )
        )
    return found


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


@pytest.mark.parametrize("path", DOCS, ids=_ids(DOCS))
def test_not_run_markers_give_a_reason(path: Path) -> None:
    for block in blocks(path):
        if block.not_run is not None:
            assert block.not_run, f"{path.name}:{block.line}: `<!-- not run -->` needs a reason"


@pytest.mark.parametrize("path", DOCS, ids=_ids(DOCS))
def test_python_blocks_run(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for shipped in ("examples", "tests"):
        (tmp_path / shipped).symlink_to(ROOT / shipped)
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}"}
    for block in blocks(path):
        _write_named_file(block, tmp_path)
        if block.language != "python":
            continue
        code = compile(block.text, f"{path.name}:{block.line}", "exec")  # not-run ones too
        if block.not_run is not None:
            continue
        try:
            exec(code, namespace)  # the docs are ours; running them is the point
        except Exception as exc:
            pytest.fail(f"{path.name}:{block.line}: the python block raised {exc!r}")
    for value in namespace.values():  # harnesses the docs opened: close their ledgers
        close = getattr(value, "close", None)
        if type(value).__name__ == "Harness" and callable(close):
            close()
    capsys.readouterr()


def _write_named_file(block: Block, cwd: Path) -> None:
    if block.language not in ("cedar", "toml"):
        return
    first = block.text.split("\n", 1)[0]
    named = PATH_COMMENT.match(first)
    if named:
        target = cwd / named.group(1)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text, encoding="utf-8")


def _toolkeeper_commands(text: str) -> list[list[str]]:
    """The arguments of every `toolkeeper` command in a shell block, also after `&&`, `;` or
    `|` (the quick start installs, then serves)."""
    commands = []
    for raw in text.splitlines():
        words = shlex.split(raw.strip().removeprefix("$ "), comments=True)
        segment: list[str] = []
        for word in [*words, ";"]:
            if word in ("&&", "||", "|", ";"):
                if segment[:1] == ["toolkeeper"]:
                    commands.append(segment[1:])
                segment = []
            else:
                segment.append(word)
    return commands


@pytest.mark.parametrize("path", DOCS, ids=_ids(DOCS))
def test_toolkeeper_commands_parse(path: Path) -> None:
    for block in blocks(path):
        if block.language not in ("sh", "bash", "console", "shell"):
            continue
        for args in _toolkeeper_commands(block.text):
            parser = build_parser(next((a for a in args if not a.startswith("-")), None))
            try:
                parser.parse_args(args)
            except SystemExit as exc:
                command = shlex.join(["toolkeeper", *args])
                where = f"{path.name}:{block.line}"
                pytest.fail(f"{where}: `{command}` does not parse (exit {exc.code})")


@pytest.mark.parametrize("path", DOCS, ids=_ids(DOCS))
def test_gateway_configs_load(path: Path, tmp_path: Path) -> None:
    for index, block in enumerate(blocks(path)):
        if block.language != "toml" or block.not_run is not None:
            continue
        if "input_schema" in block.text:  # a contract file, not a gateway configuration
            continue
        config = tmp_path / f"block{index}.toml"
        config.write_text(block.text, encoding="utf-8")
        try:
            load_config(config)
        except Exception as exc:
            pytest.fail(f"{path.name}:{block.line}: the gateway config does not load: {exc}")


@pytest.mark.parametrize("path", DOCS, ids=_ids(DOCS))
def test_cedar_blocks_parse(path: Path, tmp_path: Path) -> None:
    for index, block in enumerate(blocks(path)):
        if block.language != "cedar" or block.not_run is not None:
            continue
        policy = tmp_path / f"block{index}.cedar"
        policy.write_text(block.text, encoding="utf-8")
        try:
            CedarPolicyEngine(policy_files=[policy])
        except Exception as exc:
            pytest.fail(f"{path.name}:{block.line}: the Cedar block does not parse: {exc}")


@pytest.mark.parametrize("path", DOCS, ids=_ids(DOCS))
def test_cited_files_exist(path: Path) -> None:
    text = COMMENT.sub("", path.read_text(encoding="utf-8"))  # comments are not rendered
    missing = []
    for match in LINK.finditer(text):
        target = match.group(1)
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (path.parent / target).exists():
            missing.append(target)
    for match in REPO_PATH.finditer(text):
        cited = match.group(1)
        if "/.toolkeeper" in cited:  # state a run creates, not a file of the repository
            continue
        if not (ROOT / cited).exists() and not any(ROOT.glob(cited)):
            missing.append(cited)
    assert not missing, f"{path.name} cites files that are not in the repository: {missing}"


def test_every_docs_page_is_indexed() -> None:
    index = COMMENT.sub("", (ROOT / "docs" / "README.md").read_text(encoding="utf-8"))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    missing = sorted(p for p in pages if f"({p})" not in index)
    assert not missing, f"docs/README.md does not link {missing}: add (or uncomment) a line each"


def test_readme_stays_short() -> None:
    """The README is the newcomer's first page; everything else belongs in docs/."""
    assert len((ROOT / "README.md").read_bytes()) < 10_500
