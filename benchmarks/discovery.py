"""Tool discovery: retrieval quality on public catalogs, search latency, and first-turn context.

Run: python benchmarks/discovery.py [--split report|tuning|all] [--rankers bm25,lexical,hybrid]

Retrieval. Each BFCL category (Berkeley Function Calling Leaderboard, Apache-2.0, taken from
the ``bfcl-eval`` wheel as tests/bfcl_data.py does) becomes one catalog: every function doc of
the category's entries, pooled and deduplicated by name; each entry's first user turn is a
query and the functions of its ground truth are the relevant tools. A BFCL request tends to
name the function it needs, so two public sets whose requests seldom do are read too, from
benchmarks/data (its README gives sources, commits and licences): MetaTool (MIT) — 199
one-line tool descriptions without parameters, under ``metatool_multi`` (its 497 multi-tool
queries, two tools each) and ``metatool_single`` (1,072 of its single-tool queries, a fixed
sample) — and τ-bench (MIT) — ``taubench_retail`` and ``taubench_airline``, each domain's
tools as their ``get_info()`` schemas give them, every test task with gold actions a query
(the user's scenario) whose relevant set is the distinct tools of those actions. A tool name
that is no contract id is mapped by `tool_id`. Queries are split by a hash of their id:
``tuning`` (even) is what the default ranker's weights were chosen on, ``report`` (odd) is what
the goals are judged on. For each ranker, in the same run and over the same text: nDCG@10,
recall@5, and the share of queries whose whole relevant set is in the top 5; the mean
nDCG@10 is over every catalog, then over each source's catalogs apart. Rankers: ``bm25``
(plain BM25, bm25s tokenizer, no stemming, no stop words, all fields as one text),
``lexical`` (the default) and ``hybrid`` (the ``discovery-embed`` extra).

Latency. A 5,000-tool catalog (every BFCL function plus the public MCP listings in
tests/lint/catalogs, repeated under new ids to reach 5,000), registered in a harness: index
build time (every tool analysed, then the ranking structure of the visible set) and p50/p95
search time for the BFCL report queries, the rankers alternating query by query. (The
MetaTool and τ-bench catalogs stay out of it, so the figures compare with earlier runs.)

Context. A 500-tool catalog: tokens (cl100k_base) of the tools rendered for the first turn in
full, against the discovery first turn — the catalog summary, the always-loaded set and the
two meta-tools.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.bfcl_data import bfcl_data_dir  # noqa: E402

from toolkeeper import Harness, Principal  # noqa: E402
from toolkeeper.contract.model import ToolContract  # noqa: E402
from toolkeeper.importers.formats import from_bfcl_function, from_openai_function  # noqa: E402

DATA = ROOT / "benchmarks" / "data"

CATEGORIES = {
    "simple_python": "python",
    "simple_java": "java",
    "simple_javascript": "javascript",
    "live_simple": "python",
    "multiple": "python",
    "live_multiple": "python",
    "parallel_multiple": "python",
    "live_parallel_multiple": "python",
}


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    relevant: frozenset[str]

    @property
    def split(self) -> str:
        digest = hashlib.sha256(self.id.encode()).digest()
        return "tuning" if digest[0] % 2 == 0 else "report"


@dataclass
class Catalog:
    name: str
    contracts: list[ToolContract]
    queries: list[Query]
    source: str = "BFCL"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _noop(**_: Any) -> None:
    return None


def bfcl_catalog(category: str, language: str) -> Catalog:
    data = bfcl_data_dir()
    entries = _lines(data / f"BFCL_v4_{category}.json")
    answers = {a["id"]: a for a in _lines(data / "possible_answer" / f"BFCL_v4_{category}.json")}
    contracts: dict[str, ToolContract] = {}
    queries = []
    for entry in entries:
        for doc in entry["function"]:
            if doc["name"] not in contracts:
                try:
                    contracts[doc["name"]] = from_bfcl_function(doc, language=language)
                except Exception:  # a doc the importer refuses is left out of the catalog
                    continue
        turn = entry["question"][0]
        text = " ".join(m["content"] for m in turn if m.get("role") == "user")
        answer = answers.get(entry["id"])
        if answer is None:
            continue
        relevant = frozenset(name for call in answer["ground_truth"] for name in call)
        ids = {name: contracts[name].id for name in relevant if name in contracts}
        if len(ids) == len(relevant) and text.strip():
            queries.append(Query(entry["id"], text, frozenset(ids.values())))
    return Catalog(category, list(contracts.values()), queries)


def pooled(name: str, parts: list[Catalog]) -> Catalog:
    """One catalog of several: every tool once (the first doc of a name wins), every query."""
    contracts: dict[str, ToolContract] = {}
    for part in parts:
        for contract in part.contracts:
            contracts.setdefault(contract.id, contract)
    return Catalog(name, list(contracts.values()), [q for part in parts for q in part.queries])


_MULTI_TURN_DOCS = (
    "gorilla_file_system",
    "math_api",
    "message_api",
    "posting_api",
    "ticket_api",
    "trading_bot",
    "travel_booking",
    "vehicle_control",
)


def multi_turn_catalog() -> Catalog:
    """BFCL multi-turn (base): the function docs of its eight API classes as one catalog;
    each user turn a query, the functions its ground truth calls the relevant set."""
    data = bfcl_data_dir()
    contracts: dict[str, ToolContract] = {}
    for doc_file in _MULTI_TURN_DOCS:
        for doc in _lines(data / "multi_turn_func_doc" / f"{doc_file}.json"):
            if doc["name"] not in contracts:
                contracts[doc["name"]] = from_bfcl_function(doc)
    answers = {
        a["id"]: a for a in _lines(data / "possible_answer" / "BFCL_v4_multi_turn_base.json")
    }
    queries = []
    for entry in _lines(data / "BFCL_v4_multi_turn_base.json"):
        truth = answers[entry["id"]]["ground_truth"]
        for turn, (messages, calls) in enumerate(zip(entry["question"], truth, strict=False)):
            text = " ".join(m["content"] for m in messages if m.get("role") == "user")
            names = frozenset(re.findall(r"^(\w+)\(", "\n".join(calls), re.MULTILINE))
            relevant = frozenset(contracts[n].id for n in names if n in contracts)
            if text.strip() and relevant and len(relevant) == len(names):
                queries.append(Query(f"{entry['id']}_{turn}", text, relevant))
    return Catalog("multi_turn_base", list(contracts.values()), queries)


def tool_id(name: str) -> str:
    """The contract id of a MetaTool or τ-bench tool name. Every name is one but MetaTool's
    ``PDF&URLTool``: ``&`` is no id character, so it is written ``_and_`` (``PDF_and_URLTool``).
    No source name holds ``_and_``, so the id maps back to the name by the reverse
    replacement; `metatool_catalogs` checks that."""
    return name.replace("&", "_and_")


def metatool_catalogs() -> list[Catalog]:
    """MetaTool (benchmarks/data/metatool.json): its 199 tools, each a name and a one-line
    description with no parameters, under two query sets — ``metatool_multi``, the
    multi-tool queries, each needing two tools, and ``metatool_single``, a fixed sample of
    the single-tool queries (the data README says which rows)."""
    data = json.loads((DATA / "metatool.json").read_text())
    names = [tool["name"] for tool in data["tools"]]
    ids = {name: tool_id(name) for name in names}
    if len(set(ids.values())) != len(names) or any("_and_" in name for name in names):
        raise ValueError("metatool.json: the name-to-id map is no longer one-to-one")
    contracts = [
        from_openai_function(
            {"name": tool["name"], "description": tool["description"]}, id=ids[tool["name"]]
        )
        for tool in data["tools"]
    ]
    return [
        Catalog(
            f"metatool_{kind}",
            contracts,
            [
                Query(q["id"], q["query"], frozenset(ids[name] for name in q["tools"]))
                for q in data[f"{kind}_tool_queries"]
            ],
            "MetaTool",
        )
        for kind in ("multi", "single")
    ]


def taubench_catalogs() -> list[Catalog]:
    """τ-bench (benchmarks/data/taubench.json), one catalog per domain: the domain's tools as
    their ``get_info()`` schemas give them, and each test task's user instruction as a query
    whose relevant set is the distinct tools of the task's gold actions."""
    data = json.loads((DATA / "taubench.json").read_text())
    result = []
    for domain, content in data["domains"].items():
        contracts = [
            from_openai_function({"type": "function", "function": tool}, id=tool_id(tool["name"]))
            for tool in content["tools"]
        ]
        queries = [
            Query(q["id"], q["instruction"], frozenset(tool_id(name) for name in q["tools"]))
            for q in content["queries"]
        ]
        result.append(Catalog(f"taubench_{domain}", contracts, queries, "τ-bench"))
    return result


def bfcl_catalogs() -> list[Catalog]:
    single = {c: bfcl_catalog(c, language) for c, language in CATEGORIES.items()}
    multiple = [single[c] for c in single if "multiple" in c]
    return [
        *single.values(),
        pooled("pooled_multiple", multiple),
        pooled("pooled_all", list(single.values())),
        multi_turn_catalog(),
    ]


def catalogs() -> list[Catalog]:
    """Every retrieval catalog: BFCL's, then MetaTool's and τ-bench's, whose requests seldom
    name the tool they need."""
    return [*bfcl_catalogs(), *metatool_catalogs(), *taubench_catalogs()]


def ndcg_at(ranked: list[str], relevant: frozenset[str], k: int = 10) -> float:
    gain = sum(1 / math.log2(i + 2) for i, name in enumerate(ranked[:k]) if name in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return gain / ideal


def harness_of(contracts: list[ToolContract], home: Path) -> Harness:
    harness = Harness(home=home)
    for contract in contracts:
        harness.register(contract, executor=_noop)
    return harness


def evaluate(catalog: Catalog, rankers: list[str], split: str, home: Path) -> dict[str, Any]:
    harness = harness_of(catalog.contracts, home)
    queries = [q for q in catalog.queries if split == "all" or q.split == split]
    figures: dict[str, dict[str, float]] = {}
    for ranker in rankers:
        harness.discovery.ranker = ranker  # type: ignore[assignment]
        ndcg, recall, whole = [], [], []
        for query in queries:
            hits = harness.search_tools(query.text, principal=None, k=10)
            names = [hit.name for hit in hits]
            ndcg.append(ndcg_at(names, query.relevant))
            recall.append(len(query.relevant & set(names[:5])) / len(query.relevant))
            whole.append(float(query.relevant <= set(names[:5])))
        figures[ranker] = {
            "ndcg@10": 100 * statistics.fmean(ndcg),
            "recall@5": 100 * statistics.fmean(recall),
            "whole@5": 100 * statistics.fmean(whole),
        }
    return {"tools": len(catalog.contracts), "queries": len(queries), "figures": figures}


def big_catalog(size: int) -> list[ToolContract]:
    """`size` tools: every BFCL function, the multi-turn APIs and the public MCP listings,
    then the same again under new ids (``…_copy2``) until there are `size`."""
    from toolkeeper.importers.catalog import load_catalog

    unique: dict[str, ToolContract] = {}
    for catalog in [
        *bfcl_catalogs(),
        Catalog("mcp", load_catalog(ROOT / "tests/lint/catalogs").contracts, []),
    ]:
        for contract in catalog.contracts:
            unique.setdefault(contract.id, contract)
    base = list(unique.values())
    tools = []
    for n in range(size):
        contract = base[n % len(base)]
        copy = n // len(base)
        tools.append(
            contract
            if copy == 0
            else contract.model_copy(update={"id": f"{contract.id}_copy{copy + 1}"})
        )
    return tools


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def latency(size: int, rankers: list[str], home: Path) -> None:
    """Index build and search latency at `size` tools, the rankers alternating. Wall time
    and CPU time of the calling thread both: this machine is shared, and the CPU time is the
    part a search itself costs (a preempted search's wall time is not)."""
    from toolkeeper.discovery import ToolIndex, embedding, text

    tools = big_catalog(size)
    harness = harness_of(tools, home)
    view = harness.views.view(None)
    queries = [q.text for c in bfcl_catalogs() for q in c.queries if q.split == "report"][:1000]
    print(f"\nlatency at {len(tools)} tools, {len(queries)} report queries, rankers alternating")
    builds: dict[str, list[tuple[float, float]]] = {r: [] for r in rankers}
    warm: dict[str, tuple[float, float]] = {}
    for round_ in range(3):
        for name in rankers:
            if name == "hybrid" and round_:
                continue  # one cold build: encoding 5,000 tools takes minutes
            text._terms.cache_clear()  # every build analyses from scratch
            if name == "hybrid":
                embedding.forget()  # and encodes every tool anew
            builds[name].append(_build(harness, view, name))
    if "hybrid" in rankers:  # the same tools again: their vectors come from the cache
        text._terms.cache_clear()
        warm["hybrid"] = _build(harness, view, "hybrid")
    indexes = {r: ToolIndex(harness.registry, ranker=r) for r in rankers}  # type: ignore[arg-type]
    for index in indexes.values():
        index.search("warm up", view)
    walls: dict[str, list[float]] = {r: [] for r in rankers}
    cpus: dict[str, list[float]] = {r: [] for r in rankers}
    for query in queries:
        for name in rankers:
            wall, cpu = time.perf_counter(), time.thread_time()
            indexes[name].search(query, view, k=5)
            walls[name].append((time.perf_counter() - wall) * 1000)
            cpus[name].append((time.thread_time() - cpu) * 1000)
    base = rankers[0]
    for name in rankers:
        build_wall = min(b[0] for b in builds[name])
        build_cpu = min(b[1] for b in builds[name])
        p95 = percentile(walls[name], 0.95)
        print(
            f"{name:8} build {build_wall:5.2f} s wall, {build_cpu:5.2f} s cpu  search wall "
            f"p50 {percentile(walls[name], 0.5):5.2f} p95 {p95:5.2f} ms, cpu "
            f"p50 {percentile(cpus[name], 0.5):5.2f} p95 {percentile(cpus[name], 0.95):5.2f} ms"
            f"  (p95 wall {p95 / percentile(walls[base], 0.95):4.2f}x {base})"
        )
    for name, (wall_s, cpu_s) in warm.items():
        print(
            f"{name:8} build again, every tool's vector cached: {wall_s:5.2f} s wall, "
            f"{cpu_s:5.2f} s cpu"
        )


def _build(harness: Harness, view: Any, ranker: str) -> tuple[float, float]:
    """Wall and CPU seconds to analyse every tool and build the visible set's structure."""
    from toolkeeper.discovery import ToolIndex

    wall, cpu = time.perf_counter(), time.thread_time()
    index = ToolIndex(harness.registry, ranker=ranker)  # type: ignore[arg-type]
    index.search("warm up the visible set", view)  # builds the set's ranking structure
    return time.perf_counter() - wall, time.thread_time() - cpu


def context(size: int, home: Path) -> None:
    """First-turn tokens: the whole catalog rendered vs discovery's summary and meta-tools."""
    from toolkeeper.adapters import render
    from toolkeeper.cli.views import wire_json
    from toolkeeper.discovery import MetaTools, Progressive
    from toolkeeper.lint.surface import count_tokens

    tools = big_catalog(size)
    harness = harness_of(tools, home)
    meta = MetaTools(harness)
    print(f"\nfirst-turn context, {len(tools)}-tool catalog (tokens, cl100k_base)")
    for vendor in ("openai_chat", "anthropic", "gemini"):
        full = count_tokens(wire_json(vendor, render(tools, vendor=vendor)))[0]
        conversation = Progressive(meta, principal=Principal("bench"), vendor=vendor)
        rendered = conversation.tools()
        if vendor == "anthropic":  # deferred definitions stay out of the model's context
            rendered = [t for t in rendered if not t.get("defer_loading")]
        first = count_tokens(wire_json(vendor, rendered))[0]
        summary = count_tokens(conversation.first_context())[0]
        print(
            f"{vendor:12} full {full:7}  discovery {first + summary:6} "
            f"(meta-tools {first}, summary {summary})  ratio {(first + summary) / full:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split", default="report", choices=["report", "tuning", "all"])
    parser.add_argument("--rankers", default="bm25,lexical,hybrid")
    parser.add_argument("--only", default="", help="comma-separated categories")
    parser.add_argument("--skip-retrieval", action="store_true")
    parser.add_argument("--skip-latency", action="store_true", help="and the context figures")
    parser.add_argument("--size", type=int, default=5_000, help="tools for the latency run")
    args = parser.parse_args()
    rankers = args.rankers.split(",")
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="tk-discovery-"))
    if not args.skip_retrieval:
        retrieval(args, rankers, tmp)
    if not args.skip_latency:
        latency(args.size, rankers, tmp / "latency")
        context(500, tmp / "context")


def retrieval(args: argparse.Namespace, rankers: list[str], tmp: Path) -> None:
    print(f"retrieval, {args.split} split")
    print(f"{'catalog':24} {'tools':>5} {'q':>4}  " + "  ".join(f"{r:>22}" for r in rankers))
    totals: dict[str, list[float]] = {r: [] for r in rankers}
    sources: list[str] = []
    for catalog in catalogs():
        category = catalog.name
        if args.only and category not in args.only.split(","):
            continue
        result = evaluate(catalog, rankers, args.split, tmp / category)
        sources.append(catalog.source)
        cells = []
        for ranker in rankers:
            f = result["figures"][ranker]
            totals[ranker].append(f["ndcg@10"])
            cells.append(f"{f['ndcg@10']:6.1f} {f['recall@5']:6.1f} {f['whole@5']:6.1f}")
        print(f"{category:24} {result['tools']:5} {result['queries']:4}  " + "  ".join(cells))
    base = statistics.fmean(totals[rankers[0]])
    for ranker in rankers:
        mean = statistics.fmean(totals[ranker])
        worst = min(a - b for a, b in zip(totals[ranker], totals[rankers[0]], strict=True))
        ratios = [a / b for a, b in zip(totals[ranker], totals[rankers[0]], strict=True) if b]
        print(
            f"mean nDCG@10 {ranker:8} {mean:6.1f}  vs {rankers[0]}: {mean - base:+5.1f}, "
            f"worst catalog {worst:+5.1f}; nDCG@10 ratio to {rankers[0]} per catalog "
            + " ".join(f"{r:.3f}" for r in ratios)
            + f", mean {statistics.fmean(ratios):.3f}"
        )
    for source in dict.fromkeys(sources):  # the means of each source's catalogs apart
        picked = [i for i, s in enumerate(sources) if s == source]
        print(
            f"mean nDCG@10 over the {source} catalogs: "
            + ", ".join(
                f"{r} {statistics.fmean(totals[r][i] for i in picked):.1f}" for r in rankers
            )
        )


if __name__ == "__main__":
    main()
