"""Tool discovery: find tools by what a request says, among those the caller may see, and
load their schemas only when needed (seed 000 §7; docs/discovery.md).

    hits = harness.search_tools("refund an order", principal=me, k=5)

`ToolIndex` is the index (one per harness, `Harness.discovery`); `MetaTools` registers the
``search_tools`` / ``load_tools`` meta-tools and keeps each session's loaded tools;
`Progressive` renders one conversation's tools per turn in a vendor's format, and
`catalog_summary` the first-context overview.
"""

from __future__ import annotations

from toolkeeper.discovery.index import RANKERS, Ranker, SearchFilters, SearchHit, ToolIndex
from toolkeeper.discovery.progressive import (
    LOAD_TOOLS,
    SEARCH_TOOLS,
    MetaTools,
    Progressive,
    catalog_summary,
)
from toolkeeper.discovery.ranking import LedgerHealth, ToolHealth

__all__ = [
    "LOAD_TOOLS",
    "RANKERS",
    "SEARCH_TOOLS",
    "LedgerHealth",
    "MetaTools",
    "Progressive",
    "Ranker",
    "SearchFilters",
    "SearchHit",
    "ToolHealth",
    "ToolIndex",
    "catalog_summary",
]
