"""Load tool contracts from wherever they live: `load_catalog`.

A catalog target is a directory of contract files, one file (a contract, a list of them, a
``{"tools": [...]}`` document, or a tool list in another format such as MCP ``tools/list``,
OpenAI or Anthropic tools, or BFCL JSON lines), or a Python module path. A file is read as
toolkeeper contracts when its entries carry our contract keys (``id`` and ``description``);
anything else goes to `toolkeeper.importers.formats.load_tool_list`.

Loading is forgiving per file and strict per target: a file that does not parse or a
contract that does not validate becomes a `CatalogProblem`, so one bad file does not hide
the rest (lint reports problems as findings), while a target that cannot be read at all
raises `CatalogError`.
"""

from __future__ import annotations

import importlib
import json
import re
import traceback
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import ModuleType
from typing import Any

from toolkeeper.contract.functions import contract_of
from toolkeeper.contract.model import ToolContract, read_data_file
from toolkeeper.errors import CatalogError, ContractError, ToolkeeperError
from toolkeeper.importers.formats import load_tool_list

SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".toml")
"""File types a catalog directory is scanned for."""
_MODULE_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)?$")
_ACCEPTED = (
    "pass a directory of contract files, a .json/.jsonl/.yaml/.yml/.toml file (contracts, an "
    "MCP tools/list result, OpenAI or Anthropic tools, BFCL JSON lines), or an importable "
    "module path such as package.module or package.module:attribute"
)


class ProblemKind(StrEnum):
    LOAD = "load"
    """A file did not parse, or an entry in it is not a valid contract."""
    DUPLICATE = "duplicate"
    """Two sources define the same id@version; the first one loaded is kept."""


@dataclass(frozen=True, slots=True)
class CatalogProblem:
    """Why part of a catalog did not load, and which file or entry it concerns."""

    source: str
    message: str
    kind: ProblemKind = ProblemKind.LOAD


@dataclass(frozen=True, slots=True)
class Catalog:
    """The contracts a target holds, where each came from, and what failed to load."""

    contracts: tuple[ToolContract, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)
    """Contract ref → the file (with a JSON pointer for list entries) or module attribute."""
    problems: tuple[CatalogProblem, ...] = ()


class _Collector:
    """Accumulates contracts in load order, turning a repeated ref into a problem."""

    def __init__(self) -> None:
        self.contracts: dict[str, ToolContract] = {}
        self.sources: dict[str, str] = {}
        self.problems: list[CatalogProblem] = []

    def add(self, contract: ToolContract, source: str) -> None:
        ref = contract.ref
        if ref not in self.contracts:
            self.contracts[ref], self.sources[ref] = contract, source
        else:
            self.problems.append(
                CatalogProblem(
                    source,
                    f"{ref} is defined in {self.sources[ref]} and again in {source}; the first "
                    "is kept",
                    ProblemKind.DUPLICATE,
                )
            )

    def problem(self, source: str, message: str) -> None:
        self.problems.append(CatalogProblem(source, message))

    def catalog(self) -> Catalog:
        return Catalog(tuple(self.contracts.values()), dict(self.sources), tuple(self.problems))


def load_catalog(target: str | Path) -> Catalog:
    """Load every contract `target` holds; see the module docstring for the kinds of target."""
    path = Path(target)
    collector = _Collector()
    if path.is_dir():
        files = catalog_files(path)
        if not files:
            raise CatalogError(
                f"{path} holds no {', '.join(SUFFIXES)} files; {_ACCEPTED}", source=str(path)
            )
        for file in files:
            _load_file(file, collector)
    elif path.is_file():
        if path.suffix.lower() not in SUFFIXES:
            raise CatalogError(
                f"{path} has unsupported type {path.suffix!r}; {_ACCEPTED}", source=str(path)
            )
        _load_file(path, collector)
    elif isinstance(target, str) and _MODULE_PATH.match(target):
        _load_module(target, collector)
    else:
        raise CatalogError(f"{target} does not exist; {_ACCEPTED}", source=str(target))
    return collector.catalog()


def catalog_files(directory: Path) -> list[Path]:
    """Contract files under `directory`, recursively and sorted; hidden entries are skipped."""
    return sorted(
        p
        for p in directory.rglob("*")
        if p.suffix.lower() in SUFFIXES
        and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(directory).parts)
    )


# -- files ----------------------------------------------------------------------------------


def _load_file(path: Path, collector: _Collector) -> None:
    source = str(path)
    try:
        data = _read(path)
    except ToolkeeperError as exc:
        collector.problem(source, str(exc))
        return
    entries, where = _contract_entries(data)
    if entries is None:
        try:
            # One bad tool is reported and skipped; the rest of the file is imported.
            contracts = load_tool_list(
                data, source=source, on_problem=lambda message: collector.problem(source, message)
            )
        except ToolkeeperError as exc:
            collector.problem(source, str(exc))
            return
        for contract in contracts:
            collector.add(contract, source)
        return
    if not entries:
        collector.problem(source, f"{path} holds no tool contracts")
    for index, entry in enumerate(entries):
        entry_source = source if where is None else f"{source}#{where}/{index}"
        if not _is_contract(entry):
            collector.problem(
                entry_source,
                f"{entry_source} is not a toolkeeper contract (it needs 'id' and "
                "'description'); keep toolkeeper contracts and other tool formats in "
                "separate files",
            )
            continue
        try:
            collector.add(ToolContract.from_dict(entry), entry_source)
        except ToolkeeperError as exc:
            collector.problem(entry_source, str(exc))


def _read(path: Path) -> Any:
    suffix = path.suffix.lower()
    if suffix not in (".json", ".jsonl"):
        data = read_data_file(path)
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CatalogError(f"cannot read {path}: {exc.strerror}", source=str(path)) from exc
        data = _json_lines(path, text) if suffix == ".jsonl" else _json(path, text)
    if data is None:
        raise CatalogError(f"{path} is empty", source=str(path))
    return data


def _json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            # BFCL ships JSON lines under a .json suffix: one document per line.
            return _json_lines(path, text)
        raise CatalogError(f"{path} is not valid JSON: {exc}", source=str(path)) from exc


def _json_lines(path: Path, text: str) -> list[Any]:
    documents = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                documents.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise CatalogError(
                    f"{path} line {number} is not JSON: {exc.msg} (column {exc.colno})",
                    source=str(path),
                ) from exc
    return documents


def _is_contract(entry: Any) -> bool:
    return isinstance(entry, dict) and "id" in entry and "description" in entry


def _contract_entries(data: Any) -> tuple[list[Any] | None, str | None]:
    """The entries to read as contracts and the JSON pointer of their list, or None when
    the data is in another format."""
    if _is_contract(data):
        return [data], None
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        entries, where = data["tools"], "/tools"
    elif isinstance(data, list):
        entries, where = data, ""
    else:
        return None, None
    return (entries, where) if any(_is_contract(e) for e in entries) else (None, None)


# -- modules --------------------------------------------------------------------------------


def _load_module(target: str, collector: _Collector) -> None:
    module_name, _, attribute = target.partition(":")
    module = _import(module_name, target)
    if attribute:
        value: Any = module
        for part in attribute.split("."):
            try:
                value = getattr(value, part)
            except AttributeError:
                raise CatalogError(
                    f"module {module_name} has no attribute {attribute!r}; name a ToolContract, "
                    "a @toolkeeper.tool function, or a list of them",
                    source=target,
                ) from None
        found = _collect(value, target)
    else:
        found = [
            item
            for name, value in vars(module).items()
            if not name.startswith("_")
            for item in _collect(value, f"{module_name}:{name}")
        ]
    if not found:
        what = f"{target} is" if attribute else f"module {module_name} defines"
        raise CatalogError(
            f"{what} no ToolContract, @toolkeeper.tool function, or list of them",
            source=target,
        )
    kept: dict[str, ToolContract] = {}
    for contract, source in found:
        # A module often names one tool twice (the function, and a list of all tools).
        if kept.get(contract.ref) != contract:
            kept[contract.ref] = contract
            collector.add(contract, source)


def _import(module_name: str, target: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            raise CatalogError(
                f"{target} is not a file or directory, and no module {exc.name!r} can be "
                f"imported; {_ACCEPTED}",
                source=target,
            ) from exc
        raise CatalogError(f"importing {module_name} failed: {exc}", source=target) from exc
    except Exception as exc:
        # The module's own code raised while importing: a load failure to report, not a crash.
        # Where it raised is part of what it is: `StopIteration:` alone says nothing.
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
        detail = f": {exc}" if str(exc) else ""
        raise CatalogError(
            f"importing {module_name} failed: {type(exc).__name__}{detail}{where}", source=target
        ) from exc


def _collect(value: Any, source: str) -> list[tuple[ToolContract, str]]:
    if isinstance(value, ToolContract):
        return [(value, source)]
    if isinstance(value, list | tuple):
        return [item for i, v in enumerate(value) for item in _collect(v, f"{source}[{i}]")]
    if callable(value):
        try:
            return [(contract_of(value), source)]
        except ContractError:
            return []  # an ordinary function or class, not a tool
    return []
