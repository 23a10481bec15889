"""`toolkeeper approvals list|show|approve|deny`: the human side of require_approval.

Deciding records the decision in the ledger; the process that owns the tool (the library
or `toolkeeper serve`) resumes the call with `Harness.resume`, re-checking everything first.
Ids, names, accounts and reasons are printed through `escaping.visible`.
"""

from __future__ import annotations

import argparse
import getpass
import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from toolkeeper.cli.escaping import visible
from toolkeeper.cli.ledger import add_common, ledger_of
from toolkeeper.ledger import ApprovalRecord
from toolkeeper.runtime.approvals import Approvals


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("approvals", help="list and decide pending approvals")
    commands = parser.add_subparsers(dest="approvals_command", metavar="ACTION", required=True)
    listing = commands.add_parser("list", help="pending approvals (or --all)")
    add_common(listing)
    listing.add_argument("--all", action="store_true", help="include decided approvals")
    listing.set_defaults(func=run_list)
    show = commands.add_parser("show", help="one approval, with the action it would run")
    add_common(show)
    show.add_argument("approval_id")
    show.set_defaults(func=run_show)
    for name in ("approve", "deny"):
        sub = commands.add_parser(name, help=f"{name} a pending approval")
        add_common(sub)
        sub.add_argument("approval_id")
        sub.add_argument("--by", default=None, help="who decides (default: the OS user)")
        sub.add_argument("--reason", default=None)
        sub.set_defaults(func=run_decide, decision=name)


def _as_json(approval: ApprovalRecord) -> dict[str, Any]:
    data = asdict(approval)
    data["status"] = approval.status.value
    data["snapshot"] = len(approval.snapshot) if approval.snapshot else None
    return data


def _line(a: ApprovalRecord) -> str:
    when = datetime.fromtimestamp(a.created_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"{when}  {visible(a.approval_id)}  {a.status.value:<9} {visible(a.contract_ref):<36} "
        f"{visible(a.principal['id'])}"
    )


def run_list(args: argparse.Namespace) -> int:
    approvals = Approvals(ledger_of(args)).list(None if args.all else "pending")
    if args.format == "json":
        print(json.dumps([_as_json(a) for a in approvals], default=str, indent=2))
    else:
        for approval in approvals:
            print(_line(approval))
        print(f"{len(approvals)} approval(s)")
    return 0


def run_show(args: argparse.Namespace) -> int:
    approval = Approvals(ledger_of(args)).get(args.approval_id)
    if args.format == "json":
        print(json.dumps(_as_json(approval), default=str, indent=2))
        return 0
    print(_line(approval))
    print(f"  {visible(approval.account)}")
    print(f"  arguments: {json.dumps(approval.arguments, default=str)}")
    print(
        f"  digest: {visible(approval.implementation_digest)}  "
        f"args: {visible(approval.arguments_digest)}"
    )
    if approval.decided_by:
        print(
            f"  decided by {visible(approval.decided_by)}: "
            f"{visible(approval.decision_reason or '')}"
        )
    return 0


def run_decide(args: argparse.Namespace) -> int:
    by = args.by or getpass.getuser()
    approval = Approvals(ledger_of(args)).decide(
        args.approval_id, args.decision, by=by, reason=args.reason
    )
    if args.format == "json":
        print(json.dumps(_as_json(approval), default=str, indent=2))
    else:
        print(
            f"{visible(approval.approval_id)} {approval.status.value} by {visible(by)}; the "
            "owning process resumes it"
        )
    return 0
