"""Per-principal views of the catalog, kept up to date one tool at a time.

A `View` is what one capability set sees under one model family: vendor name, tool id and
``id@version`` → entry, the visible contracts in ref order, and a trigram index of the vendor
names for "did you mean" suggestions. A view is keyed by the capabilities the principal holds
among those some tool requires, so principals differing only in others share it. `ToolViews`
owns the views, at most `VIEW_LIMIT` of them (least recently used first out), and changes
every live view when one tool changes — a registration, or a registry disabling or enabling a
tool — instead of rebuilding them all. So catalog-wide work happens once per view, never on
the per-call path.

Vendor names are `contract.naming.vendor_names` of the visible latest contracts, computed per
group of contracts that want the same name: a group's names depend on the group alone as long
as no name it hands out is taken by another group (an 8-hex suffix colliding with a real
name). When that happens the view falls back to `vendor_names` over all its contracts on every
change, so the names always equal what the adapters render.
"""

from __future__ import annotations

import difflib
import heapq
import itertools
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from toolkeeper.contract.model import ToolContract
from toolkeeper.contract.naming import FAMILIES, vendor_names
from toolkeeper.errors import ConfigError
from toolkeeper.runtime.invocation import Principal
from toolkeeper.runtime.registry import Registry, ToolEntry

VIEW_LIMIT = 32
"""Views kept at once; each holds maps (and, once asked, an index) over its visible tools."""
MAX_COMPARED = 32
"""Candidates from the index scored with difflib per unknown name: the per-query bound."""
SCAN_BUDGET = 2_000
"""Index postings read per unknown name, rarest trigrams first."""
DEFAULT_FAMILY = "mcp"

Capabilities = frozenset[str] | None
"""A view's capability set; None sees every tool (a caller without a principal)."""


@dataclass(frozen=True, slots=True)
class Suggestions:
    """Close names for an unknown one, and what finding them cost."""

    names: tuple[str, ...]
    compared: int
    """Candidates scored with difflib (at most `MAX_COMPARED`)."""
    scanned: int
    """Index postings read (at most `SCAN_BUDGET`)."""


def _trigrams(name: str) -> set[str]:
    padded = f"\x02\x02{name.lower()}\x03"
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


class NameIndex:
    """A trigram inverted index over names: candidates for a query in bounded time."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        # Postings keep insertion order (dicts, not sets), so a query cut short by the scan
        # budget reads the same names in every process.
        self._postings: dict[str, dict[str, None]] = defaultdict(dict)
        self._size: dict[str, int] = {}
        self._longest = 0
        """An upper bound on the length of an indexed name (kept through discards)."""
        for name in names:
            self.add(name)

    def __len__(self) -> int:
        return len(self._size)

    def add(self, name: str) -> None:
        grams = _trigrams(name)
        self._size[name] = len(grams)
        self._longest = max(self._longest, len(name.lower()))  # as compared
        for gram in grams:
            self._postings[gram][name] = None

    def discard(self, name: str) -> None:
        if self._size.pop(name, None) is None:
            return
        for gram in _trigrams(name):
            posting = self._postings[gram]
            posting.pop(name, None)
            if not posting:
                del self._postings[gram]

    def suggest(self, name: str, *, limit: int = 3, cutoff: float = 0.6) -> Suggestions:
        """Up to `limit` indexed names whose difflib ratio to `name` is at least `cutoff`,
        best first — as `difflib.get_close_matches`, but scoring only the `MAX_COMPARED`
        names sharing the most trigrams with `name`, found within `SCAN_BUDGET` postings."""
        # difflib's ratio is at most 2*len(b)/(len(a)+len(b)): a name this much longer than
        # every indexed one matches none, and reading it would cost time in its length.
        if cutoff > 0 and len(name) * cutoff > self._longest * (2 - cutoff):
            return Suggestions((), 0, 0)
        grams = _trigrams(name)
        postings = sorted(
            (self._postings[g] for g in grams if g in self._postings), key=len
        )  # rarest first: they say the most about a name and cost the least to read
        shared: Counter[str] = Counter()
        scanned = 0
        for posting in postings:
            take = min(len(posting), SCAN_BUDGET - scanned)
            shared.update(itertools.islice(posting, take))
            scanned += take
            if scanned >= SCAN_BUDGET:
                break
        # Rank by trigram overlap (Jaccard), so a long name sharing many grams by size alone
        # does not crowd out a close short one; shared counts narrow the field first.
        field = shared.most_common(4 * MAX_COMPARED)
        candidates = heapq.nlargest(
            MAX_COMPARED,
            field,
            key=lambda item: (item[1] / (len(grams) + self._size[item[0]] - item[1]), item[0]),
        )
        matcher = difflib.SequenceMatcher()
        matcher.set_seq2(name.lower())
        bounded = []
        for candidate, _ in candidates:
            matcher.set_seq1(candidate.lower())
            if matcher.real_quick_ratio() >= cutoff and (bound := matcher.quick_ratio()) >= cutoff:
                bounded.append((bound, candidate))
        # quick_ratio bounds ratio from above, so in falling bound order the search can stop
        # once no bound left beats the worst of the best `limit`: the full ratio, the costly
        # part, runs on a few candidates, with the same answer as running it on all.
        bounded.sort(reverse=True)
        best: list[tuple[float, str]] = []  # a min-heap of the best `limit` (ratio, name)
        for bound, candidate in bounded:
            if len(best) == limit and bound < best[0][0]:
                break
            matcher.set_seq1(candidate.lower())
            if (ratio := matcher.ratio()) >= cutoff:
                heapq.heappush(best, (ratio, candidate))  # ties: the greater name, as difflib
                if len(best) > limit:
                    heapq.heappop(best)
        names = tuple(candidate for _, candidate in sorted(best, reverse=True))
        return Suggestions(names, len(candidates), scanned)


class View(Mapping[str, ToolEntry]):
    """Name → entry for one capability set and model family: vendor names first, then tool
    ids (the latest version), then ``id@version`` refs (which pin a version)."""

    def __init__(self, capabilities: Capabilities, family: str, wanted: _WantedNames) -> None:
        self.capabilities = capabilities
        self.family = family
        self.version = 0
        """Changes whenever what this view holds changes; unique across all views."""
        self._wanted = wanted
        self._latest: dict[str, ToolEntry] = {}  # tool id → latest entry
        self._refs: dict[str, ToolEntry] = {}  # id@version → entry, for visible ids
        self._refs_of: dict[str, tuple[str, ...]] = {}
        self._vendor: dict[str, ToolEntry] = {}  # vendor name → latest entry
        self._name_of: dict[str, str] = {}  # latest ref → vendor name
        self._groups: dict[str, set[str]] = defaultdict(set)  # wanted name → latest refs
        self._wants: dict[str, str] = {}  # latest ref → the name it wanted when it came in
        self._whole_table = False
        self._index: NameIndex | None = None
        self._contracts: list[ToolContract] | None = None

    def __repr__(self) -> str:
        tools = len(self._latest)
        return f"View(capabilities={self.capabilities!r}, family={self.family!r}, tools={tools})"

    # -- Mapping -------------------------------------------------------------------------

    def __getitem__(self, name: str) -> ToolEntry:
        entry = self._vendor.get(name) or self._latest.get(name) or self._refs.get(name)
        if entry is None:
            raise KeyError(name)
        return entry

    def __iter__(self) -> Iterator[str]:
        yield from self._vendor
        yield from (n for n in self._latest if n not in self._vendor)
        yield from self._refs

    def __len__(self) -> int:
        return (
            len(self._vendor) + len(self._refs) + sum(n not in self._vendor for n in self._latest)
        )

    # -- what the harness and the gateway read ---------------------------------------------

    def contracts(self) -> list[ToolContract]:
        """The latest version of every visible tool, in ref order."""
        if self._contracts is None:
            self._contracts = sorted((e.contract for e in self._latest.values()), key=_ref)
        return self._contracts

    def vendor_name(self, ref: str) -> str | None:
        """The name this view's family sees for a visible latest ref."""
        return self._name_of.get(ref)

    def suggest(self, name: str) -> Suggestions:
        """Visible vendor names close to `name`, one per tool (see `NameIndex.suggest`)."""
        if self._index is None:
            self._index = NameIndex(self._vendor)
        return self._index.suggest(name)

    # -- changes -----------------------------------------------------------------------------

    def sees(self, contract: ToolContract) -> bool:
        return self.capabilities is None or set(contract.required_capabilities) <= self.capabilities

    def put(self, tool_id: str, latest: ToolEntry | None, refs: Mapping[str, ToolEntry]) -> None:
        """Make the view hold `tool_id` as the registry has it now: `latest` (None when the
        tool is gone or disabled) and every registered ``id@version`` of it."""
        old = self._latest.pop(tool_id, None)
        for ref in self._refs_of.pop(tool_id, ()):
            del self._refs[ref]
        if old is not None:
            self._unname(old.contract.ref)
        if latest is not None and self.sees(latest.contract):
            self._latest[tool_id] = latest
            # A pinned version resolves only for whoever may see that version itself.
            pinned = [ref for ref, entry in refs.items() if self.sees(entry.contract)]
            self._refs.update((ref, refs[ref]) for ref in pinned)
            self._refs_of[tool_id] = tuple(pinned)
            self._name(latest.contract.ref)
        elif old is None:
            return  # neither held nor visible: nothing this view shows changed
        self._contracts = None
        self.version = next(_versions)

    def _name(self, ref: str) -> None:
        wanted = self._wants[ref] = self._wanted.of(self._latest[_id_of(ref)].contract, self.family)
        self._groups[wanted].add(ref)
        self._rename(wanted)

    def _unname(self, ref: str) -> None:
        wanted = self._wants.pop(ref)
        self._groups[wanted].discard(ref)
        self._drop_name(ref)
        self._rename(wanted)
        if not self._groups[wanted]:
            del self._groups[wanted]

    def _rename(self, wanted: str) -> None:
        """Name the group wanting `wanted` (see the module docstring)."""
        if self._whole_table:
            self._rename_all()
            return
        group = self._groups[wanted]
        if len(group) == 1:
            names = dict.fromkeys(group, wanted)  # alone, a contract gets the name it wants
        else:
            contracts = [self._latest[_id_of(ref)].contract for ref in group]
            names = vendor_names(contracts, self.family)
        for ref in group:
            self._drop_name(ref)
        if any(name in self._vendor for name in names.values()):
            self._whole_table = True
            self._rename_all()
            return
        for ref, name in names.items():
            self._set_name(ref, name)

    def _rename_all(self) -> None:
        for ref in list(self._name_of):
            self._drop_name(ref)
        contracts = [entry.contract for entry in self._latest.values()]
        for ref, name in vendor_names(contracts, self.family).items():
            self._set_name(ref, name)

    def _set_name(self, ref: str, name: str) -> None:
        self._name_of[ref] = name
        self._vendor[name] = self._latest[_id_of(ref)]
        if self._index is not None:
            self._index.add(name)

    def _drop_name(self, ref: str) -> None:
        name = self._name_of.pop(ref, None)
        if name is not None:
            del self._vendor[name]
            if self._index is not None:
                self._index.discard(name)


_versions = itertools.count(1)
"""View versions: unique across every view of the process, so a rebuilt view never repeats
one an evicted view had (caches keyed by version stay right)."""


def _ref(contract: ToolContract) -> str:
    return contract.ref


def _id_of(ref: str) -> str:
    return ref.rsplit("@", 1)[0]


class _WantedNames:
    """The legal name each contract asks for per family (what `vendor_names` gives it alone):
    a fact of the contract, computed once and shared by every view."""

    def __init__(self) -> None:
        self._names: dict[tuple[str, str], str] = {}

    def of(self, contract: ToolContract, family: str) -> str:
        key = (contract.ref, family)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = vendor_names([contract], family)[contract.ref]
        return name

    def forget(self, ref: str) -> None:
        """`ref` was registered again, maybe with new content (a withdrawn definition can be
        replaced): its names are computed afresh."""
        for family in FAMILIES:
            self._names.pop((ref, family), None)


class ToolViews:
    """Every live `View` of one registry, changed in place as tools change."""

    def __init__(self, registry: Registry, *, limit: int = VIEW_LIMIT) -> None:
        self._registry = registry
        self._limit = limit
        self._views: OrderedDict[tuple[Capabilities, str], View] = OrderedDict()
        self._refs: dict[str, dict[str, None]] = defaultdict(dict)  # tool id → its refs
        self._wanted = _WantedNames()
        self._generation = registry.generation
        """The registry generation the views reflect."""
        self._required: frozenset[str] = frozenset()
        """Every capability some registered tool requires: only these tell views apart, so
        principals differing only in others (a per-user capability) share one view."""
        for ref in registry.all_refs():  # what was registered before these views existed
            self._refs[ref.split("@", 1)[0]][ref] = None
            self._require(ref)
        registry.subscribe(self._registry_changed)

    def __repr__(self) -> str:
        return f"ToolViews(views={len(self._views)}, limit={self._limit})"

    def __len__(self) -> int:
        return len(self._views)

    def view(self, principal: Principal | None, family: str | None = None) -> View:
        """What `principal` sees under `family` (None: the MCP names). Built on first use,
        then kept current by `added` and `changed`."""
        held = principal.capabilities & self._required if principal is not None else None
        key = (held, family or DEFAULT_FAMILY)
        if key[1] not in FAMILIES:
            # Refused before a view is kept: a kept view of an unknown family would make every
            # later registration fail while naming its tools.
            raise ConfigError(
                f"unknown model family {key[1]!r}; use one of {', '.join(FAMILIES)}",
                key="family",
                value=key[1],
            )
        if self._registry.generation != self._generation:
            # The registry changed without `added` or `changed` being told (a disable or an
            # enable nobody announced): no view can be trusted, each is built again on use.
            self._views.clear()
            self._generation = self._registry.generation
        view = self._views.get(key)
        if view is not None:
            self._views.move_to_end(key)
            return view
        view = View(key[0], key[1], self._wanted)
        for tool_id in self._refs:
            view.put(tool_id, *self._current(tool_id))
        self._views[key] = view
        if len(self._views) > self._limit:
            self._views.popitem(last=False)
        return view

    def _registry_changed(self, tool_id: str, added: str | None) -> None:
        """The registry's listener: a ref was added to `tool_id`, or one was disabled or
        enabled."""
        if added is not None:
            self._refs[tool_id][added] = None
            self._wanted.forget(added)
            # A view stays right for whoever it served: its key lacks the new capability, so
            # only principals holding it (who now get another key) leave it.
            self._require(added)
        self.changed(tool_id)

    def _require(self, ref: str) -> None:
        entry = self._registry.entry(ref)
        assert entry is not None
        self._required |= frozenset(entry.contract.required_capabilities)

    def changed(self, tool_id: str) -> None:
        """Re-read `tool_id` from the registry into every live view: call it after each
        registry change to the tool — an add, a disable, an enable — as `latest` and `get`
        then answer what it serves."""
        if self._registry.generation != self._generation + 1:
            # More changed than this one tool since the views were last current.
            self._views.clear()
        self._generation = self._registry.generation
        current = self._current(tool_id)
        for view in self._views.values():
            view.put(tool_id, *current)

    def _current(self, tool_id: str) -> tuple[ToolEntry | None, dict[str, ToolEntry]]:
        refs = {}
        for ref in self._refs.get(tool_id, ()):
            entry = self._registry.get(ref)
            if entry is not None:
                refs[ref] = entry
        return self._registry.latest(tool_id), refs


def suggest(name: str, visible: View) -> list[str]:
    """Close names to an unknown `name` among what `visible` shows: the resolve stage's "did
    you mean", bounded per query and blind to every tool outside the view."""
    return list(visible.suggest(name).names)


__all__ = [
    "MAX_COMPARED",
    "SCAN_BUDGET",
    "NameIndex",
    "Suggestions",
    "ToolViews",
    "View",
    "suggest",
]
