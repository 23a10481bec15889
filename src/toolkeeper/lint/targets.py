"""What `toolkeeper lint` reads: `load_target`.

Everything `toolkeeper.importers.catalog.load_catalog` reads (a directory, a data file, a
module path), plus a Python file by its path (``tools/manuscripts.py``). Python sources —
a file or a module path — also yield the tools registered on a `Harness` (or a bare
`Registry`) that the module defines at top level, as well as its `ToolContract` objects,
``@tool`` functions and lists of them.

Reading Python runs it: the file or module is imported, with all its top-level code, exactly
as ``python -c "import module"`` would. Lint only what you would run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from toolkeeper.contract.model import ToolContract
from toolkeeper.errors import CatalogError
from toolkeeper.importers.catalog import Catalog, CatalogProblem, ProblemKind, load_catalog
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.registry import Registry


def load_target(target: str | Path) -> Catalog:
    """The contracts `target` holds: a ``.py`` file, or anything `load_catalog` reads."""
    path = Path(target)
    if path.suffix == ".py" and path.is_file():
        return _python_file(path)
    if path.exists() or ":" in str(target):
        return load_catalog(target)  # a data target, or one attribute named on purpose
    try:
        catalog = load_catalog(target)
    except CatalogError:
        module = sys.modules.get(str(target))
        if module is None or not _registered(module):
            raise  # not importable, or nothing in it at all
        catalog = Catalog()
    module = sys.modules.get(str(target))
    return catalog if module is None else _with_registered(catalog, module, str(target))


def _python_file(path: Path) -> Catalog:
    """Import `path` under a private module name, then collect it like a module path. Its
    folder is on `sys.path` while it imports, so it can import its neighbours."""
    resolved = path.resolve()
    stem = re.sub(r"\W", "_", resolved.stem)
    name = f"_toolkeeper_lint_{stem}_{hashlib.sha256(bytes(resolved)).hexdigest()[:8]}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, resolved)
        if spec is None or spec.loader is None:
            raise CatalogError(f"{path} cannot be imported as a Python module", source=str(path))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        folder = str(resolved.parent)
        sys.path.insert(0, folder)
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:
            del sys.modules[name]
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt and SystemExit are the user's, not a load failure
            raise CatalogError(
                f"importing {path} failed: {type(exc).__name__}: {exc}", source=str(path)
            ) from exc
        finally:
            sys.path.remove(folder)
    try:
        catalog = load_catalog(name)
    except CatalogError:
        catalog = Catalog()  # no contract, function or list: maybe only a harness
    found = _with_registered(_relabel(catalog, name, str(path)), module, str(path))
    if not found.contracts and not found.problems:
        raise CatalogError(
            f"{path} defines no ToolContract, @toolkeeper.tool function, list of them, or "
            "Harness with registered tools",
            source=str(path),
        )
    return found


def _registered(module: ModuleType) -> list[tuple[str, ToolContract]]:
    """(attribute, contract) for every tool registered on the module's harnesses and
    registries, disabled ones included."""
    found = []
    for attribute, value in vars(module).items():
        registry = value.registry if isinstance(value, Harness) else value
        if not attribute.startswith("_") and isinstance(registry, Registry):
            for ref in registry.all_refs():
                entry = registry.entry(ref)
                if entry is not None:
                    found.append((attribute, entry.contract))
    return found


def _with_registered(catalog: Catalog, module: ModuleType, label: str) -> Catalog:
    """`catalog` plus the module's registered tools it does not hold yet; the same ref with
    other content is a TK002 duplicate."""
    contracts = {c.ref: c for c in catalog.contracts}
    sources = dict(catalog.sources)
    problems = list(catalog.problems)
    for attribute, contract in _registered(module):
        source = f"{label}:{attribute}"
        kept = contracts.get(contract.ref)
        if kept is None:
            contracts[contract.ref], sources[contract.ref] = contract, source
        elif kept != contract:
            problems.append(
                CatalogProblem(
                    source,
                    f"{contract.ref} is registered on {attribute} with other content than "
                    f"{sources[contract.ref]}; the latter is kept",
                    ProblemKind.DUPLICATE,
                )
            )
    return Catalog(tuple(contracts.values()), sources, tuple(problems))


def _relabel(catalog: Catalog, name: str, label: str) -> Catalog:
    """`catalog` with the private module name in its sources replaced by the file path."""

    def named(source: str) -> str:
        return label + source[len(name) :] if source.startswith(name) else source

    return Catalog(
        catalog.contracts,
        {ref: named(source) for ref, source in catalog.sources.items()},
        tuple(CatalogProblem(named(p.source), p.message, p.kind) for p in catalog.problems),
    )
