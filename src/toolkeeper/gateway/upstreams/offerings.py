"""What upstreams offer besides tools — prompts, resources and resource templates — listed,
pinned, scanned and routed like tools, and served read-only.

Each item is judged as a tool is (`assessment.pin_verdict`): disabled by the config, a
collision, blocked by a scan finding, new, changed since approval (a rug pull), or
approved; only approved items are listed and routed. Its pin key (`pins.offering_key`) is
``prompt:<name>``, ``resource:<uri>`` or ``template:<uriTemplate>`` — what the operator
names to `toolkeeper upstreams approve` — and its pin covers what a model or user reads and
what routes a read (`pins.OFFERING_PIN_FIELDS`).

Names never collide across upstreams: a prompt is served as the upstream's namespace plus
its name (like a tool); a resource keeps its URI and a template its URI template, since a
URI is what a client reads back and what the upstream's own content links to. Two upstreams
offering one prompt id, URI or template both lose it, as tools do; a URI that more than one
upstream's approved templates match is read from neither (`Routes.owner`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND

from toolkeeper.artifacts.store import URI_PREFIX
from toolkeeper.gateway.scanning.findings import Finding, Severity, scan_tool
from toolkeeper.gateway.upstreams.assessment import ToolStatus, UpstreamTool, pin_verdict
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.gateway.upstreams.pins import PinStore, offering_key, pin_fields, pin_hash

KINDS = ("prompt", "resource", "template")
MAX_PAGES = 100
"""Pages of one listing read at most: a server that keeps answering ``nextCursor`` is cut
off rather than followed forever."""
_IDENT = {"prompt": "name", "resource": "uri", "template": "uriTemplate"}


async def list_offerings(client: Client) -> dict[str, dict[str, Any]]:
    """`pins.offering_key` → definition (JSON, by alias) of every prompt, resource and
    template the server lists, for the kinds its capabilities declare. A kind whose listing
    the server does not implement (``method not found``) is offered empty."""
    capabilities = client.server_capabilities
    found: dict[str, dict[str, Any]] = {}
    if capabilities.prompts is not None:
        found |= await _pages("prompt", client.list_prompts, "prompts")
    if capabilities.resources is not None:
        found |= await _pages("resource", client.list_resources, "resources")
        found |= await _pages("template", client.list_resource_templates, "resource_templates")
    return found


async def _pages(kind: str, fetch: Any, items: str) -> dict[str, dict[str, Any]]:
    offered: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        try:
            page = await fetch(cursor=cursor)
        except MCPError as exc:
            if exc.error.code == METHOD_NOT_FOUND:
                return offered
            raise
        for item in getattr(page, items):
            definition = item.model_dump(mode="json", by_alias=True, exclude_none=True)
            offered[offering_key(kind, str(definition[_IDENT[kind]]))] = definition
        cursor = page.next_cursor
        if cursor is None:
            break
    return offered


def kind_of(key: str) -> str:
    """The kind of a pin key: ``prompt``, ``resource``, ``template`` (or ``tool``)."""
    kind, colon, _ = key.partition(":")
    return kind if colon and kind in KINDS else "tool"


def assess_offerings(
    listings: Mapping[str, Mapping[str, Mapping[str, Any]]],
    configs: Mapping[str, UpstreamConfig],
    pins: PinStore,
    *,
    known_tools: Mapping[str, Collection[str]],
) -> list[UpstreamTool]:
    """Every listed prompt, resource and template with its status; `listings` maps server →
    `pins.offering_key` → definition. `known_tools` (server → tool names) finds a
    description that reaches for another server's tools, as for tools."""
    offered: dict[tuple[str, str], list[str]] = {}
    for server, items in listings.items():
        for key, item in items.items():
            offered.setdefault(_served_as(key, item, configs[server]), []).append(server)
    return [
        _assess(server, key, item, configs[server], pins, known_tools, offered)
        for server, items in listings.items()
        for key, item in items.items()
    ]


def _served_as(key: str, item: Mapping[str, Any], config: UpstreamConfig) -> tuple[str, str]:
    """(kind, the id a client names it by): a prompt's namespaced name, a URI, a template."""
    kind = kind_of(key)
    ident = str(item.get(_IDENT[kind], ""))
    return kind, config.namespace + ident if kind == "prompt" else ident


def _assess(
    server: str,
    key: str,
    item: Mapping[str, Any],
    config: UpstreamConfig,
    pins: PinStore,
    known_tools: Mapping[str, Collection[str]],
    offered: Mapping[tuple[str, str], list[str]],
) -> UpstreamTool:
    kind, served_as = _served_as(key, item, config)
    digest = pin_hash(item, pin_fields(key))
    findings = tuple(
        scan_tool(
            server,
            scanned_view(item),
            known_tools=known_tools,
            classifier=config.scan_classifier,
        )
    )

    def report(status: ToolStatus, reason: str = "") -> UpstreamTool:
        return UpstreamTool(
            server, key, served_as, digest, status, findings, reason, kind=kind, listed=item
        )

    if not config.override(key).enabled:
        return report(ToolStatus.DISABLED, f"disabled in the config (tools.{key!r}.enabled)")
    rivals = [s for s in offered[(kind, served_as)] if s != server]
    reserved = kind != "prompt" and served_as.startswith(URI_PREFIX.split(":", 1)[0] + ":")
    if rivals or reserved:
        holders = ", ".join(repr(s) for s in rivals) or "the gateway (its stored results)"
        fix = (
            f"give each upstream its own namespace, e.g. mcpServers.{server}.namespace = "
            f"{server + '.'!r}"
            if kind == "prompt"
            else f"disable it on all but one (mcpServers.{server}.tools.{key!r}.enabled = false)"
        )
        reason = f"{kind} {served_as!r} is also offered by {holders}; {fix}"
        findings += (Finding("name_collision", Severity.HIGH, "/name", reason, server, key),)
        return report(ToolStatus.COLLISION, reason)
    status, reason = pin_verdict(server, key, digest, findings, config, pins)
    return report(status, reason)


def scanned_view(item: Mapping[str, Any]) -> dict[str, Any]:
    """A prompt or resource as the injection scanner reads a tool: its name, title and
    description, and a prompt's arguments as the parameters of an input schema (their
    names and descriptions are read by the model that fills them in)."""
    view: dict[str, Any] = {
        key: item[key] for key in ("name", "title", "description") if key in item
    }
    arguments = item.get("arguments")
    if isinstance(arguments, list):
        properties: dict[str, Any] = {}
        for argument in arguments:
            if isinstance(argument, Mapping) and isinstance(argument.get("name"), str):
                properties[argument["name"]] = {
                    key: argument[key]
                    for key in ("title", "description")
                    if isinstance(argument.get(key), str)
                }
        view["inputSchema"] = {"type": "object", "properties": properties}
    return view


# -- routing ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Offering:
    """One approved prompt, resource or template: who offers it and how a client names it."""

    server: str
    kind: str
    served_as: str
    """The prompt name, URI or URI template a client uses."""
    upstream_id: str
    """The same as the upstream knows it (a prompt's name without the namespace)."""
    listed: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class Routes:
    """The approved offerings of every upstream, as the gateway lists and routes them."""

    prompts: Mapping[str, Offering] = field(default_factory=dict)
    resources: Mapping[str, Offering] = field(default_factory=dict)
    templates: tuple[tuple[Offering, re.Pattern[str]], ...] = ()

    @classmethod
    def of(cls, reports: Collection[UpstreamTool]) -> Routes:
        prompts: dict[str, Offering] = {}
        resources: dict[str, Offering] = {}
        templates: list[tuple[Offering, re.Pattern[str]]] = []
        for report in reports:
            if report.status is not ToolStatus.APPROVED or report.kind == "tool":
                continue
            upstream_id = str(report.listed.get(_IDENT[report.kind], ""))
            offering = Offering(
                report.server, report.kind, report.contract_id, upstream_id, report.listed
            )
            if report.kind == "prompt":
                prompts[offering.served_as] = offering
            elif report.kind == "resource":
                resources[offering.served_as] = offering
            else:
                templates.append((offering, template_pattern(offering.served_as)))
        return cls(prompts, resources, tuple(templates))

    def __iter__(self) -> Iterator[Offering]:
        yield from self.prompts.values()
        yield from self.resources.values()
        yield from (offering for offering, _ in self.templates)

    def owner(self, uri: str) -> Offering | None:
        """The approved resource listed as `uri`, else the one approved template that
        matches it; None when none does, or templates of several upstreams do (a read must
        never reach a server that did not offer it)."""
        listed = self.resources.get(uri)
        if listed is not None:
            return listed
        matches = [offering for offering, pattern in self.templates if pattern.fullmatch(uri)]
        if len({offering.server for offering in matches}) != 1:
            return None
        return matches[0]

    def template(self, uri_template: str) -> Offering | None:
        return next((o for o, _ in self.templates if o.served_as == uri_template), None)


_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]*)\}")
_EXPANSIONS = {
    "": r"[^/?#&,]*",
    "+": r".*",
    "#": r"(?:#.*)?",
    ".": r"(?:\.[^/?#]*)?",
    "/": r"(?:/[^?#]*)?",
    ";": r"(?:;[^/?#]*)?",
    "?": r"(?:\?[^#]*)?",
    "&": r"(?:&[^#]*)?",
}


def template_pattern(uri_template: str) -> re.Pattern[str]:
    """A regular expression that matches the URIs an RFC 6570 `uri_template` expands to:
    a simple expression takes one path segment, ``{+var}`` anything, the operators their
    prefixed part. Literal text must match exactly."""
    parts: list[str] = []
    at = 0
    for match in _EXPRESSION.finditer(uri_template):
        parts.append(re.escape(uri_template[at : match.start()]))
        parts.append(_EXPANSIONS[match[1]])
        at = match.end()
    parts.append(re.escape(uri_template[at:]))
    return re.compile("".join(parts), re.DOTALL)
