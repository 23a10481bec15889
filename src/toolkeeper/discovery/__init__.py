"""Tool discovery: find tools by what a request says, among those the caller may see, and
load their schemas only when needed (seed 000 §7; docs/discovery.md).

    hits = harness.search_tools("refund an order", principal=me, k=5)

`ToolIndex` is the index (one per harness, `Harness.discovery`); `catalog_summary` is the
first-context overview; `Progressive` keeps one conversation's loaded tools and answers the
``search_tools`` / ``load_tools`` meta-tools in every vendor's format.
"""

from __future__ import annotations

from toolkeeper.discovery.index import RANKERS, Ranker, SearchFilters, SearchHit, ToolIndex
from toolkeeper.discovery.ranking import LedgerHealth, ToolHealth

__all__ = [
    "RANKERS",
    "LedgerHealth",
    "Ranker",
    "SearchFilters",
    "SearchHit",
    "ToolHealth",
    "ToolIndex",
]
