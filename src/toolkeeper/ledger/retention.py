"""Keeping the ledger bounded: export to JSON lines, and prune what was exported or what a
retention policy allows — never a row something still depends on.

A row may be pruned only when it is settled: completed with a known effect. An INTENT row
(recovery needs it), a row whose effect is unknown (reconciliation needs it) and a call
waiting for a human decision (resume needs it) are kept whatever the policy or archive
says; `Ledger.prune` checks this in the same statement that deletes. A row changed after
it was read or exported is kept too (its `updated_at` no longer matches), so an archive
never stands in for a newer outcome.

Pruning a row also ends what it remembered: its idempotency key no longer replays, so keep
`max_age` longer than any client keeps retrying a call.

Every pass is paged (`Ledger.scan`, one transaction per page), so it never holds the ledger
for a whole scan.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from toolkeeper.errors import LedgerError
from toolkeeper.ledger import (
    ApprovalRecord,
    ApprovalStatus,
    InvocationRecord,
    Ledger,
    LedgerEvent,
    RecordState,
)

PAGE = 200
"""Rows per read and per delete transaction."""
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")


def parse_duration(text: str) -> float | None:
    """Seconds in `30s`, `15m`, `2h`, `90d`; None if `text` is not such a duration."""
    match = _DURATION.match(text.strip())
    return float(match.group(1)) * _UNITS[match.group(2)] if match else None


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long and how much of the settled history the ledger keeps; None: no bound."""

    max_age: float | None = None
    """Seconds: settled rows created longer ago are pruned."""
    max_rows: int | None = None
    """Invocation rows at most: the oldest settled rows beyond it are pruned."""

    @property
    def bounded(self) -> bool:
        return self.max_age is not None or self.max_rows is not None


@dataclass(frozen=True, slots=True)
class Pruned:
    """What a prune did."""

    pruned: int = 0
    """Rows deleted, with their events and decided approvals."""
    kept: int = 0
    """Rows the archive or policy named but that were kept: unsettled, or changed since."""


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    """One line of an archive: a record, every event of it, and its approval if any."""

    record: InvocationRecord
    events: list[LedgerEvent] = field(default_factory=list)
    approval: ApprovalRecord | None = None


# -- export -------------------------------------------------------------------------------


def export(ledger: Ledger, path: str | Path, *, before: float | None = None) -> int:
    """Write every record created before `before` (all when None) as JSON lines to `path`;
    return how many. The file appears under its name only once complete and on disk (it is
    written beside it, fsynced and renamed), so a prune never reads a partial archive."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.partial")
    count = 0
    try:
        with tmp.open("w", encoding="utf-8") as out:
            after: tuple[float, str] | None = None
            while page := ledger.scan(after=after, before=before, limit=PAGE):
                after = (page[-1].created_at, page[-1].request_id)
                count += _write_page(ledger, page, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise LedgerError(
            f"cannot write the archive {target}: {exc.strerror or exc}; pick a writable path "
            "with room for it"
        ) from exc
    return count


def _write_page(ledger: Ledger, page: Sequence[InvocationRecord], out: IO[str]) -> int:
    events = ledger.events_for([r.request_id for r in page])
    for record in page:
        approval = ledger.get_approval(record.approval_id) if record.approval_id else None
        entry = ArchiveEntry(record, events[record.request_id], approval)
        out.write(json.dumps(entry_json(entry), default=str, separators=(",", ":")) + "\n")
    return len(page)


def entry_json(entry: ArchiveEntry) -> dict[str, Any]:
    """An archive line's JSON object."""
    record = asdict(entry.record)
    record["state"] = entry.record.state.value
    approval = None
    if entry.approval is not None:
        approval = asdict(entry.approval)
        approval["status"] = entry.approval.status.value
        snapshot = entry.approval.snapshot
        approval["snapshot"] = base64.b64encode(snapshot).decode() if snapshot else None
    return {
        "record": record,
        "events": [asdict(event) for event in entry.events],
        "approval": approval,
    }


def read_archive(path: str | Path) -> Iterator[ArchiveEntry]:
    """The entries of an archive `export` wrote, in order."""
    try:
        with Path(path).open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    yield entry_from(json.loads(line))
                except (ValueError, TypeError, KeyError) as exc:
                    raise LedgerError(
                        f"{path} line {number} is not an archive entry ({exc}); pass a file "
                        "`toolkeeper ledger export` wrote"
                    ) from exc
    except OSError as exc:
        raise LedgerError(f"cannot read the archive {path}: {exc.strerror or exc}") from exc


def entry_from(data: dict[str, Any]) -> ArchiveEntry:
    """The entry an archive line's JSON object holds."""
    record = dict(data["record"])
    record["state"] = RecordState(record["state"])
    approval = None
    if data.get("approval") is not None:
        body = dict(data["approval"])
        body["status"] = ApprovalStatus(body["status"])
        body["policy_ids"] = tuple(body["policy_ids"])
        snapshot = body["snapshot"]
        body["snapshot"] = base64.b64decode(snapshot) if snapshot else None
        approval = ApprovalRecord(**body)
    return ArchiveEntry(
        InvocationRecord(**record),
        [LedgerEvent(**event) for event in data["events"]],
        approval,
    )


# -- prune --------------------------------------------------------------------------------


def prune_archived(ledger: Ledger, path: str | Path) -> Pruned:
    """Delete the rows an archive holds, where they are settled and unchanged since."""
    pruned = kept = 0
    batch: list[InvocationRecord] = []
    for entry in read_archive(path):
        batch.append(entry.record)
        if len(batch) == PAGE:
            done = len(ledger.prune(batch))
            pruned, kept, batch = pruned + done, kept + len(batch) - done, []
    if batch:
        done = len(ledger.prune(batch))
        pruned, kept = pruned + done, kept + len(batch) - done
    return Pruned(pruned, kept)


def apply_policy(ledger: Ledger, policy: RetentionPolicy, *, now: float | None = None) -> Pruned:
    """Delete the settled rows `policy` no longer keeps, oldest first: those older than
    `max_age`, then as many more as bring the ledger to `max_rows` (unsettled rows count
    toward it but are never deleted, so it may stay above)."""
    now = time.time() if now is None else now
    total = Pruned()
    if policy.max_age is not None:
        total = _prune_oldest(ledger, before=now - policy.max_age, budget=None, total=total)
    if policy.max_rows is not None:
        excess = ledger.count() - policy.max_rows
        if excess > 0:
            total = _prune_oldest(ledger, before=None, budget=excess, total=total)
    return total


def _prune_oldest(
    ledger: Ledger, *, before: float | None, budget: int | None, total: Pruned
) -> Pruned:
    """Prune completed rows oldest first, created before `before`, at most `budget`."""
    pruned, kept = total.pruned, total.kept
    after: tuple[float, str] | None = None
    while budget is None or budget > 0:
        limit = PAGE if budget is None else min(PAGE, budget)
        page = ledger.scan(state=RecordState.COMPLETED, after=after, before=before, limit=limit)
        if not page:
            break
        after = (page[-1].created_at, page[-1].request_id)
        done = len(ledger.prune(page))
        pruned, kept = pruned + done, kept + len(page) - done
        if budget is not None:
            budget -= done
    return Pruned(pruned, kept)
