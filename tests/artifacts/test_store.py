"""The artifact store is content-addressed, atomic and idempotent; projection bounds what a
model sees and keeps the whole result retrievable."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest

from toolkeeper.artifacts.store import (
    PREVIEW_MAX_BYTES,
    SUMMARY_MAX_CHARS,
    ArtifactError,
    ArtifactStore,
    Projection,
    project_result,
)
from toolkeeper.contract.model import ResultProjection
from toolkeeper.schema.document import canonical_json


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(tmp_path / "artifacts")


# -- store ----------------------------------------------------------------------------------


def test_default_root_is_under_dot_toolkeeper() -> None:
    assert ArtifactStore().root == Path(".toolkeeper/artifacts")


def test_bytes_are_stored_verbatim_at_their_sha256_path(store: ArtifactStore) -> None:
    data = b"line 1\nline 2\n"
    hexdigest = hashlib.sha256(data).hexdigest()
    ref = store.put(data, media_type="text/plain", description="log")
    assert ref.uri == f"toolkeeper-artifact://sha256/{hexdigest}"
    assert ref.digest == f"sha256:{hexdigest}"
    assert (ref.size, ref.media_type, ref.description) == (len(data), "text/plain", "log")
    assert store.path_for(ref) == store.root / "sha256" / hexdigest[:2] / hexdigest
    assert store.path_for(ref).read_bytes() == data
    assert store.get(ref) == data
    assert store.get(ref.uri) == data


def test_objects_are_stored_as_canonical_json(store: ArtifactStore) -> None:
    first = store.put({"b": [1, 2], "a": "é"})
    second = store.put({"a": "é", "b": [1, 2]})
    assert first == second
    assert store.get(first) == canonical_json({"a": "é", "b": [1, 2]}).encode()
    assert store.get_json(first.uri) == {"a": "é", "b": [1, 2]}


def test_put_is_idempotent_and_leaves_no_temporary_files(store: ArtifactStore) -> None:
    refs = {store.put({"n": 1}) for _ in range(3)}
    assert len(refs) == 1
    files = [p for p in store.root.rglob("*") if p.is_file()]
    assert files == [store.path_for(refs.pop())]


def test_concurrent_writers_of_the_same_content_produce_one_intact_file(
    store: ArtifactStore,
) -> None:
    payload = {"rows": list(range(20_000))}
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(store.put(payload))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results)) == 1
    assert store.get_json(results[0]) == payload
    assert [p.name for p in store.root.rglob("*") if p.is_file()] == [
        results[0].digest.removeprefix("sha256:")
    ]


def test_exists_reports_presence(store: ArtifactStore) -> None:
    ref = store.put(b"x")
    assert store.exists(ref)
    other = "toolkeeper-artifact://sha256/" + "0" * 64
    assert not store.exists(other)


def test_missing_artifact_names_the_uri_and_the_store(store: ArtifactStore) -> None:
    uri = "toolkeeper-artifact://sha256/" + "ab" * 32
    with pytest.raises(ArtifactError, match="not in the store") as info:
        store.get(uri)
    assert info.value.uri == uri
    assert str(store.root) in str(info.value)


@pytest.mark.parametrize(
    "bad",
    [
        "sha256:" + "a" * 64,
        "toolkeeper-artifact://sha256/xyz",
        "toolkeeper-artifact://md5/" + "a" * 32,
        "toolkeeper-artifact://sha256/" + "A" * 64,
    ],
)
def test_malformed_reference_says_the_expected_form(store: ArtifactStore, bad: str) -> None:
    with pytest.raises(ArtifactError, match="toolkeeper-artifact://sha256/<64 lowercase hex"):
        store.path_for(bad)


def test_tampered_artifact_is_refused(store: ArtifactStore) -> None:
    ref = store.put({"amount": 10})
    store.path_for(ref).write_bytes(b'{"amount":1000}')
    with pytest.raises(ArtifactError, match="does not match its digest"):
        store.get(ref)


def test_get_json_of_non_json_bytes_says_to_use_get(store: ArtifactStore) -> None:
    ref = store.put(b"\x00\x01binary")
    with pytest.raises(ArtifactError, match=r"read it with get\(\)"):
        store.get_json(ref)


# -- projection -----------------------------------------------------------------------------


def test_small_output_passes_through_with_a_default_summary(store: ArtifactStore) -> None:
    output = {"id": "m-1", "title": "On Tools"}
    result = project_result(output, ResultProjection(), store)
    assert result == Projection(
        structured_content=output, summary="Returned 2 fields: id, title.", artifact_refs=()
    )
    assert not store.root.exists()


def test_fields_keep_only_the_named_fields_for_the_model(store: ArtifactStore) -> None:
    output = {"id": "m-1", "title": "On Tools", "internal_note": "x"}
    result = project_result(output, ResultProjection(fields=("id", "title", "absent")), store)
    assert result.structured_content == {"id": "m-1", "title": "On Tools"}


def test_large_output_is_stored_whole_and_previewed(store: ArtifactStore) -> None:
    rows = [{"n": i, "text": "row " * 10} for i in range(500)]
    output = {
        "status": "ok",
        "count": 500,
        "rows": rows,
        "meta": {"a": 1, "b": 2},
        "log": "x" * 5000,
    }
    result = project_result(output, ResultProjection(artifact_threshold=1000), store)

    (ref,) = result.artifact_refs
    assert store.get_json(ref) == output
    assert result.structured_content == {
        "status": "ok",
        "count": 500,
        "_omitted": {
            "rows": {"type": "array", "length": 500},
            "meta": {"type": "object", "keys": 2},
            "log": {"type": "string", "length": 5000},
        },
        "_artifact": ref.uri,
    }
    assert ref.uri in result.summary


def test_stored_artifact_holds_the_full_output_even_when_fields_hide_some(
    store: ArtifactStore,
) -> None:
    output = {"rows": list(range(1000)), "audit_only": "kept for audit"}
    result = project_result(
        output, ResultProjection(fields=("rows",), artifact_threshold=100), store
    )
    assert store.get_json(result.artifact_refs[0]) == output
    assert "audit_only" not in result.structured_content["_omitted"]


def test_preview_stays_bounded_when_there_are_many_scalar_fields(store: ArtifactStore) -> None:
    output = {f"field_{i:04d}": i for i in range(2000)}
    result = project_result(output, ResultProjection(artifact_threshold=0), store)
    preview = result.structured_content
    assert len(canonical_json(preview).encode()) <= PREVIEW_MAX_BYTES
    shown = len(preview) - 2  # minus _omitted and _artifact
    assert preview["_omitted"]["_more_fields"] == 2000 - shown
    assert list(preview)[:3] == ["field_0000", "field_0001", "field_0002"]


def test_threshold_is_measured_in_canonical_json_bytes(store: ArtifactStore) -> None:
    output = {"t": "é" * 10}  # 10 characters, 20 bytes in UTF-8
    size = len(canonical_json(output).encode())
    at = project_result(output, ResultProjection(artifact_threshold=size), store)
    over = project_result(output, ResultProjection(artifact_threshold=size - 1), store)
    assert at.artifact_refs == ()
    assert len(over.artifact_refs) == 1


def test_summary_template_formats_over_the_full_output(store: ArtifactStore) -> None:
    projection = ResultProjection(
        fields=("id",), summary_template="Found {count} manuscripts; first is {items[0][title]}"
    )
    output = {"id": 1, "count": 2, "items": [{"title": "A"}, {"title": "B"}]}
    assert project_result(output, projection, store).summary == ("Found 2 manuscripts; first is A")


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Found {count} of {total}", "Found 3 of {total}"),
        ("Top: {items[5]}", "Top: {items[5]}"),
        ("Total {total:d}", "Total {total}"),
        ("Count {count:>4}", "Count    3"),
        ("Name {name:d}", "Name abc"),
    ],
)
def test_summary_template_tolerates_missing_keys_and_bad_specs(
    store: ArtifactStore, template: str, expected: str
) -> None:
    output = {"count": 3, "items": [], "name": "abc"}
    summary = project_result(output, ResultProjection(summary_template=template), store).summary
    assert summary == expected


def test_malformed_template_falls_back_to_the_default_summary(store: ArtifactStore) -> None:
    result = project_result({"a": 1}, ResultProjection(summary_template="Found {count"), store)
    assert result.summary == "Returned 1 field: a."


def test_summary_is_bounded(store: ArtifactStore) -> None:
    output = {"text": "y" * 5000}
    summary = project_result(output, ResultProjection(summary_template="{text}"), store).summary
    assert len(summary) == SUMMARY_MAX_CHARS
    assert summary.endswith("…")


def test_default_summary_of_many_fields_names_a_few(store: ArtifactStore) -> None:
    output = {f"f{i}": i for i in range(12)}
    summary = project_result(output, ResultProjection(), store).summary
    assert summary == "Returned 12 fields: f0, f1, f2, f3, f4, f5, f6, f7, … (4 more)."


def test_projection_is_json_ready(store: ArtifactStore) -> None:
    result = project_result(
        {"rows": list(range(100))}, ResultProjection(artifact_threshold=10), store
    )
    json.dumps(result.structured_content)
