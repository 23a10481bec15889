"""`toolkeeper ledger list|show|tail`: read the ledger an operator or auditor needs."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toolkeeper.errors import ConfigError
from toolkeeper.ledger import InvocationRecord
from toolkeeper.ledger.sqlite import SQLiteLedger

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str | None) -> float | None:
    """`30m`, `2h`, `1d` ago, or an ISO 8601 timestamp."""
    if text is None:
        return None
    if text[:-1].isdigit() and text[-1] in _UNITS:
        return time.time() - int(text[:-1]) * _UNITS[text[-1]]
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"--since {text!r} is neither a duration (30m, 2h, 1d) nor an ISO 8601 time "
            "(2026-11-29T10:00:00)",
            key="--since",
            value=text,
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def open_ledger(home: str) -> SQLiteLedger:
    path = Path(home) / "ledger.db"
    if not path.exists():
        raise ConfigError(
            f"no ledger at {path}; run a tool call first (e.g. `toolkeeper demo`) or pass "
            "--home DIR where the ledger lives",
            key="--home",
            value=home,
        )
    return SQLiteLedger(path)


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home", default=".toolkeeper", help="state directory (default .toolkeeper)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("ledger", help="read the invocation ledger")
    commands = parser.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    for name, help_text in (
        ("list", "list invocations, newest first"),
        ("tail", "follow new invocations"),
    ):
        sub = commands.add_parser(name, help=help_text)
        add_common(sub)
        sub.add_argument("--status", help="succeeded, rejected, failed, timed_out, ...")
        sub.add_argument("--tool", help="tool id, id@version, or the name the model used")
        sub.add_argument("--principal", help="principal id")
        sub.add_argument("--since", help="30m, 2h, 1d or an ISO 8601 time")
        sub.add_argument("--limit", type=int, default=50)
        sub.set_defaults(func=run_tail if name == "tail" else run_list)
    show = commands.add_parser("show", help="one invocation with every stage event")
    add_common(show)
    show.add_argument("request_id")
    show.set_defaults(func=run_show)


def _line(r: InvocationRecord) -> str:
    when = datetime.fromtimestamp(r.created_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"{when}  {r.request_id}  {(r.status or r.state.value):<16} "
        f"{r.contract_ref or r.tool:<36} {r.principal_id:<12} call={r.call_id}"
    )


def _as_json(r: InvocationRecord) -> dict[str, Any]:
    data = asdict(r)
    data["state"] = r.state.value
    return data


def _query(
    args: argparse.Namespace, ledger: SQLiteLedger, since: float | None
) -> list[InvocationRecord]:
    return ledger.query(
        status=args.status, tool=args.tool, principal=args.principal, since=since, limit=args.limit
    )


def run_list(args: argparse.Namespace) -> int:
    ledger = open_ledger(args.home)
    records = _query(args, ledger, parse_since(args.since))
    if args.format == "json":
        print(json.dumps([_as_json(r) for r in records], default=str, indent=2))
    else:
        for r in records:
            print(_line(r))
        print(f"{len(records)} invocation(s)")
    return 0


def run_show(args: argparse.Namespace) -> int:
    ledger = open_ledger(args.home)
    record = ledger.get(args.request_id)
    if record is None:
        raise ConfigError(
            f"no invocation {args.request_id!r} in {ledger.path}; list them with "
            "`toolkeeper ledger list`",
            key="request_id",
            value=args.request_id,
        )
    events = ledger.events(args.request_id)
    if args.format == "json":
        data = _as_json(record)
        data["events"] = [asdict(e) for e in events]
        print(json.dumps(data, default=str, indent=2))
        return 0
    print(_line(record))
    print(f"  arguments: {json.dumps(record.arguments, default=str)}")
    print(
        f"  effect: {record.effect_state}  attempts: {record.attempts}  "
        f"approval: {record.approval_id}"
    )
    for event in events:
        offset = (event.at - record.created_at) * 1000
        shown = json.dumps(event.data, default=str) if event.data else ""
        print(f"  +{offset:8.2f} ms  {event.stage:<16} {event.kind:<20} {shown}")
    if record.envelope:
        print("  envelope:")
        print("    " + json.dumps(record.envelope, default=str, indent=2).replace("\n", "\n    "))
    return 0


def run_tail(args: argparse.Namespace) -> int:
    """Print matching invocations as they complete, until interrupted."""
    ledger = open_ledger(args.home)
    since = parse_since(args.since) or time.time()
    seen: set[str] = set()
    while True:
        for record in reversed(_query(args, ledger, since)):
            key = f"{record.request_id}:{record.status}"
            if key in seen:
                continue
            seen.add(key)
            print(
                json.dumps(_as_json(record), default=str)
                if args.format == "json"
                else _line(record),
                flush=True,
            )
        time.sleep(0.5)
