"""Tool search: what is found, how it follows the registry, and that it sees only what the
caller may see."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper import Harness, Principal, ToolContract
from toolkeeper.discovery import SearchFilters, ToolHealth, ToolIndex
from toolkeeper.discovery.index import _weighted_scores, summary
from toolkeeper.discovery.text import query_weights, terms, words
from toolkeeper.errors import ConfigError
from toolkeeper.runtime.views import ToolViews


def _noop(**_: Any) -> None:
    return None


def contract(tool_id: str, description: str, **extra: Any) -> ToolContract:
    return ToolContract(id=tool_id, version="1.0.0", description=description, **extra)


CATALOG = [
    contract("get_weather", "Current weather and forecast for a city."),
    contract("send_email", "Send an email message to a recipient.", side_effect="committing"),
    contract("delete_file", "Remove a file from the workspace.", side_effect="committing"),
    contract("list_files", "List the files of a directory.", side_effect="none"),
    contract(
        "refund_order",
        "Refund a customer's order.",
        side_effect="committing",
        required_capabilities=("billing",),
        annotations={"tags": ["billing", "payments"], "cost": 2},
    ),
    contract(
        "convertCurrency",
        "Convert an amount between currencies at today's exchange rate.",
        input_schema={
            "type": "object",
            "properties": {"amount": {"type": "number", "description": "How much money."}},
        },
    ),
]


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    h = Harness(home=tmp_path)
    for c in CATALOG:
        h.register(c, executor=_noop)
    return h


EVERYONE = Principal("u")
BILLING = Principal("b", capabilities=frozenset({"billing"}))


def names(hits: list[Any]) -> list[str]:
    return [hit.name for hit in hits]


def test_words_split_identifiers_and_terms_stem_and_drop_stop_words() -> None:
    assert words("getWeatherForecast list_files HTTPServer2x") == [
        "get",
        "weather",
        "forecast",
        "list",
        "files",
        "http",
        "server",
        "2",
        "x",
    ]
    assert terms("Please list the forecasts") == ["list", "forecast"]


def test_an_acronyms_plural_is_one_word() -> None:
    assert words("PDFs URLs getHTTPResponse PDF_and_URLTool") == [
        "pdf",
        "s",
        "url",
        "s",
        "get",
        "http",
        "response",
        "pdf",
        "and",
        "url",
        "tool",
    ]
    assert terms("fetch PDFs") == terms("fetch a PDF")


def test_a_repeated_query_word_weighs_sublinearly() -> None:
    weights = query_weights("exchange the lamp, only exchange the lamp, exchange nothing else")
    assert weights["exchang"] == pytest.approx(1 + math.log(3))
    assert weights["lamp"] == pytest.approx(1 + math.log(2))
    assert weights["~excha"] == 1.0  # a prefix stands for the word family, once
    assert query_weights("the of and") == {}


def test_a_requests_numbers_are_values_not_terms() -> None:
    weights = query_weights("Refund order 50423 of 2023-10-01, 3 items, as mp3")
    assert "50423" not in weights and "2023" not in weights and "10" not in weights
    assert {"refund", "order", "3", "item", "mp"} <= set(weights)


def test_weighted_scores_are_bm25s_scores_for_unit_weights(harness: Harness) -> None:
    index = ToolIndex(harness.registry)
    index.search("warm", harness.views.view(EVERYONE))
    [corpus] = index._corpora.values()
    bm25 = corpus._bm25["lexical"]
    assert bm25 is not None
    query = ["weather", "file", "~forec", "absent"]
    expected = bm25.get_scores(query)
    found = _weighted_scores(bm25, dict.fromkeys(query, 1.0), len(corpus.cards))
    assert found == pytest.approx(expected, rel=1e-6)
    doubled = _weighted_scores(bm25, {"weather": 2.0}, len(corpus.cards))
    assert doubled == pytest.approx(2 * bm25.get_scores(["weather"]), rel=1e-6)
    assert not _weighted_scores(bm25, {"absent": 1.0}, len(corpus.cards)).any()


def test_finds_by_synonym_stem_and_split_name(harness: Harness) -> None:
    assert names(harness.search_tools("erase a document", principal=EVERYONE))[0] == "delete_file"
    assert names(harness.search_tools("weather forecasts", principal=EVERYONE))[0] == "get_weather"
    assert names(harness.search_tools("convert currency", principal=EVERYONE))[0] == (
        "convertCurrency"
    )


def test_hit_carries_summary_effect_and_score(harness: Harness) -> None:
    [hit] = harness.search_tools("send an email", principal=EVERYONE, k=1)
    assert (hit.name, hit.ref, hit.effect) == ("send_email", "send_email@1.0.0", "committing")
    assert hit.summary == "Send an email message to a recipient."
    assert 0 < hit.score <= 1


def test_no_match_gives_no_hits_and_k_bounds(harness: Harness) -> None:
    assert harness.search_tools("zzzqqq", principal=EVERYONE) == []
    assert harness.search_tools("", principal=EVERYONE) == []
    assert len(harness.search_tools("file", principal=EVERYONE, k=1)) == 1
    assert harness.search_tools("file", principal=EVERYONE, k=0) == []


def test_hidden_tool_is_never_found(harness: Harness) -> None:
    assert "refund_order" not in names(harness.search_tools("refund order", principal=EVERYONE))
    assert names(harness.search_tools("refund order", principal=BILLING))[0] == "refund_order"


def test_filters_on_effect_tags_and_upstream(harness: Harness) -> None:
    def found(filters: Any) -> set[str]:
        return set(
            names(
                harness.search_tools("file email order", principal=BILLING, k=10, filters=filters)
            )
        )

    assert found({"effect": "none"}) == {"list_files"}
    assert found({"effect": ["committing"]}) == {"delete_file", "send_email", "refund_order"}
    assert found({"effect": "reversible"}) == set()
    assert found({"tags": "payments"}) == {"refund_order"}
    assert found({"upstream": "github"}) == set()
    assert "list_files" in found(SearchFilters(upstreams=frozenset({"local"})))
    with pytest.raises(ConfigError, match="unknown search filter"):
        found({"owner": "me"})


def test_follows_register_disable_and_enable(harness: Harness) -> None:
    assert harness.search_tools("zodiac horoscope", principal=EVERYONE) == []
    harness.register(contract("horoscope", "Daily horoscope for a zodiac sign."), executor=_noop)
    assert names(harness.search_tools("zodiac horoscope", principal=EVERYONE)) == ["horoscope"]
    harness.registry.disable("horoscope@1.0.0", "withdrawn upstream")
    assert harness.search_tools("zodiac horoscope", principal=EVERYONE) == []
    harness.registry.enable("horoscope@1.0.0")
    assert names(harness.search_tools("zodiac horoscope", principal=EVERYONE)) == ["horoscope"]


def test_new_version_replaces_old_in_results(harness: Harness) -> None:
    harness.register(
        contract("get_weather", "Weather for a city, hourly.").model_copy(
            update={"version": "2.0.0"}
        ),
        executor=_noop,
    )
    hits = harness.search_tools("weather", principal=EVERYONE)
    assert [hit.ref for hit in hits] == ["get_weather@2.0.0"]


def test_health_cost_and_latency_reorder_equal_matches(tmp_path: Path) -> None:
    h = Harness(home=tmp_path)
    for tool_id in ("lookup_a", "lookup_b"):
        h.register(contract(tool_id, "Look up a stock quote."), executor=_noop)
    figures: dict[str, dict[str, ToolHealth]] = {"now": {}}
    index = ToolIndex(h.registry, health=lambda: figures["now"])
    view = h.views.view(EVERYONE)
    assert names(index.search("stock quote", view)) == ["lookup_a", "lookup_b"]  # a tie: by ref
    figures["now"] = {"lookup_a": ToolHealth(calls=10, failure_rate=0.8, latency_ms=5)}
    ranked = index.search("stock quote", view)
    assert names(ranked) == ["lookup_b", "lookup_a"]
    assert ranked[1].score < ranked[0].score
    figures["now"] = {
        "lookup_a": ToolHealth(calls=10, failure_rate=0.0, latency_ms=0),
        "lookup_b": ToolHealth(calls=10, failure_rate=0.0, latency_ms=60_000),
    }
    assert names(index.search("stock quote", view)) == ["lookup_a", "lookup_b"]


def test_health_comes_from_the_ledger(harness: Harness) -> None:
    from toolkeeper import Proposal

    def broken() -> None:
        raise RuntimeError("down")

    harness.register(contract("broken_weather", "Weather for a city."), executor=broken)
    before = {h.name: h.score for h in harness.search_tools("weather city", principal=EVERYONE)}
    for i in range(3):
        harness.invoke_sync(Proposal(f"c{i}", "broken_weather", {}), principal=EVERYONE)
    harness.flush()
    harness._discovery = None  # a fresh index reads the ledger at once (the cache is 30 s)
    after = {h.name: h.score for h in harness.search_tools("weather city", principal=EVERYONE)}
    assert after["broken_weather"] < before["broken_weather"]
    assert after["get_weather"] == before["get_weather"]


def test_unknown_ranker_is_refused(harness: Harness) -> None:
    with pytest.raises(ConfigError, match="unknown ranker"):
        ToolIndex(harness.registry, ranker="dense")  # type: ignore[arg-type]


def test_summary_is_first_sentence_bounded() -> None:
    assert summary("Does a thing.  Then more.") == "Does a thing."
    assert summary("word " * 100).endswith("…")
    assert len(summary("word " * 100)) == 160


# -- visibility before ranking -------------------------------------------------------------

_WORDS = [
    "weather",
    "city",
    "file",
    "delete",
    "email",
    "send",
    "order",
    "refund",
    "stock",
    "price",
    "report",
    "user",
    "list",
    "create",
]
_CAPS = ["a", "b", "c"]

_tool = st.tuples(
    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6),
    st.frozensets(st.sampled_from(_CAPS), max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(
    tools=st.lists(_tool, min_size=1, max_size=12),
    held=st.frozensets(st.sampled_from(_CAPS)),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4),
    ranker=st.sampled_from(["bm25", "lexical"]),
)
def test_results_and_scores_depend_on_the_visible_set_only(
    tmp_path_factory: pytest.TempPathFactory,
    tools: list[tuple[list[str], frozenset[str]]],
    held: frozenset[str],
    query: list[str],
    ranker: str,
) -> None:
    """No hit is outside what the principal sees, and the scores are exactly those of a
    catalog holding the visible tools alone: hidden tools change neither."""
    principal = Principal("p", capabilities=held)
    full = Harness(home=tmp_path_factory.mktemp("full"))
    alone = Harness(home=tmp_path_factory.mktemp("alone"))
    for i, (text, caps) in enumerate(tools):
        c = contract(f"tool_{i}", " ".join(text), required_capabilities=tuple(sorted(caps)))
        full.register(c, executor=_noop)
        if caps <= held:
            alone.register(c, executor=_noop)
    full.discovery.ranker = alone.discovery.ranker = ranker  # type: ignore[assignment]
    visible = {c.id for c in full.visible_contracts(principal)}
    hits = full.search_tools(" ".join(query), principal=principal, k=50)
    assert {hit.name for hit in hits} <= visible
    reference = alone.search_tools(" ".join(query), principal=principal, k=50)
    assert [(h.name, h.score) for h in hits] == [(h.name, h.score) for h in reference]


def test_views_share_one_index_per_visible_set(harness: Harness) -> None:
    """Principals seeing the same tools share the ranking structure; a change to a tool one
    of them cannot see leaves the other's results alone."""
    views = ToolViews(harness.registry)
    index = ToolIndex(harness.registry)
    first = index.search("file", views.view(EVERYONE), k=10)
    assert index.search("file", views.view(Principal("other")), k=10) == first


def test_discovery_public_api() -> None:
    import toolkeeper.discovery as discovery

    assert sorted(discovery.__all__) == [
        "LOAD_TOOLS",
        "LedgerHealth",
        "MetaTools",
        "Progressive",
        "RANKERS",
        "Ranker",
        "SEARCH_TOOLS",
        "SearchFilters",
        "SearchHit",
        "ToolHealth",
        "ToolIndex",
        "catalog_summary",
    ]
    assert all(hasattr(discovery, name) for name in discovery.__all__)
