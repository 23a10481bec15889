"""`toolkeeper.shell.results`: the ending kept apart from the effect, output redacted and cut
to head and tail with the whole stored as an artifact."""

from __future__ import annotations

from pathlib import Path

from toolkeeper.artifacts.store import ArtifactStore
from toolkeeper.executors.sandbox import Sandbox
from toolkeeper.secrets.redaction import Redactor
from toolkeeper.shell.results import Changes, Snapshot, head_and_tail, shell_output, stream


def test_changes_name_created_modified_and_deleted_files(tmp_path: Path) -> None:
    (tmp_path / "keep").write_text("a")
    (tmp_path / "edit").write_text("a")
    (tmp_path / "gone").write_text("a")
    before = Snapshot.of([tmp_path])
    (tmp_path / "edit").write_text("bb")
    (tmp_path / "gone").unlink()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "new").write_text("c")
    changes = Changes.between(before, Snapshot.of([tmp_path]))
    assert changes.created == (str(tmp_path / "sub"), str(tmp_path / "sub" / "new"))
    assert changes.modified == (str(tmp_path / "edit"),)
    assert changes.deleted == (str(tmp_path / "gone"),)
    assert changes.describe() == "wrote 3 files (2 created, 1 modified) and deleted 1 file"


def test_a_snapshot_over_its_limit_says_it_is_incomplete(tmp_path: Path) -> None:
    for n in range(5):
        (tmp_path / str(n)).write_text("x")
    small = Snapshot.of([tmp_path], limit=3)
    assert not small.complete
    assert "at least" in Changes.between(small, small).describe()


def test_skipped_trees_are_not_listed(tmp_path: Path) -> None:
    (tmp_path / ".toolkeeper").mkdir()
    (tmp_path / ".toolkeeper" / "ledger.db").write_text("x")
    listed = Snapshot.of([tmp_path], skip=[tmp_path / ".toolkeeper"]).entries
    assert str(tmp_path / ".toolkeeper" / "ledger.db") not in listed


def test_head_and_tail_keep_both_ends_and_say_what_was_left_out() -> None:
    data = b"A" * 5000 + b"B" * 5000
    text = head_and_tail(data, head=100, tail=100)
    assert text.startswith("A" * 100) and text.endswith("B" * 100)
    assert "9800 bytes omitted" in text
    assert head_and_tail(b"short") == "short"
    # a cut inside a multi-byte character drops it rather than inventing one
    assert "\ufffd" not in head_and_tail("é".encode() * 300, head=101, tail=101)


def test_a_stream_is_redacted_before_it_is_cut_or_stored(tmp_path: Path) -> None:
    redactor = Redactor()
    redactor.add("tk-live-0123456789")
    store = ArtifactStore(tmp_path / "artifacts")
    data = b"token=tk-live-0123456789\n" + b"x" * 10000 + b"\nend tk-live-0123456789"
    out = stream("stdout", data, len(data), redactor=redactor, artifacts=store, head=50, tail=50)
    assert "tk-live" not in out["stdout"] and "[REDACTED]" in out["stdout"]
    whole = store.get(out["stdout_artifact"])
    assert b"tk-live" not in whole and whole.count(b"[REDACTED]") == 2
    assert out["stdout_bytes"] == len(data)


def test_a_short_stream_is_not_stored(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    out = stream("stderr", b"oops\n", 5, redactor=Redactor(), artifacts=store)
    assert out == {"stderr": "oops\n", "stderr_bytes": 5}


def test_the_output_keeps_the_exit_code_apart_from_the_effect(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    sandbox = Sandbox(roots=(root,))
    before = Snapshot.of([root])
    done = sandbox.run_blocking(
        ["sh", "-c", "touch a b c; echo failing >&2; exit 1"], cwd=root, timeout=10
    )
    changes = Changes.between(before, Snapshot.of([root]))
    output = shell_output(
        done,
        changes,
        timeout=10,
        network=False,
        redactor=Redactor(),
        artifacts=ArtifactStore(tmp_path / "a"),
    )
    assert output["exit_code"] == 1 and output["changed"]["count"] == 3
    assert output["account"].startswith("exited 1 after")
    assert output["account"].endswith("it wrote 3 files (3 created)")
    assert output["stderr"] == "failing\n"
