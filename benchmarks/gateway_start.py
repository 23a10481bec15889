"""How long a gateway with many tools takes to start, against the MCP SDK doing the same.

For each catalog size, a module of that many decorated Python functions is written to a
temporary folder, then, alternating, round after round:

(g) `toolkeeper serve CONFIG --http 127.0.0.1:PORT` over that module (`@toolkeeper.tool`
    functions, each compiled into a registry entry), timed from the process start until it
    prints that it listens;
(m) a plain MCP SDK `MCPServer` registering the same functions with `@server.tool()` and
    serving Streamable HTTP, timed from the process start until the port accepts.

Both start a fresh Python interpreter and import their stack, so the ratio compares like for
like. Goal: the gateway starts in ≤ 5 s at 10,000 tools. No thresholds are checked.

    python benchmarks/gateway_start.py [--sizes 100,1000,10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOL = '''
{decorator}
def read_item_{n}(key: str, limit: int = 10) -> dict:
    """Read item {n} by key.

    Args:
        key: The item key, e.g. "k-1".
        limit: How many versions to return.
    """
    return {{"key": key, "limit": limit}}
'''

MCP_SERVER = """
import sys
from mcp.server.mcpserver import MCPServer
import {module} as tools

server = MCPServer("bench")
for name in dir(tools):
    if name.startswith("read_item_"):
        server.tool()(getattr(tools, name))
server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
"""


def write_catalog(folder: Path, size: int) -> str:
    module = f"bench_tools_{size}"
    body = ["from toolkeeper import tool", ""]
    body += [TOOL.format(n=n, decorator='@tool(side_effect="none")') for n in range(size)]
    (folder / f"{module}.py").write_text("\n".join(body), encoding="utf-8")
    # The same functions undecorated, so the MCP server never imports toolkeeper.
    plain = [TOOL.format(n=n, decorator="") for n in range(size)]
    (folder / f"plain_{module}.py").write_text("\n".join(plain), encoding="utf-8")
    (folder / "mcp_server.py").write_text(
        MCP_SERVER.format(module=f"plain_{module}"), encoding="utf-8"
    )
    (folder / "toolkeeper.toml").write_text(
        f'name = "bench"\nhome = "state"\ntools = ["{module}"]\n'
        '[principals.bench]\ncapabilities = []\ntoken = "bench-token"\n',
        encoding="utf-8",
    )
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.05)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_gateway(folder: Path) -> float:
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen(
        ["toolkeeper", "serve", "toolkeeper.toml", "--http", f"127.0.0.1:{port}"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        while "listening" not in process.stdout.readline():
            if process.poll() is not None:
                raise RuntimeError("the gateway exited before it listened")
        return time.perf_counter() - started
    finally:
        process.kill()
        process.wait()


def start_mcp(folder: Path) -> float:
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "mcp_server.py", str(port)],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not accepts(port):
            if process.poll() is not None:
                raise RuntimeError("the MCP server exited before it listened")
            time.sleep(0.01)
        return time.perf_counter() - started
    finally:
        process.kill()
        process.wait()


def main(sizes: list[int], rounds: int) -> None:
    print(f"{'tools':>7} {'gateway s':>10} {'mcp SDK s':>10} {'ratio':>6}   (medians of {rounds})")
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="tk-start-") as scratch:
            folder = Path(scratch)
            write_catalog(folder, size)
            gateway, mcp = [], []
            for _ in range(rounds):
                gateway.append(start_gateway(folder))
                mcp.append(start_mcp(folder))
            g, m = statistics.median(gateway), statistics.median(mcp)
            print(f"{size:>7} {g:>10.2f} {m:>10.2f} {g / m:>6.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    main([int(s) for s in args.sizes.split(",")], args.rounds)
