"""`toolkeeper ledger list|show|tail|reconcile|export|prune`: read, settle and trim the ledger.

Everything printed from the ledger goes through `escaping.visible`: ids, names and reasons
come from clients and models, and must not forge a line or steer the terminal.

Every action takes the ledger from ``--home`` (the SQLite ledger there) or from ``--config``
(a gateway configuration: the SQLite ledger in its home, or its PostgreSQL ledger; for
`reconcile` also its tools, whose read-back hooks settle unknown effects).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkeeper.cli.conventions import add_format, positive
from toolkeeper.cli.escaping import visible
from toolkeeper.errors import ConfigError
from toolkeeper.ledger import InvocationRecord, Ledger
from toolkeeper.ledger.retention import (
    Pruned,
    RetentionPolicy,
    apply_policy,
    export,
    parse_duration,
    prune_archived,
)
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.runtime.envelope import EffectState, Status

if TYPE_CHECKING:
    from toolkeeper.gateway.config.settings import GatewayConfig
    from toolkeeper.runtime.reconciliation import Reconciliation

_DEFAULT_HOME = ".toolkeeper"


def parse_since(text: str | None, key: str = "--since") -> float | None:
    """`30m`, `2h`, `1d` ago, or an ISO 8601 timestamp."""
    if text is None:
        return None
    seconds = parse_duration(text)
    if seconds is not None:
        return time.time() - seconds
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"{key} {text!r} is neither a duration (30m, 2h, 1d) nor an ISO 8601 time "
            "(2026-11-29T10:00:00)",
            key=key,
            value=text,
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def open_ledger(home: str) -> SQLiteLedger:
    path = Path(home) / "ledger.db"
    if not path.exists():
        raise ConfigError(
            f"no ledger at {path}; pass --home DIR where the ledger lives, or --config CONFIG "
            "of the gateway that wrote it",
            key="--home",
            value=home,
        )
    return SQLiteLedger(path)


def add_common(parser: argparse.ArgumentParser) -> None:
    """--home, --config and --format: where the ledger is and how to print."""
    parser.add_argument(
        "--home", default=None, help=f"state directory of a SQLite ledger (default {_DEFAULT_HOME})"
    )
    parser.add_argument(
        "--config",
        default=None,
        help="a gateway configuration: its ledger (the SQLite one in its home, or its "
        "PostgreSQL one from ledger_dsn_env)",
    )
    add_format(parser)


def ledger_of(args: argparse.Namespace) -> Ledger:
    """The ledger `--config` or `--home` names; a SQLite ledger must already exist."""
    return _ledger(args, _config(args))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("ledger", help="read, reconcile and trim the invocation ledger")
    commands = parser.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    for name, help_text in (
        ("list", "list invocations, newest first"),
        ("tail", "follow new invocations"),
    ):
        sub = commands.add_parser(name, help=help_text)
        add_common(sub)
        sub.add_argument(
            "--status",
            choices=[s.value for s in Status],
            metavar="STATUS",
            help=f"one of {', '.join(s.value for s in Status)}",
        )
        sub.add_argument("--tool", help="tool id, id@version, or the name the model used")
        sub.add_argument("--principal", help="principal id")
        sub.add_argument(
            "--effect-state",
            choices=[e.value for e in EffectState],
            metavar="STATE",
            help=f"one of {', '.join(e.value for e in EffectState)}",
        )
        sub.add_argument("--since", help="30m, 2h, 1d or an ISO 8601 time")
        sub.add_argument(
            "--limit",
            type=positive,
            default=50,
            metavar="N",
            help="at most N invocations (default 50)",
        )
        sub.set_defaults(func=run_tail if name == "tail" else run_list)
    show = commands.add_parser("show", help="one invocation with every stage event")
    add_common(show)
    show.add_argument("request_id")
    show.set_defaults(func=run_show)

    reconcile = commands.add_parser(
        "reconcile", help="settle calls a crash left in flight or with an unknown effect"
    )
    add_common(reconcile)
    reconcile.add_argument(
        "--foreign-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="treat intents another host wrote as abandoned after this many seconds "
        "(default: the configuration's, or 3600); 0 once you know that host is gone",
    )
    reconcile.set_defaults(func=run_reconcile)
    exporting = commands.add_parser(
        "export", help="write invocations with their events to a JSON-lines archive"
    )
    add_common(exporting)
    exporting.add_argument("--out", required=True, help="archive file to write")
    exporting.add_argument(
        "--before", help="only invocations created before: 30d (ago) or an ISO 8601 time"
    )
    exporting.set_defaults(func=run_export)
    prune = commands.add_parser(
        "prune",
        help="delete settled invocations that were exported or the retention policy drops",
    )
    add_common(prune)
    prune.add_argument("--archive", help="delete what this export holds (settled, unchanged)")
    prune.add_argument("--max-age", help="delete settled invocations older than this: 90d")
    prune.add_argument("--max-rows", type=int, help="keep at most this many invocations")
    prune.set_defaults(func=run_prune)


def _line(r: InvocationRecord) -> str:
    when = datetime.fromtimestamp(r.created_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"{when}  {visible(r.request_id)}  {visible(r.status or r.state.value):<16} "
        f"{visible(r.contract_ref or r.tool):<36} {visible(r.principal_id):<12} "
        f"call={visible(r.call_id)}"
    )


def _as_json(r: InvocationRecord) -> dict[str, Any]:
    data = asdict(r)
    data["state"] = r.state.value
    return data


def _query(args: argparse.Namespace, ledger: Ledger, since: float | None) -> list[InvocationRecord]:
    return ledger.query(
        status=args.status,
        tool=args.tool,
        principal=args.principal,
        effect_state=args.effect_state,
        since=since,
        limit=args.limit,
    )


def run_list(args: argparse.Namespace) -> int:
    since = parse_since(args.since)
    ledger = ledger_of(args)
    try:
        records = _query(args, ledger, since)
    finally:
        ledger.close()
    if args.format == "json":
        print(json.dumps([_as_json(r) for r in records], default=str, indent=2))
    else:
        for r in records:
            print(_line(r))
        print(f"{len(records)} invocation(s)")
    return 0


def run_show(args: argparse.Namespace) -> int:
    ledger = ledger_of(args)
    try:
        record = ledger.get(args.request_id)
        events = ledger.events(args.request_id) if record is not None else []
        tree = _tree(ledger, args.request_id) if record is not None else []
    finally:
        ledger.close()
    if record is None:
        raise ConfigError(
            f"no invocation {args.request_id!r} in this ledger; list them with "
            "`toolkeeper ledger list`",
            key="request_id",
            value=args.request_id,
        )
    if args.format == "json":
        data = _as_json(record)
        data["events"] = [asdict(e) for e in events]
        data["calls"] = [
            {
                "depth": depth,
                "request_id": c.request_id,
                "call_id": c.call_id,
                "tool": c.contract_ref or c.tool,
                "status": c.status,
                "effect_state": c.effect_state,
            }
            for depth, c in tree
        ]
        print(json.dumps(data, default=str, indent=2))
        return 0
    print(_line(record))
    print(f"  arguments: {json.dumps(record.arguments, default=str)}")
    print(
        f"  effect: {visible(record.effect_state)}  attempts: {record.attempts}  "
        f"approval: {visible(record.approval_id)}"
    )
    for event in events:
        offset = (event.at - record.created_at) * 1000
        shown = json.dumps(event.data, default=str) if event.data else ""
        print(f"  +{offset:8.2f} ms  {visible(event.stage):<16} {visible(event.kind):<20} {shown}")
    if record.envelope:
        print("  envelope:")
        print("    " + json.dumps(record.envelope, default=str, indent=2).replace("\n", "\n    "))
    if tree:
        print("  calls made under it:")
        for depth, child in tree:
            print(
                f"  {'  ' * depth}└ {visible(child.call_id)}  {visible(child.request_id)}  "
                f"{visible(child.contract_ref or child.tool)}  "
                f"{visible(child.status or child.state.value)}  "
                f"effect {visible(child.effect_state)}"
            )
    return 0


PARENT_TOOLS = ("toolkeeper.run_code@",)
"""Tools whose calls make calls of their own."""
TREE_LIMIT = 10_000
"""Calls `ledger show` lists under one request, all depths together."""


def _tree(ledger: Ledger, request_id: str) -> list[tuple[int, InvocationRecord]]:
    """The calls made under `request_id`, depth first: a Code Mode program's inner calls,
    and the run_code calls that continued it after an approval with theirs."""
    shown: list[tuple[int, InvocationRecord]] = []
    stack = [(0, child) for child in reversed(ledger.children(request_id, limit=TREE_LIMIT))]
    while stack and len(shown) < TREE_LIMIT:
        depth, record = stack.pop()
        shown.append((depth, record))
        if (record.contract_ref or record.tool).startswith(PARENT_TOOLS):
            # Only a program's run_code calls have calls under them: one query each, not one
            # per inner call of a 10,000-call program.
            below = ledger.children(record.request_id, limit=TREE_LIMIT)
            stack.extend((depth + 1, child) for child in reversed(below))
    return shown


def run_tail(args: argparse.Namespace) -> int:
    """Print matching invocations as they complete, until interrupted."""
    ledger = ledger_of(args)
    since = parse_since(args.since) or time.time()
    seen: set[str] = set()
    # To stderr, so a pipe reading stdout gets invocations only; without it a quiet ledger
    # looks like a hung command.
    print("following the ledger for new invocations; Ctrl-C stops", file=sys.stderr, flush=True)
    try:
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
    finally:
        ledger.close()


# -- reconcile, export, prune ---------------------------------------------------------------


def _config(args: argparse.Namespace) -> GatewayConfig | None:
    if args.config is None:
        return None
    if args.home is not None:
        raise ConfigError(
            "pass --config or --home, not both: the configuration names its own home "
            "(or its PostgreSQL ledger)",
            key="--home",
            value=args.home,
        )
    from toolkeeper.gateway.config.settings import load_config

    return load_config(args.config)


def _ledger(args: argparse.Namespace, config: GatewayConfig | None) -> Ledger:
    """The ledger `--config` or `--home` names; a SQLite ledger must already exist."""
    if config is None:
        return open_ledger(args.home or _DEFAULT_HOME)
    dsn = config.ledger_dsn()
    if dsn is not None:
        from toolkeeper.ledger.postgres import PostgresLedger

        return PostgresLedger(dsn)
    return open_ledger(str(config.home))


def run_reconcile(args: argparse.Namespace) -> int:
    """One reconciliation pass, as the gateway runs at start and on its interval."""
    from toolkeeper.runtime.harness import Harness

    config = _config(args)
    if config is None:
        home = args.home or _DEFAULT_HOME
        harness = Harness(home=home, ledger=open_ledger(home), recover=False)
    else:
        from toolkeeper.gateway.loader import build_harness

        _ledger(args, config).close()  # a missing SQLite ledger is an error, not a new one
        harness = build_harness(config, recover=False)
    try:
        report = harness.reconcile_sync(foreign_intent_after=args.foreign_after)
    finally:
        harness.close()
    _print_reconciliation(report, args.format, with_tools=config is not None)
    return 0


def _print_reconciliation(report: Reconciliation, form: str, *, with_tools: bool) -> None:
    if form == "json":
        data: dict[str, Any] = dict(report.counts())
        data["settled"] = [
            {"request_id": r.request_id, "tool": r.contract_ref or r.tool, "status": r.status}
            for r in report.settled
        ]
        data["unsettled"] = [asdict(u) for u in report.unsettled]
        print(json.dumps(data, indent=2))
        return
    for record in report.settled:
        print(
            f"settled  {visible(record.request_id)}  {visible(record.status):<10} "
            f"{visible(record.contract_ref or record.tool)}"
        )
    for left in report.unsettled:
        print(f"unknown  {visible(left.request_id)}  {visible(left.tool)}: {visible(left.reason)}")
    print(report.summary())
    if report.unsettled and not with_tools:
        print(
            "(without --config no tool is loaded, so nothing can be read back: pass the "
            "gateway configuration to run its read-back hooks)"
        )


def run_export(args: argparse.Namespace) -> int:
    ledger = _ledger(args, _config(args))
    try:
        count = export(ledger, args.out, before=parse_since(args.before, "--before"))
    finally:
        ledger.close()
    if args.format == "json":
        print(json.dumps({"exported": count, "archive": args.out}))
    else:
        print(f"exported {count} invocation(s) with their events to {visible(args.out)}")
    return 0


def run_prune(args: argparse.Namespace) -> int:
    config = _config(args)
    policy = _policy(args, config)
    if args.archive is None and not policy.bounded:
        raise ConfigError(
            "prune needs what to delete: --archive FILE (what an export holds), --max-age "
            "90d, --max-rows N, or --config with a [ledger.retention] table",
            key="--archive",
        )
    ledger = _ledger(args, config)
    try:
        done = prune_archived(ledger, args.archive) if args.archive else Pruned()
        if policy.bounded:
            more = apply_policy(ledger, policy)
            done = Pruned(done.pruned + more.pruned, done.kept + more.kept)
    finally:
        ledger.close()
    if args.format == "json":
        print(json.dumps(asdict(done)))
    else:
        print(
            f"pruned {done.pruned} settled invocation(s) with their events; kept {done.kept} "
            "that are unsettled or changed since"
        )
    return 0


def _policy(args: argparse.Namespace, config: GatewayConfig | None) -> RetentionPolicy:
    """--max-age and --max-rows, each defaulting to the configuration's retention."""
    policy = config.ledger.retention.policy() if config is not None else RetentionPolicy()
    max_age = policy.max_age
    if args.max_age is not None:
        max_age = parse_duration(args.max_age)
        if max_age is None:
            raise ConfigError(
                f"--max-age {args.max_age!r} is not a duration; write e.g. 90d, 12h or 30m",
                key="--max-age",
                value=args.max_age,
            )
    max_rows = policy.max_rows if args.max_rows is None else args.max_rows
    if max_rows is not None and max_rows < 0:
        raise ConfigError(
            f"--max-rows {max_rows} must be 0 or more", key="--max-rows", value=max_rows
        )
    return RetentionPolicy(max_age=max_age, max_rows=max_rows)
