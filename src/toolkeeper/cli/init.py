"""`toolkeeper init [DIR]`: write a minimal working gateway and say what to run next.

Four files: a tools module with two read-only ``@tool`` functions, the gateway configuration
(one principal, ``local``, that stdio clients act as and HTTP clients prove with a bearer
token), an operator policy file to grow, and the token itself in a file only its owner can
read. The token is never printed: the next commands read it from its file. Nothing existing
is overwritten.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
from pathlib import Path

from toolkeeper.errors import ConfigError

TOOLS_MODULE = "my_tools"
TOKEN_FILE = "local.token"

_TOOLS = '''"""The tools this gateway serves: each @tool function is one MCP tool.

The type hints are the input schema and the docstring is what the model reads. A tool that
changes something declares it: @tool(version="1.0.0", side_effect="reversible").
"""

from toolkeeper import tool


@tool(side_effect="none")
def greet(name: str) -> str:
    """Greet someone by name.

    Use when: the user asks to be greeted or introduces themselves.

    Args:
        name: The name to greet, as the user wrote it.
    """
    return f"Hello, {name}!"


@tool(side_effect="none")
def add(a: float, b: float) -> float:
    """Add two numbers and return the sum.

    Use when: the user needs an exact sum of two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b
'''

_CONFIG = """# A toolkeeper gateway (written by `toolkeeper init`). Paths are relative to this file.
#
#   toolkeeper serve {config}            # stdio: for an MCP host that launches it
#   toolkeeper serve {config} --http     # HTTP on http://127.0.0.1:{port}/mcp

name = "{name}"
home = ".toolkeeper"             # ledger, artifacts and tool state
tools = ["{module}"]             # {module}.py: the @tool functions served
policies = ["policy.cedar"]      # operator policy, on top of the shipped defaults
stdio_principal = "local"        # who a stdio client acts as

[principals.local]
tenant = "local"
capabilities = []
token_file = "{token}"       # the HTTP bearer token; only its owner may read it

[http]
host = "127.0.0.1"
port = {port}
"""

_POLICY = """// Operator policy (Cedar), added to toolkeeper's shipped defaults: read-only tools are
// allowed, committing tools wait for a human approval, and everything else is denied.
// A reversible tool needs a permit, for example (uncomment and name your tool):
//
// permit (
//   principal,
//   action == Toolkeeper::Action::"invoke",
//   resource is Toolkeeper::Tool
// )
// when { resource.id == "save_note" };
"""

_GITIGNORE = f"""# toolkeeper state and the bearer token stay out of version control.
.toolkeeper/
{TOKEN_FILE}
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "init", help="write a minimal working gateway (tools, configuration, policy, token)"
    )
    parser.add_argument(
        "directory", nargs="?", default=".", metavar="DIR", help="where to write it (default .)"
    )
    parser.add_argument(
        "--port", type=int, default=8765, help="the HTTP port it serves on (default 8765)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    if not 0 < args.port <= 65535:
        raise ConfigError(f"--port {args.port} is not a TCP port (1-65535)", key="--port")
    name = directory.resolve().name or "toolkeeper"
    files = {
        f"{TOOLS_MODULE}.py": _TOOLS,
        "gateway.toml": _CONFIG.format(
            name=name,
            module=TOOLS_MODULE,
            token=TOKEN_FILE,
            port=args.port,
            config=shlex.quote(str(directory / "gateway.toml")),
        ),
        "policy.cedar": _POLICY,
        ".gitignore": _GITIGNORE,
    }
    existing = [n for n in [*files, TOKEN_FILE] if (directory / n).exists()]
    if existing:
        raise ConfigError(
            f"{directory} already has {', '.join(existing)}; toolkeeper init overwrites "
            "nothing: pick an empty or new directory",
            key="DIR",
            value=str(directory),
        )
    directory.mkdir(parents=True, exist_ok=True)
    for file_name, text in files.items():
        (directory / file_name).write_text(text, encoding="utf-8")
    _write_secret(directory / TOKEN_FILE, secrets.token_urlsafe(32))
    _print_next(directory, args.port)
    return 0


def _write_secret(path: Path, token: str) -> None:
    """Created with mode 0600 from the start: no moment where another user could read it."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(token + "\n")


def _print_next(directory: Path, port: int) -> None:
    config = shlex.quote(str(directory / "gateway.toml"))
    token = shlex.quote(str(directory / TOKEN_FILE))
    url = f"http://127.0.0.1:{port}/mcp"
    print(
        f"Wrote a gateway to {directory}:\n"
        f"  {TOOLS_MODULE}.py    two tools: greet, add\n"
        "  gateway.toml   the configuration (principal 'local')\n"
        "  policy.cedar   your policy, on top of the shipped defaults\n"
        f"  {TOKEN_FILE}    local's HTTP bearer token, readable by you only\n"
        "\n"
        "Next, serve it over stdio (for an MCP host that launches it):\n"
        f"  toolkeeper serve {config}\n"
        "or over HTTP, and call it from a second terminal:\n"
        f"  toolkeeper serve {config} --http\n"
        f'  export TOOLKEEPER_URL={url} TOOLKEEPER_TOKEN="$(cat {token})"\n'
        "  toolkeeper tools\n"
        "  toolkeeper call greet name=Ada"
    )
