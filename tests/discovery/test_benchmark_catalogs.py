"""The MetaTool and τ-bench catalogs of benchmarks/discovery.py: the data files load into the
counts their README states, every relevant tool is in its catalog, and the tuning/report split
is a function of the query id alone."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).parents[2]
DATA = ROOT / "benchmarks" / "data"


def _benchmark() -> ModuleType:
    """benchmarks/discovery.py, which owns the loaders the figures come from."""
    spec = importlib.util.spec_from_file_location(
        "discovery_bench", ROOT / "benchmarks" / "discovery.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["discovery_bench"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark()

# name: (tools, queries, tuning queries)
EXPECTED = {
    "metatool_multi": (199, 497, 244),
    "metatool_single": (199, 1072, 555),
    "taubench_retail": (16, 113, 60),
    "taubench_airline": (14, 43, 18),
}


def _catalogs() -> dict[str, Any]:
    return {c.name: c for c in [*BENCH.metatool_catalogs(), *BENCH.taubench_catalogs()]}


def test_counts_and_every_relevant_tool_in_its_catalog() -> None:
    catalogs = _catalogs()
    assert set(catalogs) == set(EXPECTED)
    for name, (tools, queries, tuning) in EXPECTED.items():
        catalog = catalogs[name]
        ids = {c.id for c in catalog.contracts}
        assert len(ids) == tools == len(catalog.contracts)
        assert len(catalog.queries) == queries
        assert sum(q.split == "tuning" for q in catalog.queries) == tuning
        for query in catalog.queries:
            assert query.text.strip() and query.relevant
            assert query.relevant <= ids, (query.id, query.relevant - ids)
    assert all(len(q.relevant) == 2 for q in catalogs["metatool_multi"].queries)
    assert all(len(q.relevant) == 1 for q in catalogs["metatool_single"].queries)


def test_the_one_illegal_name_maps_to_an_id_and_back() -> None:
    names = [t["name"] for t in json.loads((DATA / "metatool.json").read_text())["tools"]]
    illegal = [n for n in names if BENCH.tool_id(n) != n]
    assert illegal == ["PDF&URLTool"]
    assert BENCH.tool_id("PDF&URLTool") == "PDF_and_URLTool"
    assert all(BENCH.tool_id(n).replace("_and_", "&") == n for n in names)


def test_the_split_depends_on_the_query_id_alone() -> None:
    first, second = _catalogs(), _catalogs()
    for name in EXPECTED:
        splits = [(q.id, q.split) for q in first[name].queries]
        assert splits == [(q.id, q.split) for q in second[name].queries]
        for query_id, split in splits:
            even = hashlib.sha256(query_id.encode()).digest()[0] % 2 == 0
            assert split == ("tuning" if even else "report")
        assert len({query_id for query_id, _ in splits}) == len(splits)


def test_data_files_name_their_source() -> None:
    metatool = json.loads((DATA / "metatool.json").read_text())["source"]
    taubench = json.loads((DATA / "taubench.json").read_text())
    assert metatool["license"] == taubench["source"]["license"] == "MIT"
    assert len(metatool["commit"]) == 40
    for domain in taubench["domains"].values():
        assert len(domain["tasks_from"]["commit"]) == 40
        assert all(len(commit) == 40 for commit in domain["tools_from"].values())
