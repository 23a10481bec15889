"""Upstream federation: the tools of other MCP servers, served through the harness only after
an operator approved exactly their definitions.

`connect_upstreams` opens an `UpstreamLink` (`link.py`) to every configured upstream and
assesses every listing against the pin store (`assessment.py`) as it arrives: the gateway
does not wait for a slow upstream, whose tools join (and clients hear ``list_changed``) when
it connects. Only approved tools are
registered, each with an `McpExecutor`. Each re-listing (and each `reassess` after an
operator's decision) is judged again: a tool that is withheld, unapproved, changed (a rug
pull) or no longer listed is disabled in the harness registry, so it does not resolve, list
or wait for an approval; its executor refuses it too (``stale``). A re-approved tool is
enabled again, its new definition replacing the old one, without a restart.

Prompts, resources and resource templates are judged the same way at the same moments
(`offerings.py`): `routes` holds the approved ones, which the gateway lists and forwards
read-only; every other one is withheld with its reason.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from toolkeeper.errors import RegistryError
from toolkeeper.executors.mcp import McpExecutor
from toolkeeper.gateway.scanning.findings import Finding
from toolkeeper.gateway.upstreams.assessment import ToolStatus, UpstreamTool, assess
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.gateway.upstreams.link import UpstreamLink
from toolkeeper.gateway.upstreams.offerings import Routes, assess_offerings
from toolkeeper.gateway.upstreams.pins import PinStore
from toolkeeper.secrets.redaction import Redactor, redacting_log_records

if TYPE_CHECKING:
    from toolkeeper.runtime.harness import Harness

logger = logging.getLogger(__name__)


class Federation:
    """Connected upstreams and what each offers; close it from the task that opened it."""

    def __init__(
        self,
        configs: Mapping[str, UpstreamConfig],
        harness: Harness | None,
        *,
        home: Path,
    ) -> None:
        self.pins = PinStore.in_home(home)
        self.tools: dict[tuple[str, str], UpstreamTool] = {}
        """Every listed tool by (server, name), as last assessed."""
        self.withheld: dict[tuple[str, str], str] = {}
        """Tools not served, with the reason."""
        self.errors: dict[str, str] = {}
        """Upstreams that could not be reached, with the error."""
        self.offerings: dict[tuple[str, str], UpstreamTool] = {}
        """Every listed prompt, resource and template by (server, `pins.offering_key`)."""
        self.routes = Routes()
        """The approved ones, as the gateway lists and forwards them."""
        self.on_resource_updated: Callable[[str, str], Awaitable[None]] | None = None
        """Told (server, URI) when an upstream says a subscribed resource changed."""
        self._configs = dict(configs)
        self._harness = harness
        self.redactor = harness.redactor if harness is not None else Redactor()
        """Holds the credentials handed to upstreams (``${NAME}`` in `env` and `headers`):
        the harness's, so results, errors, ledger rows and logs are scrubbed of them."""
        self._local_ids = {c.id for c in harness.registry.latest_contracts()} if harness else set()
        self._links = {
            name: UpstreamLink(
                name,
                config,
                home=home,
                redactor=self.redactor,
                on_listing=self._relisted,
                on_updated=self._updated,
            )
            for name, config in configs.items()
        }
        self._registered: dict[str, tuple[str, str]] = {}  # contract id → (ref, pin hash)
        self._presentations: dict[str, Mapping[str, Any]] = {}
        self._stack = AsyncExitStack()
        self._group: TaskGroup | None = None
        self._reported: dict[tuple[str, str], str] = {}  # withheld, as last logged

    def __repr__(self) -> str:
        served = sum(tool.status is ToolStatus.APPROVED for tool in self.tools.values())
        withheld = len(self.withheld)
        return f"Federation(upstreams={len(self._links)}, served={served}, withheld={withheld})"

    @property
    def findings(self) -> list[Finding]:
        """Every finding of every listed tool, collisions included."""
        return [finding for tool in self.tools.values() for finding in tool.findings]

    def is_served(self, contract_id: str) -> bool:
        """Whether the tool with this id is approved as currently listed (the registry says
        the same: every other federated tool is disabled there)."""
        return any(
            tool.contract_id == contract_id and key not in self.withheld
            for key, tool in self.tools.items()
        )

    @property
    def servers(self) -> tuple[str, ...]:
        """The configured upstreams' names."""
        return tuple(self._links)

    def link(self, server: str) -> UpstreamLink:
        """The link to `server`, to forward a read-only request over."""
        return self._links[server]

    def presentation(self, contract_id: str) -> dict[str, Any]:
        """The icons and task support the upstream lists for the tool served as
        `contract_id` (nothing for a tool the federation does not hold)."""
        return dict(self._presentations.get(contract_id, {}))

    async def start(self, *, wait: bool = True) -> None:
        """Start every link; with `wait`, return once each has connected or failed once (else
        at once: each upstream's tools join as it lists them)."""
        group = await self._stack.enter_async_context(anyio.create_task_group())
        self._group = group
        for link in self._links.values():
            group.start_soon(link.supervise)
        if wait:
            for link in self._links.values():
                await link.attempted()

    async def refresh(self) -> None:
        """List every connected upstream again and re-pin (also done on list_changed)."""
        for link in self._links.values():
            await link.refresh()

    def reassess(self) -> None:
        """Judge the last listings against the pin store as it is now: call it after an
        operator approved (a signal handler, a timer); `refresh` also lists again."""
        listings = {
            name: link.listing for name, link in self._links.items() if link.listing is not None
        }
        for name, link in self._links.items():
            if link.error and not link.listing:
                self.errors[name] = link.error
            else:
                self.errors.pop(name, None)
        reports = assess(listings, self._configs, self.pins, local_ids=self._local_ids)
        self.tools = {(r.server, r.name): r for r in reports}
        self._presentations = {r.contract_id: r.presentation for r in reports}
        self.withheld = {}
        served: set[str] = set()
        for report in reports:
            link = self._links[report.server]
            refused = self._register(report, link) if report.status is ToolStatus.APPROVED else None
            if report.status is ToolStatus.APPROVED and refused is None:
                link.serve(report.name, report.hash)
                served.add(report.contract_id)
            else:
                link.withhold(report.name)
                self.withheld[(report.server, report.name)] = report.reason or refused or ""
        self._disable_unserved(served)
        known = {server: set(tools) for server, tools in listings.items()}
        offered = {name: self._links[name].offered for name in listings}
        judged = assess_offerings(offered, self._configs, self.pins, known_tools=known)
        self.offerings = {(r.server, r.name): r for r in judged}
        self.routes = Routes.of(judged)
        if self._harness is not None:  # a survey's caller shows what it found itself
            self._report()

    def _report(self) -> None:
        """Tell the operator (the log) which upstreams failed and which tools are held back,
        each once per change."""
        for server, error in self.errors.items():
            if self._reported.get((server, "")) != error:
                logger.warning("upstream %s is unreachable: %s", server, error)
        withheld = dict(self.withheld)
        unapproved: dict[str, int] = {}
        for (server, key), report in self.offerings.items():
            if report.status is ToolStatus.NEW:
                # One line per upstream: a resource list may hold thousands of entries.
                unapproved[server] = unapproved.get(server, 0) + 1
            elif report.status is not ToolStatus.APPROVED:
                withheld[(server, key)] = report.reason
        for server, count in unapproved.items():
            withheld[(server, ":new")] = (
                f"{count} prompt(s) and resource(s) are new, not approved yet; review them "
                f"with `toolkeeper upstreams list CONFIG {server}`"
            )
        for (server, tool), reason in withheld.items():
            if self._reported.get((server, tool)) != reason:
                if tool == ":new":
                    logger.warning("upstream %s: %s", server, reason)
                else:
                    logger.warning("upstream %s: %s is not served: %s", server, tool, reason)
        self._reported = {**{(s, ""): e for s, e in self.errors.items()}, **withheld}

    async def aclose(self) -> None:
        for link in self._links.values():
            link.close()
        if self._group is not None:
            self._group.cancel_scope.cancel()  # a connect in progress need not finish first
        await self._stack.aclose()

    async def __aenter__(self) -> Federation:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _relisted(self, link: UpstreamLink) -> None:
        self._record(link)
        self.reassess()

    def _record(self, link: UpstreamLink) -> None:
        if link.listing is not None:
            # A tool name cannot hold a colon (an illegal tool is never served): such a name
            # must not overwrite what was seen of a prompt or resource (`offering_key`).
            tools = {name: tool for name, tool in link.listing.items() if ":" not in name}
            self.pins.record_seen(link.name, tools | link.offered)

    async def _updated(self, link: UpstreamLink, uri: str) -> None:
        if self.on_resource_updated is not None:
            await self.on_resource_updated(link.name, uri)

    def _register(self, report: UpstreamTool, link: UpstreamLink) -> str | None:
        """Serve an approved tool: register its definition (replacing an earlier one) and
        enable it. Returns why it cannot be served, or None."""
        if self._harness is None or report.contract is None:
            return None  # a survey serves nothing
        registry = self._harness.registry
        ref = report.contract.ref
        registered = self._registered.get(report.contract_id)
        if registered != (ref, report.hash):
            if registered is not None:
                # The approved definition moved on: the old one must not run in between.
                registry.disable(registered[0], "replaced by a newly approved definition")
            try:
                executor = McpExecutor(
                    link,
                    report.name,
                    grants=self._harness.grants,
                    repeatable=report.contract.is_read_only or report.contract.is_idempotent,
                )
                self._harness.register(report.contract, executor=executor)
            except RegistryError as exc:
                return f"approved, but it cannot be registered: {exc}"
            self._registered[report.contract_id] = (ref, report.hash)
        registry.enable(ref)
        return None

    def _disable_unserved(self, served: set[str]) -> None:
        """Disable every registered upstream tool not served now, with the reason."""
        if self._harness is None:
            return
        reasons = {self.tools[key].contract_id: reason for key, reason in self.withheld.items()}
        for contract_id, (ref, _) in self._registered.items():
            if contract_id not in served:
                reason = reasons.get(contract_id) or "no longer listed by its upstream"
                self._harness.registry.disable(ref, reason)


async def connect_upstreams(
    configs: Mapping[str, UpstreamConfig], harness: Harness, *, home: Path, wait: bool = True
) -> Federation:
    """Connect to `configs`, register their approved tools with `harness`, and return the
    `Federation` (an async context manager that disconnects; close it in this task).

    With `wait` (the library's default) it returns once every upstream connected or failed
    once; the gateway passes ``wait=False`` and serves at once. An upstream that cannot be
    reached is named in `Federation.errors` and tried again with backoff; the others are
    served.
    """
    federation = Federation(configs, harness, home=Path(home))
    await federation.start(wait=wait)
    return federation


async def survey_upstreams(
    configs: Mapping[str, UpstreamConfig], *, home: Path
) -> tuple[list[UpstreamTool], dict[str, str]]:
    """What every upstream offers and its status, without serving anything (the CLI's view):
    the tools, then the prompts, resources and templates (`UpstreamTool.kind`), and the
    upstreams that could not be reached."""
    federation = Federation(configs, None, home=Path(home))
    with redacting_log_records(federation.redactor):
        async with federation:
            await federation.start()
            offered = list(federation.tools.values()) + list(federation.offerings.values())
            return offered, dict(federation.errors)
