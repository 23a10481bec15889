"""The `toolkeeper` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``, which adds an ``argparse`` parser whose ``func`` default
takes the parsed namespace and returns an exit code. Errors a user can fix are raised as
`ToolkeeperError` and printed as one clear line (or a JSON object with ``--format json``),
exit code 2; nothing prints a traceback for a mistake in the user's input.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence

from toolkeeper.errors import ToolkeeperError

COMMANDS: tuple[str, ...] = (
    "demo",
    "schema",
    "ledger",
    "approvals",
    "lint",
    "views",
    "serve",
    "client",
    "upstreams",
)
"""Subcommand modules, in the order `--help` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolkeeper",
        description="The governed tool layer between an LLM agent and the world.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"toolkeeper.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ToolkeeperError as exc:
        if getattr(args, "format", None) == "json":
            error = {"error": type(exc).__name__, "message": str(exc)}
            error.update({k: v for k, v in vars(exc).items() if v is not None})
            print(json.dumps(error, default=str), file=sys.stderr)
        else:
            print(f"toolkeeper: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
