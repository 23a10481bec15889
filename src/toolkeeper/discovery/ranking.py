"""What a tool's record says beyond its text: health, latency and declared cost.

A search hit's score is its relevance (relative to the best match in the caller's visible
set, so in (0, 1]) times the tool's `prior`, a number in (0.6, 1]: a tool failing half its
recent calls loses a quarter of its score, a slow or costly one a little. Relevance decides
which tools match; the prior only reorders near ties, so a broken tool sinks below a healthy
one that fits the request as well, never below one that does not fit.

`LedgerHealth` reads the ledger's recent records (newest first, bounded) and keeps the
figures for a while, so a search costs no ledger read on its path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolkeeper.ledger import Ledger

if TYPE_CHECKING:
    from toolkeeper.discovery.index import ToolCard

HEALTH_WEIGHT = 0.5
"""Share of the score a tool failing every recent call loses."""
LATENCY_WEIGHT = 0.1
"""Share of the score the slowest tools lose (half of it at `LATENCY_SCALE_MS`)."""
LATENCY_SCALE_MS = 2_000.0
COST_WEIGHT = 0.1
"""Share of the score the costliest tools lose (half of it at a declared cost of 1)."""
FAILED = frozenset({"failed", "timed_out", "effect_unknown"})
"""Outcomes that count against a tool's health. A rejection (bad arguments, denied by
policy) is the caller's doing, not the tool's, and does not."""


@dataclass(frozen=True, slots=True)
class ToolHealth:
    """A tool's recent record: share of calls that failed, and their median latency."""

    calls: int
    failure_rate: float
    latency_ms: float


def prior(card: ToolCard, health: ToolHealth | None) -> float:
    """The factor in (0.6, 1] a tool's relevance is multiplied by."""
    factor = 1.0 - COST_WEIGHT * card.cost / (card.cost + 1.0)
    if health is not None and health.calls:
        factor *= 1.0 - HEALTH_WEIGHT * min(max(health.failure_rate, 0.0), 1.0) / 2
        latency = max(health.latency_ms, 0.0)
        factor *= 1.0 - LATENCY_WEIGHT * latency / (latency + LATENCY_SCALE_MS)
    return factor


class LedgerHealth:
    """Tool id → `ToolHealth` over the ledger's latest `window` records, re-read at most
    every `ttl` seconds."""

    def __init__(
        self, ledger: Callable[[], Ledger | None], *, window: int = 1_000, ttl: float = 30.0
    ) -> None:
        self._ledger = ledger
        self._window = window
        self._ttl = ttl
        self._read_at = -float("inf")
        self._figures: Mapping[str, ToolHealth] = {}
        self._lock = threading.Lock()

    def __call__(self) -> Mapping[str, ToolHealth]:
        now = time.monotonic()
        if now - self._read_at < self._ttl:
            return self._figures
        with self._lock:
            if now - self._read_at >= self._ttl:
                self._figures = self._read()
                self._read_at = now
        return self._figures

    def _read(self) -> Mapping[str, ToolHealth]:
        ledger = self._ledger()
        if ledger is None:
            return {}
        outcomes: dict[str, list[tuple[bool, float]]] = {}
        for record in ledger.query(limit=self._window):
            if record.contract_ref is None or record.status is None:
                continue
            meta = (record.envelope or {}).get("execution_meta") or {}
            latency = meta.get("latency_ms")
            tool_id = record.contract_ref.rsplit("@", 1)[0]
            outcomes.setdefault(tool_id, []).append(
                (
                    record.status in FAILED,
                    float(latency) if isinstance(latency, int | float) else 0.0,
                )
            )
        figures = {}
        for tool_id, calls in outcomes.items():
            latencies = sorted(latency for _, latency in calls)
            figures[tool_id] = ToolHealth(
                calls=len(calls),
                failure_rate=sum(failed for failed, _ in calls) / len(calls),
                latency_ms=latencies[len(latencies) // 2],
            )
        return figures


__all__ = ["FAILED", "LedgerHealth", "ToolHealth", "prior"]
