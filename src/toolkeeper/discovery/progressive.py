"""Progressive loading: a catalog summary first, then search, then the exact schemas.

The two meta-tools are ordinary governed tools, registered once per harness by `MetaTools`
(read-only, so the shipped policy permits them): every search and every load goes through the
pipeline and the ledger like any other call, and sees only what the caller's principal sees.

- ``search_tools(query, k, effect, tags, upstream)`` answers with the best matching tools
  (name, one-line summary, effect class, score) — `Harness.search_tools` for the caller.
- ``load_tools(names)`` adds the named tools to the caller's session: from the next turn on
  they are in the tools the model is given. A name that is unknown and a name that is hidden
  get the same answer, so loading cannot probe for hidden tools.

`Progressive` is one conversation's view of it, for any vendor: `tools()` renders what the
model is given this turn and `first_context()` the catalog summary for the system prompt.

- OpenAI (Chat, Responses) and Gemini: the always-loaded tools, the loaded ones, and the two
  meta-tools. A deferred tool's schema is not sent at all until it is loaded.
- Anthropic: client-side tool search. Every visible tool is sent with ``defer_loading: true``
  (Anthropic keeps a deferred definition out of the model's context) except the
  always-loaded ones and ``search_tools``, whose result comes back as ``tool_reference``
  blocks (`anthropic.answer`), which is what loads a deferred tool there.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from toolkeeper.contract.model import Idempotency, SideEffect, ToolContract
from toolkeeper.contract.naming import vendor_names
from toolkeeper.discovery.index import MAX_K, summary
from toolkeeper.errors import RegistryError
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.invocation import Principal

if TYPE_CHECKING:
    from toolkeeper.runtime.harness import Harness

SEARCH_TOOLS = "search_tools"
LOAD_TOOLS = "load_tools"
META_TOOLS = frozenset({SEARCH_TOOLS, LOAD_TOOLS})
MAX_LOAD = 20
"""Tools one ``load_tools`` call may add."""
SESSION_LIMIT = 4_096
"""Sessions whose loaded sets are kept (least recently used first out)."""

_SEARCH = ToolContract(
    id=SEARCH_TOOLS,
    version="1.0.0",
    description=(
        "Search the tools you can use by what you want to do. Answers with the best matching "
        "tools: name, one-line summary, effect class (none = read-only, reversible, "
        "committing) and score. Then call load_tools with the names you need."
    ),
    when_to_use="the tool you need is not among the tools you were given",
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What you want to do, in words: the action and the object.",
            },
            "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": 5},
            "effect": {
                "type": "string",
                "enum": ["none", "reversible", "committing"],
                "description": "Only tools of this effect class.",
            },
            "tags": {"type": "array", "items": {"type": "string"}},
            "upstream": {"type": "string", "description": "Only tools of this upstream server."},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    side_effect=SideEffect.NONE,
    idempotency=Idempotency.NATURAL,
)

_LOAD = ToolContract(
    id=LOAD_TOOLS,
    version="1.0.0",
    description=(
        "Load tools by name (from search_tools) so you can call them: their full definitions "
        "are added to your tools from your next turn on."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "names": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "maxItems": MAX_LOAD,
            }
        },
        "required": ["names"],
        "additionalProperties": False,
    },
    side_effect=SideEffect.NONE,
    idempotency=Idempotency.NATURAL,
)

_SessionKey = tuple[str, str, str | None]


def _key(principal: Principal, session: str | None) -> _SessionKey:
    return (principal.tenant, principal.id, session)


class MetaTools:
    """The meta-tools of one harness and the tools each session has loaded."""

    def __init__(self, harness: Harness) -> None:
        """Register ``search_tools`` and ``load_tools`` on `harness`: once per harness (keep
        this object; a second one is refused, as it would split the sessions' state)."""
        if any(harness.registry.find(meta.ref) for meta in (_SEARCH, _LOAD)):
            raise RegistryError(
                f"{SEARCH_TOOLS}/{LOAD_TOOLS} are already registered on this harness; reuse the "
                "MetaTools that registered them"
            )
        self._harness = harness
        self._loaded: OrderedDict[_SessionKey, dict[str, None]] = OrderedDict()
        self._lock = threading.Lock()
        harness.register(_SEARCH, executor=self._search)
        harness.register(_LOAD, executor=self._load)

    def __repr__(self) -> str:
        return f"MetaTools(sessions={len(self._loaded)})"

    @property
    def harness(self) -> Harness:
        return self._harness

    def loaded(self, principal: Principal, session: str | None) -> list[str]:
        """The ids `principal` loaded in `session`, in load order, still visible to it."""
        with self._lock:
            names = list(self._loaded.get(_key(principal, session), ()))
        visible = {c.id for c in self._harness.visible_contracts(principal)}
        return [name for name in names if name in visible]

    def load(
        self, principal: Principal, session: str | None, names: Iterable[str]
    ) -> tuple[list[str], list[str]]:
        """Add what `principal` may see of `names` to the session: (loaded ids, not found)."""
        view = self._harness.views.view(principal)
        found: list[str] = []
        missing: list[str] = []
        for name in list(names)[:MAX_LOAD]:
            entry = view.get(str(name))
            if entry is None or entry.contract.id in META_TOOLS:
                missing.append(str(name))
            else:
                found.append(entry.contract.id)
        with self._lock:
            key = _key(principal, session)
            held = self._loaded.setdefault(key, {})
            held.update(dict.fromkeys(found))
            self._loaded.move_to_end(key)
            while len(self._loaded) > SESSION_LIMIT:
                self._loaded.popitem(last=False)
        return found, missing

    def _search(
        self,
        query: str,
        context: ToolContext,
        k: int = 5,
        effect: str | None = None,
        tags: list[str] | None = None,
        upstream: str | None = None,
    ) -> dict[str, Any]:
        filters = {"effect": effect, "tags": tags, "upstream": upstream}
        hits = self._harness.search_tools(
            query,
            principal=context.principal,
            k=k + len(META_TOOLS),
            filters={key: value for key, value in filters.items() if value is not None},
        )
        hits = [hit for hit in hits if hit.name not in META_TOOLS][:k]
        anthropic = self._harness.views.view(context.principal, "anthropic")
        return {
            "tools": [
                {"name": h.name, "summary": h.summary, "effect": h.effect, "score": h.score}
                for h in hits
            ],
            # What the Anthropic adapter answers with as tool_reference blocks: the names
            # that family was given for these tools.
            "tool_references": [anthropic.vendor_name(h.ref) or h.name for h in hits],
        }

    def _load(self, names: list[str], context: ToolContext) -> dict[str, Any]:
        found, missing = self.load(context.principal, context.session, names)
        answer: dict[str, Any] = {"loaded": found}
        if missing:
            answer["not_found"] = missing
            answer["hint"] = "call search_tools to find the names of the tools you can use"
        return answer


def catalog_summary(contracts: Sequence[ToolContract], *, max_groups: int = 30) -> str:
    """The first-context overview of a catalog: one line per group (upstream server, id
    namespace, or first tag) with its tool count, effect classes and a few names."""
    groups: dict[str, list[ToolContract]] = defaultdict(list)
    for contract in contracts:
        if contract.id not in META_TOOLS:
            groups[_group(contract)].append(contract)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    lines = [
        f"{sum(len(g) for g in groups.values())} tools in {len(groups)} groups; "
        "call search_tools to find one, load_tools to use it."
    ]
    for name, members in ordered[:max_groups]:
        reads = sum(c.effective_side_effect.value == "none" for c in members)
        sample = ", ".join(c.id for c in members[:3])
        more = ", …" if len(members) > 3 else ""
        lines.append(
            f"- {name} ({len(members)}; {reads} read-only): {sample}{more} — "
            f"{summary(members[0].description)[:80]}"
        )
    if len(ordered) > max_groups:
        rest = sum(len(members) for _, members in ordered[max_groups:])
        lines.append(f"- {len(ordered) - max_groups} more groups ({rest} tools)")
    return "\n".join(lines)


def _group(contract: ToolContract) -> str:
    tags = (contract.annotations or {}).get("tags")
    for separator in (".", "/", ":", "__"):
        if separator in contract.id:
            return contract.id.split(separator, 1)[0]
    if isinstance(tags, list) and tags:
        return str(tags[0])
    return "general"


class Progressive:
    """One conversation's progressive catalog for one vendor: what the model is given each
    turn (`tools`) and the summary for its first context (`first_context`)."""

    def __init__(
        self,
        meta: MetaTools,
        *,
        principal: Principal,
        vendor: str,
        session: str | None = None,
        always: Sequence[str] = (),
    ) -> None:
        from toolkeeper.adapters import adapter

        adapter(vendor)  # refuses an unknown vendor now, naming the choices
        self.meta = meta
        self.harness = meta.harness
        self.principal = principal
        self.vendor = vendor
        self.session = session
        self.always = tuple(always)

    def __repr__(self) -> str:
        return f"Progressive(vendor={self.vendor!r}, session={self.session!r})"

    def loaded(self) -> list[str]:
        """The tools this conversation's model has loaded, still visible to it."""
        return self.meta.loaded(self.principal, self.session)

    def contracts(self) -> list[ToolContract]:
        """The contracts whose schemas the model is given this turn: always-loaded, loaded,
        and the meta-tools (Anthropic's deferred tools are not among them)."""
        wanted = {*self.always, *self.loaded(), *META_TOOLS}
        if self.vendor == "anthropic":
            wanted.discard(LOAD_TOOLS)  # tool_reference blocks load there
        return [c for c in self.harness.visible_contracts(self.principal) if c.id in wanted]

    def tools(self) -> list[dict[str, Any]]:
        """The ``tools`` parameter for this turn, in the vendor's format."""
        from toolkeeper.adapters import render

        if self.vendor != "anthropic":
            return render(self.contracts(), vendor=self.vendor)
        visible = [c for c in self.harness.visible_contracts(self.principal) if c.id != LOAD_TOOLS]
        names = vendor_names(visible, "anthropic")
        given = {names[c.ref] for c in self.contracts()}
        rendered = render(visible, vendor="anthropic")
        for tool in rendered:
            if tool["name"] not in given:
                tool["defer_loading"] = True
        return rendered

    def first_context(self) -> str:
        """The catalog summary to put in the first context (system prompt)."""
        return catalog_summary(self.harness.visible_contracts(self.principal))


__all__ = [
    "LOAD_TOOLS",
    "META_TOOLS",
    "SEARCH_TOOLS",
    "MetaTools",
    "Progressive",
    "catalog_summary",
]
