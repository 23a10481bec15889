"""The manuscript tools of seed 001's case, as in-process Python tools the gateway serves.

Each function implements the contract shipped in ``examples/catalog/``: the contract file is
the single source of truth of what a model sees (names, schemas, effects, capabilities), and
the function is what runs. The "manuscript system" is a small JSON file beside the ledger
(``$TOOLKEEPER_HOME/manuscripts.json``; `toolkeeper serve` sets ``TOOLKEEPER_HOME``).

``manuscript_read_back`` and ``manuscript_version`` are the verifier and resource-version
reader the update contract names; the gateway finds them here by those names.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toolkeeper import ToolContext, ToolContract, tool
from toolkeeper.executors import ToolFailure

CATALOG = Path(__file__).resolve().parent.parent / "catalog"
SEED = {
    "m-42": {
        "title": "Tool Use",
        "subtitle": "A draft",
        "keywords": ["agents", "tools"],
        "language": "en",
        "version": 1,
        "revisions": [],
    },
    "m-7": {
        "title": "Ledgers for Agents",
        "subtitle": "",
        "keywords": ["audit"],
        "language": "en",
        "version": 3,
        "revisions": [],
    },
}
_FIELDS = ("title", "subtitle", "keywords")
_lock = threading.Lock()


def contract(name: str) -> dict[str, Any]:
    """The catalog's contract `name`, as options for `@tool`."""
    path = next(CATALOG.glob(f"{name}.*"))
    return ToolContract.load(path).to_dict()


def _store() -> Path:
    return Path(os.environ.get("TOOLKEEPER_HOME", ".toolkeeper")) / "manuscripts.json"


def _load() -> dict[str, Any]:
    path = _store()
    if not path.exists():
        _save(SEED)
    return json.loads(path.read_text(encoding="utf-8"))


def _save(data: dict[str, Any]) -> None:
    path = _store()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=2), encoding="utf-8")
    temporary.replace(path)


def _read(manuscript_id: str) -> dict[str, Any]:
    record = _load().get(manuscript_id)
    if record is None:
        raise ToolFailure(
            f"no manuscript {manuscript_id!r}",
            category="not_found",
            suggested_fix="Check the id; search_manuscripts finds ids by title words.",
        )
    return record


def _metadata(manuscript_id: str, record: dict[str, Any]) -> dict[str, Any]:
    fields = ("title", "subtitle", "keywords", "language", "version")
    return {"manuscript_id": manuscript_id, **{name: record[name] for name in fields}}


@tool(**contract("get_manuscript_metadata"))
def get_manuscript_metadata(manuscript_id: str) -> dict[str, Any]:
    return _metadata(manuscript_id, _read(manuscript_id))


@tool(**contract("preview_manuscript_metadata_update"))
def preview_manuscript_metadata_update(
    manuscript_id: str,
    title: str | None = None,
    subtitle: str | None = None,
    keywords: list[str] | None = None,
) -> dict[str, Any]:
    current = _read(manuscript_id)
    proposed = {"title": title, "subtitle": subtitle, "keywords": keywords}
    changes = {
        name: {"from": current[name], "to": value}
        for name, value in proposed.items()
        if value is not None and value != current[name]
    }
    return {"manuscript_id": manuscript_id, "base_version": current["version"], "changes": changes}


@tool(**contract("update_manuscript_metadata"))
def update_manuscript_metadata(
    manuscript_id: str,
    base_version: int,
    context: ToolContext,
    title: str | None = None,
    subtitle: str | None = None,
    keywords: list[str] | None = None,
) -> dict[str, Any]:
    proposed = {"title": title, "subtitle": subtitle, "keywords": keywords}
    with _lock:
        data = _load()
        record = data.get(manuscript_id)
        if record is None:
            raise ToolFailure(f"no manuscript {manuscript_id!r}", category="not_found")
        if record["version"] != base_version:
            raise ToolFailure(
                f"{manuscript_id} is at version {record['version']}, not {base_version}",
                category="stale",
                suggested_fix="Preview the change again and propose it against the new version.",
            )
        changed = [name for name, value in proposed.items() if value is not None]
        record.update({name: proposed[name] for name in changed})
        record["version"] += 1
        record["revisions"].append(
            {
                "version": record["version"],
                "changed_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "changed_by": context.principal.id,
                "changed_fields": changed,
            }
        )
        _save(data)
    return {"manuscript_id": manuscript_id, "version": record["version"], "changed_fields": changed}


@tool(**contract("list_manuscript_revisions"))
def list_manuscript_revisions(manuscript_id: str, limit: int = 20) -> dict[str, Any]:
    revisions = _read(manuscript_id)["revisions"]
    newest_first = list(reversed(revisions))[:limit]
    return {"manuscript_id": manuscript_id, "total": len(revisions), "revisions": newest_first}


def manuscript_read_back(arguments: dict[str, Any], context: ToolContext) -> bool:
    """Whether the manuscript now holds every field the update set."""
    record = _read(arguments["manuscript_id"])
    return all(record[name] == arguments[name] for name in _FIELDS if name in arguments)


def manuscript_version(arguments: dict[str, Any], context: ToolContext) -> dict[str, str]:
    """The manuscript's version, re-read before an approved update resumes."""
    manuscript_id = arguments["manuscript_id"]
    return {manuscript_id: str(_read(manuscript_id)["version"])}
