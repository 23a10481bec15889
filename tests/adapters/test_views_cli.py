"""`toolkeeper views stats`: per-vendor size of a catalog's tool definitions, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tiktoken
from google.genai import types

from toolkeeper.adapters import VENDORS, gemini, render
from toolkeeper.cli import main
from toolkeeper.cli.views import ENCODING, wire_json
from toolkeeper.importers.catalog import load_catalog

CATALOG = Path(__file__).resolve().parents[2] / "examples" / "catalog"


def test_json_stats_count_every_vendor_rendering_of_the_catalog(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["views", "stats", str(CATALOG), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    contracts = list(load_catalog(CATALOG).contracts)
    assert report["contracts"] == len(contracts) == 5
    assert [row["vendor"] for row in report["vendors"]] == list(VENDORS)
    encoding = tiktoken.get_encoding(ENCODING)
    for row in report["vendors"]:
        text = wire_json(row["vendor"], render(contracts, vendor=row["vendor"]))
        assert row["tools"] == 5
        assert row["bytes"] == len(text.encode())
        assert row["tokens"] == len(encoding.encode(text)) > 0


def test_the_table_lists_vendor_tools_tokens_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["views", "stats", str(CATALOG)]) == 0
    header, *rows = capsys.readouterr().out.strip().splitlines()
    assert header.split() == ["vendor", "tools", "tokens", "bytes"]
    assert [row.split()[0] for row in rows] == list(VENDORS)


def test_the_offline_encoding_is_cl100k_base() -> None:
    offline = tiktoken.get_encoding(ENCODING)
    # The published cl100k_base ids of "hello world" (as in tiktoken's own tests).
    assert offline.encode("hello world") == [15339, 1917]
    assert offline.n_vocab == 100277


def test_gemini_is_counted_in_the_sdks_wire_form() -> None:
    [tool] = gemini.render(list(load_catalog(CATALOG).contracts))
    sdk = types.Tool.model_validate(tool).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert json.loads(wire_json("gemini", [tool])) == [sdk]


def test_a_missing_catalog_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["views", "stats", "no/such/catalog"]) == 2
    assert "does not exist" in capsys.readouterr().err
