"""`toolkeeper serve CONFIG [--http [HOST:PORT]]`: the MCP gateway.

Serves over stdio by default (for an MCP host that launches it as a subprocess); with
``--http`` it listens for Streamable HTTP clients and prints the endpoint URL once it accepts
connections. Log lines go to stderr, so stdout stays the protocol channel on stdio: each
stamped with its UTC time to the millisecond, one per call at INFO (the default level), and
scrubbed by the gateway's redactor (docs/observability.md).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from toolkeeper.errors import ConfigError

if TYPE_CHECKING:
    from toolkeeper.gateway.config.settings import GatewayConfig
    from toolkeeper.gateway.server import GatewayServer

_FROM_CONFIG = "config"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve governed tools to MCP clients (stdio, or HTTP with --http)"
    )
    parser.add_argument("config", help="gateway configuration file (.toml, .yaml or .json)")
    parser.add_argument(
        "--http",
        nargs="?",
        const=_FROM_CONFIG,
        default=None,
        metavar="HOST:PORT",
        help="serve Streamable HTTP on HOST:PORT (alone: the [http] host and port of CONFIG)",
    )
    parser.add_argument(
        "--log-level",
        type=str.lower,
        choices=LOG_LEVELS,
        default="info",
        help=f"stderr log level: {', '.join(LOG_LEVELS)} "
        "(default info: one line per call, upstream connections)",
    )
    parser.set_defaults(func=run)


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 hosts in brackets: ``[::1]:8765``)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(
            f"--http {text!r} is not HOST:PORT; write e.g. --http 127.0.0.1:8765 (port 0 picks "
            "a free port)",
            key="--http",
            value=text,
        )
    return host.strip("[]"), int(port)


def run(args: argparse.Namespace) -> int:
    # Imported here: the gateway pulls in the MCP server stack, which every other
    # subcommand (and `toolkeeper --help`) should not wait for.
    import anyio

    from toolkeeper.gateway.config.settings import load_config
    from toolkeeper.telemetry.exporting import exporting

    _log_to_stderr(args.log_level.upper())
    config = load_config(args.config)
    # Tools keep their own state beside the ledger; this is how they find it.
    os.environ["TOOLKEEPER_HOME"] = str(config.home.resolve())
    address = None
    if args.http not in (None, _FROM_CONFIG):
        address = parse_address(args.http)
    # This process is the gateway: its telemetry providers are the process's own.
    with exporting(config.telemetry, service=config.name, process_wide=True):
        if args.http is None:
            anyio.run(_stdio, config)
        else:
            anyio.run(_http, config, address)
    return 0


_LIBRARIES = ("mcp", "httpx", "httpx2", "uvicorn")
"""Loggers whose INFO lines (every session opened, every upstream HTTP request with its URL)
would bury toolkeeper's; they speak at WARNING unless the level is DEBUG."""


def _log_to_stderr(level: str) -> None:
    """Lines like ``2025-01-31T09:12:03.042Z INFO toolkeeper.calls: request=...``: UTC, so
    the lines of replicas in different zones sort together."""
    handler = logging.StreamHandler(sys.stderr)
    formatter = logging.Formatter(
        "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%S"
    )
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    logging.basicConfig(level=level, handlers=[handler])
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        for name in _LIBRARIES:
            logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))


async def _stdio(config: GatewayConfig) -> None:
    from toolkeeper.gateway.app import open_gateway, serve_stdio

    async with open_gateway(config, transport="stdio") as server:
        await _until_stopped(
            server, lambda: serve_stdio(server, max_message_bytes=config.limits.message_bytes)
        )


async def _http(config: GatewayConfig, address: tuple[str, int] | None) -> None:
    from toolkeeper.gateway.app import open_gateway, serve_http

    host, port = address if address is not None else (None, None)

    def ready(url: str) -> None:
        print(f"toolkeeper gateway listening on {url}", flush=True)

    async with open_gateway(config, transport="http") as server:
        await _until_stopped(
            server, lambda: serve_http(server, config, host=host, port=port, on_ready=ready)
        )


async def _until_stopped(server: GatewayServer, serve: Callable[[], Awaitable[None]]) -> None:
    """Run `serve` until it returns or the process is asked to stop (SIGTERM, SIGHUP). A
    signal's default action ends the process on the spot, and the ledger's records still
    queued behind (reads, rejections) would be lost with it; so a stop signal first flushes
    the ledger, then ends the process as the signal would have (exit status 128 + signal, as
    supervisors expect). Unwinding instead is not an option over stdio: the thread reading
    stdin cannot be interrupted. Over HTTP uvicorn takes SIGTERM itself while it serves,
    drains its connections and raises the signal again, which lands here."""
    import anyio

    async with anyio.create_task_group() as tasks:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                async for number in signals:
                    logging.getLogger(__name__).info(
                        "%s: flushing the ledger, then stopping", signal.Signals(number).name
                    )
                    try:
                        await anyio.to_thread.run_sync(server.harness.flush)
                    finally:
                        signal.signal(number, signal.SIG_DFL)
                        signal.raise_signal(number)

        tasks.start_soon(stop_on_signal)
        await serve()
        tasks.cancel_scope.cancel()
