"""Lint on public MCP catalogs, before and after: how much of what it says is worth reading.

Run: python benchmarks/lint_catalogs.py [--before REF] [CATALOG ...]

Lints every catalog (default: the public listings in tests/lint/catalogs, each with its
source repository and commit) twice, each in its own interpreter: with the lint of git ref
REF (default ``main``, extracted with ``git archive``) and with the lint of this tree. Prints
per catalog the tools, errors, warnings and info per tool, and every code that fires with the
share of tools it fires on; then the totals. Goals (docs/lint.md): every error is a real
defect, and warnings average under three per tool.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CATALOGS = ROOT / "tests" / "lint" / "catalogs"

# Runs inside the interpreter of one toolkeeper version: only APIs both versions have.
_PROBE = """
import json, sys
from toolkeeper.importers.catalog import load_catalog
from toolkeeper.lint import lint_catalog
for path in sys.argv[1:]:
    catalog = load_catalog(path)
    report = lint_catalog(catalog)
    print(json.dumps({
        "path": path,
        "tools": [c.ref for c in catalog.contracts],
        "findings": [[f.code, f.severity.value, f.contract] for f in report.findings],
    }))
"""


def lint_with(src: Path, paths: list[Path]) -> list[dict[str, Any]]:
    """Each catalog's tools and findings, as the toolkeeper under `src` lints them."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *map(str, paths)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def sources_of(ref: str, into: Path) -> Path | None:
    """The ``src`` tree of git ref `ref`, extracted under `into`; None if git cannot."""
    archive = into / "src.tar"
    done = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--output", str(archive), ref, "src"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(f"(no BEFORE: git archive {ref} failed: {done.stderr.strip()})")
        return None
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Counts per severity and, per code, how many tools it fires on."""
    tools = result["tools"]
    per_code: dict[str, set[str]] = defaultdict(set)
    severity_of: dict[str, str] = {}
    counts = {"error": 0, "warning": 0, "info": 0}
    for code, severity, contract in result["findings"]:
        counts[severity] += 1
        per_code[code].add(contract)
        severity_of[code] = severity
    return {"tools": len(tools), **counts, "codes": per_code, "severity": severity_of}


def render(label: str, stats: dict[str, Any]) -> list[str]:
    tools = stats["tools"] or 1
    lines = [
        f"  {label:<6} {stats['error']:>3} errors  {stats['warning'] / tools:5.2f} warnings/tool"
        f"  {stats['info'] / tools:5.2f} info/tool"
    ]
    ranked = sorted(stats["codes"].items(), key=lambda item: (-len(item[1]), item[0]))
    fired = [
        f"{code} {stats['severity'][code][0]} {len(on)}/{stats['tools']}" for code, on in ranked
    ]
    lines += [f"         {'  '.join(fired[i : i + 6])}" for i in range(0, len(fired), 6)]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("catalogs", nargs="*", type=Path, help="default: tests/lint/catalogs")
    parser.add_argument("--before", default="main", metavar="REF", help="git ref (main)")
    args = parser.parse_args()
    paths = args.catalogs or sorted(CATALOGS.glob("*.json"))
    after = [summarize(r) for r in lint_with(ROOT / "src", paths)]
    with tempfile.TemporaryDirectory() as scratch:
        src = sources_of(args.before, Path(scratch))
        before = [summarize(r) for r in lint_with(src, paths)] if src else []
    print(f"codes: CODE severity(e/w/i) tools-it-fires-on/tools; BEFORE = {args.before}")
    totals: dict[str, dict[str, int]] = {}
    for index, path in enumerate(paths):
        print(f"\n{path.name}  ({after[index]['tools']} tools)")
        for label, results in (("before", before), ("after", after)):
            if results:
                print("\n".join(render(label, results[index])))
                total = totals.setdefault(label, {"tools": 0, "error": 0, "warning": 0})
                for key in total:
                    total[key] += results[index][key]
    print()
    for label, total in totals.items():
        tools = total["tools"] or 1
        print(
            f"{label:<6} {len(paths)} catalogs, {total['tools']} tools: {total['error']} errors, "
            f"{total['warning'] / tools:.2f} warnings per tool"
        )


if __name__ == "__main__":
    main()
