"""`UpstreamReads`: the prompts and resources of upstreams, as the gateway serves them —
read-only, approved, and only to principals policy lets read them.

What is served is the federation's `Routes` (approved, pinned, scanned definitions;
`upstreams/offerings.py`). Each principal sees in ``prompts/list``, ``resources/list`` and
``resources/templates/list`` only what Cedar lets it read (``Action::"get_prompt"`` on a
``Toolkeeper::Prompt``, ``Action::"read_resource"`` on a ``Toolkeeper::Resource``), and
a read, a ``prompts/get``, a completion or a subscription of anything else is answered as
for something that does not exist, so the answer never says what is hidden. Each request
that passes goes to the upstream that offers it, under the name that upstream knows; its
answer (untrusted, like a tool's) comes back scrubbed of the credentials the upstream was
given. Every read is logged with its principal and decision.

Resource subscriptions pass through: a 2025 session's ``resources/subscribe`` subscribes
the owning upstream (once for all sessions), and the upstream's
``notifications/resources/updated`` reaches the sessions that subscribed, while policy still
lets their principals read the resource; a 2026-07-28 ``subscriptions/listen`` stream naming
resources has the upstream's events routed to it the same way.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CompleteRequestParams,
    CompleteResult,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    PromptReference,
    ReadResourceResult,
    ResourceTemplateReference,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)

from toolkeeper.gateway.resources import RESOURCE_NOT_FOUND
from toolkeeper.gateway.upstreams.offerings import Offering, Routes
from toolkeeper.policy.decision import (
    Decision,
    PolicyEngine,
    ReadRequest,
    decide_read_safely,
)
from toolkeeper.runtime.invocation import Principal

if TYPE_CHECKING:
    from toolkeeper.gateway.upstreams.federation import Federation

logger = logging.getLogger(__name__)

Publish = Callable[[str, Callable[[Principal], bool]], Awaitable[None]]

MAX_SUBSCRIBED = 10_000
"""Resources subscribed at once, over every session and stream: a template matches endless
URIs, and each subscribed one is held here and at its upstream."""

_ACTION = {"prompt": "get_prompt", "resource": "read_resource", "template": "read_resource"}


class UpstreamReads:
    """Serves the federation's approved prompts and resources; `policy` is asked anew on each
    request (an operator's policy reload applies at once)."""

    def __init__(
        self,
        federation: Federation,
        *,
        policy: Callable[[], PolicyEngine],
        publish: Publish | None = None,
    ) -> None:
        """`publish(uri, allowed)` tells the 2026 listen streams of every principal
        `allowed` admits that `uri` changed."""
        self._federation = federation
        self._policy = policy
        self._subscribers: dict[str, dict[str, tuple[Principal, ServerSession]]] = defaultdict(dict)
        """URI → 2025 session key → (principal, session) that subscribed to it."""
        self._listening: dict[str, int] = defaultdict(int)
        """URI → open 2026 listen streams naming it."""
        self._publish = publish

    def __repr__(self) -> str:
        return f"UpstreamReads({self._federation!r}, subscribed={len(self._subscribers)})"

    # -- listings --------------------------------------------------------------------------

    def prompts(self, principal: Principal) -> list[dict[str, Any]]:
        """The prompts `principal` may get, as listed, under the names it calls them by."""
        return [
            {**o.listed, "name": o.served_as}
            for o in self._visible(principal, self._routes.prompts.values())
        ]

    def resources(self, principal: Principal) -> list[dict[str, Any]]:
        return [dict(o.listed) for o in self._visible(principal, self._routes.resources.values())]

    def templates(self, principal: Principal) -> list[dict[str, Any]]:
        offered = (offering for offering, _ in self._routes.templates)
        return [dict(o.listed) for o in self._visible(principal, offered)]

    def stamp(self, principal: Principal) -> tuple[str, ...]:
        """Changes when what `principal` may list of prompts and resources changes."""
        return tuple(
            f"{o.kind} {o.served_as} {o.server}"
            for o in self._visible(principal, list(self._routes))
        )

    # -- requests ------------------------------------------------------------------------

    async def read(self, principal: Principal, uri: str) -> ReadResourceResult:
        """Read `uri` from the upstream that offers it, if `principal` may."""
        offering = self._readable(principal, uri)
        link = self._federation.link(offering.server)
        result = await link.forward("resources/read", lambda client: client.read_resource(uri))
        return ReadResourceResult.model_validate(self._scrubbed(result))

    async def get_prompt(
        self, principal: Principal, params: GetPromptRequestParams
    ) -> GetPromptResult:
        offering = self._routes.prompts.get(params.name)
        if offering is None or not self._allows(principal, offering, params.name):
            raise MCPError(code=INVALID_PARAMS, message=f"unknown prompt: {params.name}")
        link = self._federation.link(offering.server)
        arguments = params.arguments

        async def get(client: Any) -> Any:
            return await client.get_prompt(offering.upstream_id, arguments)

        result = await link.forward("prompts/get", get)
        return GetPromptResult.model_validate(self._scrubbed(result))

    async def complete(self, principal: Principal, params: CompleteRequestParams) -> CompleteResult:
        """Completions for an argument of a prompt or resource template `principal` may
        use, from the upstream that offers it; none for anything else."""
        ref = params.ref
        if isinstance(ref, PromptReference):
            offering = self._routes.prompts.get(ref.name)
            upstream_ref: PromptReference | ResourceTemplateReference = PromptReference(
                type="ref/prompt", name=offering.upstream_id if offering else ref.name
            )
            ident = ref.name
        else:
            offering = self._routes.template(ref.uri)
            upstream_ref, ident = ref, ref.uri
        if offering is None or not self._allows(principal, offering, ident):
            raise MCPError(code=INVALID_PARAMS, message=f"unknown reference: {ident}")
        link = self._federation.link(offering.server)
        if link.client is not None and link.client.server_capabilities.completions is None:
            return CompleteResult.model_validate({"completion": {"values": []}})
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = dict(params.context.arguments or {}) if params.context else None

        async def complete(client: Any) -> Any:
            return await client.complete(upstream_ref, argument, context)

        result = await link.forward("completion/complete", complete)
        return CompleteResult.model_validate(self._scrubbed(result))

    # -- subscriptions ---------------------------------------------------------------------

    async def subscribe(
        self, principal: Principal, uri: str, *, key: str, session: ServerSession
    ) -> None:
        """A 2025 session's ``resources/subscribe``: refused as not found for a resource it
        may not read; the upstream is subscribed when the first session asks."""
        offering = self._readable(principal, uri)
        if uri not in self._subscribers and self._subscribed() >= MAX_SUBSCRIBED:
            raise MCPError(
                code=INTERNAL_ERROR,
                message=f"the gateway holds {MAX_SUBSCRIBED} resource subscriptions already; "
                "unsubscribe from some first",
            )
        fresh = key not in self._subscribers.get(uri, {})
        self._subscribers[uri][key] = (principal, session)
        try:
            await self._resubscribe(offering.server)
        except MCPError:  # the upstream refused it: this session is not subscribed
            if fresh:
                self._subscribers[uri].pop(key, None)
                if not self._subscribers[uri]:
                    del self._subscribers[uri]
                if uri not in self._subscribers and uri not in self._listening:
                    self._federation.link(offering.server).subscriptions -= {uri}
            raise

    async def unsubscribe(self, uri: str, *, key: str) -> None:
        sessions = self._subscribers.get(uri)
        if sessions is None or sessions.pop(key, None) is None:
            return
        if not sessions:
            del self._subscribers[uri]
        await self._resubscribe_holding([uri])

    async def listen(self, principal: Principal, uris: Iterable[str]) -> tuple[str, ...]:
        """A 2026 listen stream naming `uris` opened: the upstreams hear of those `principal`
        may read while some stream wants them. Returns the URIs counted, for `unlisten`."""
        counted = []
        for uri in dict.fromkeys(uris):
            offering = self._routes.owner(uri)
            if offering is None or not self._allows(principal, offering, uri):
                continue
            if uri not in self._listening and self._subscribed() >= MAX_SUBSCRIBED:
                continue  # over the cap: the stream hears nothing of it
            self._listening[uri] += 1
            counted.append(uri)
        await self._resubscribe_holding(counted)
        return tuple(counted)

    async def unlisten(self, counted: Iterable[str]) -> None:
        """The stream that `listen` counted `counted` for closed."""
        uris = list(counted)
        for uri in uris:
            self._listening[uri] -= 1
            if self._listening[uri] <= 0:
                del self._listening[uri]
        await self._resubscribe_holding(uris)

    async def updated(self, server: str, uri: str) -> None:
        """`server` says `uri` changed: tell each subscriber that may still read it there."""
        offering = self._routes.owner(uri)
        if offering is None or offering.server != server:
            return  # no longer approved, or another upstream's now: its word is not ours
        for key, (principal, session) in list(self._subscribers.get(uri, {}).items()):
            if not self._allows(principal, offering, uri, log=False):
                continue
            try:
                with anyio.fail_after(1):
                    await session.send_resource_updated(uri)
            except Exception:  # the connection is gone: forget it
                self._subscribers[uri].pop(key, None)
        if self._publish is not None and self._listening.get(uri):
            await self._publish(
                uri, lambda principal: self._allows(principal, offering, uri, log=False)
            )

    def _subscribed(self) -> int:
        return len(self._subscribers.keys() | self._listening.keys())

    async def _resubscribe_holding(self, uris: Iterable[str]) -> None:
        """Subscribe anew each upstream that owns, or is subscribed to, one of `uris` (the
        owner may have changed since it was subscribed)."""
        wanted = set(uris)
        for server in self._federation.servers:
            owns = any(
                (o := self._routes.owner(uri)) is not None and o.server == server for uri in wanted
            )
            if owns or wanted & self._federation.link(server).subscriptions:
                await self._resubscribe(server)

    async def _resubscribe(self, server: str) -> None:
        uris = frozenset(
            uri
            for uri in {*self._subscribers, *self._listening}
            if (owner := self._routes.owner(uri)) is not None and owner.server == server
        )
        await self._federation.link(server).subscribe(uris)

    # -- policy ----------------------------------------------------------------------------

    @property
    def _routes(self) -> Routes:
        return self._federation.routes

    def _readable(self, principal: Principal, uri: str) -> Offering:
        offering = self._routes.owner(uri)
        if offering is None or not self._allows(principal, offering, uri):
            raise MCPError(code=RESOURCE_NOT_FOUND, message=f"resource not found: {uri}")
        return offering

    def _visible(self, principal: Principal, offered: Iterable[Offering]) -> list[Offering]:
        return [o for o in offered if self._allows(principal, o, o.served_as, log=False)]

    def _allows(
        self, principal: Principal, offering: Offering, ident: str, *, log: bool = True
    ) -> bool:
        request = ReadRequest(
            principal=principal,
            action=_ACTION[offering.kind],
            kind=offering.kind,
            id=ident,
            server=offering.server,
        )
        decision = decide_read_safely(self._policy(), request)
        allowed = decision.decision is Decision.ALLOW
        if log:
            logger.info(
                "%s %s %r of upstream %s by %s: %s (%s)",
                request.action,
                offering.kind,
                ident,
                offering.server,
                principal.id,
                decision.decision.value,
                ", ".join(decision.policy_ids),
            )
        return allowed

    def _scrubbed(self, result: Any) -> dict[str, Any]:
        wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        scrubbed: dict[str, Any] = self._federation.redactor.redact(wire)
        return scrubbed


Context = ServerRequestContext[Any, Any]


def install_handlers(
    server: Server[Any],
    reads: UpstreamReads,
    *,
    principal: Callable[[Context], Principal],
    session: Callable[[Context], str],
) -> None:
    """Register on `server` the methods only upstreams' prompts and resources answer:
    ``prompts/list``, ``prompts/get``, ``resources/templates/list``, ``completion/complete``
    and ``resources/subscribe``/``unsubscribe`` (whose registration declares the prompts,
    completions and subscribe capabilities). `principal` names the caller of a request and
    `session` its session (raising when it has none); ``resources/list`` and
    ``resources/read``, which the gateway's own stored results share, stay with the server."""

    async def list_prompts(ctx: Context, params: PaginatedRequestParams) -> ListPromptsResult:
        return ListPromptsResult.model_validate({"prompts": reads.prompts(principal(ctx))})

    async def get_prompt(ctx: Context, params: GetPromptRequestParams) -> GetPromptResult:
        return await reads.get_prompt(principal(ctx), params)

    async def list_templates(
        ctx: Context, params: PaginatedRequestParams
    ) -> ListResourceTemplatesResult:
        templates = reads.templates(principal(ctx))
        return ListResourceTemplatesResult.model_validate({"resourceTemplates": templates})

    async def complete(ctx: Context, params: CompleteRequestParams) -> CompleteResult:
        return await reads.complete(principal(ctx), params)

    async def subscribe(ctx: Context, params: SubscribeRequestParams) -> EmptyResult:
        caller = principal(ctx)
        await reads.subscribe(caller, str(params.uri), key=session(ctx), session=ctx.session)
        return EmptyResult()

    async def unsubscribe(ctx: Context, params: UnsubscribeRequestParams) -> EmptyResult:
        principal(ctx)
        await reads.unsubscribe(str(params.uri), key=session(ctx))
        return EmptyResult()

    handlers: list[tuple[str, Any, Any]] = [
        ("prompts/list", PaginatedRequestParams, list_prompts),
        ("prompts/get", GetPromptRequestParams, get_prompt),
        ("resources/templates/list", PaginatedRequestParams, list_templates),
        ("completion/complete", CompleteRequestParams, complete),
        ("resources/subscribe", SubscribeRequestParams, subscribe),
        ("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe),
    ]
    for method, params_type, handler in handlers:
        server.add_request_handler(method, params_type, handler)
