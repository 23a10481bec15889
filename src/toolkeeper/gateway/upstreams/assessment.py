"""What the gateway makes of each upstream tool: its status (`ToolStatus`) and, when approved,
the contract it is served under.

A tool is disabled by the config, unsupported (it requires MCP tasks, which the gateway does
not serve), invalid (cannot become a contract), a name collision, blocked by a scan finding,
new, changed since approval (a rug pull until an operator says otherwise), or approved.
`assess` judges every listing at once against the pin store; it holds no connection, so the
federation calls it again whenever a listing or an approval changes.
Approved tools become contracts with the importer's cautious defaults (committing, open world,
not idempotent) plus the operator's overrides; upstream annotations stay hints.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from toolkeeper.contract.model import ToolContract
from toolkeeper.errors import ToolkeeperError
from toolkeeper.gateway.scanning.findings import Finding, Severity, blocking, scan_tool
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.gateway.upstreams.pins import PinStore, pin_hash, pinned_definition
from toolkeeper.importers.formats import from_mcp_tool

LOCAL = "(local tools)"
"""The `known_tools` key for tools registered with the harness outside the federation."""


class ToolStatus(StrEnum):
    """What the gateway made of one upstream tool; only `approved` is served."""

    APPROVED = "approved"
    NEW = "new"
    CHANGED = "changed"
    BLOCKED = "blocked"
    COLLISION = "collision"
    INVALID = "invalid"
    DISABLED = "disabled"
    UNSUPPORTED = "unsupported"


PRESENTATION_FIELDS = ("icons", "execution")
"""What of a listed tool the gateway lists on as the upstream sent it, outside the pin (a
client's display and task hints, which no model reads and no policy consults)."""


@dataclass(frozen=True, slots=True)
class UpstreamTool:
    """One tool an upstream offers, its pin hash, findings and status (with the reason when it
    is withheld)."""

    server: str
    name: str
    contract_id: str
    hash: str
    status: ToolStatus
    findings: tuple[Finding, ...] = ()
    reason: str = ""
    contract: ToolContract | None = field(default=None, repr=False)
    presentation: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """`PRESENTATION_FIELDS` as listed."""
    kind: str = "tool"
    """``tool``, or what else an upstream offers read-only: ``prompt``, ``resource`` or
    ``template`` (a resource template); `name` is then its `pins.offering_key`."""
    listed: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """A prompt's or resource's definition as listed, which the gateway lists on."""


def assess(
    listings: Mapping[str, Mapping[str, Mapping[str, Any]]],
    configs: Mapping[str, UpstreamConfig],
    pins: PinStore,
    *,
    local_ids: Collection[str] = (),
) -> list[UpstreamTool]:
    """Decide every listed tool's status: ``listings`` maps server → tool name → definition.

    Collisions are judged across all listings at once: two upstreams offering one id both
    lose it until a namespace tells them apart.
    """
    known: dict[str, Collection[str]] = {server: set(tools) for server, tools in listings.items()}
    if local_ids:
        known[LOCAL] = set(local_ids)
    offered: dict[str, list[str]] = {}
    for server, tools in listings.items():
        for name in tools:
            offered.setdefault(configs[server].namespace + name, []).append(server)
    return [
        _assess_one(server, name, tool, configs[server], pins, known, offered, local_ids)
        for server, tools in listings.items()
        for name, tool in tools.items()
    ]


def _assess_one(
    server: str,
    name: str,
    tool: Mapping[str, Any],
    config: UpstreamConfig,
    pins: PinStore,
    known: Mapping[str, Collection[str]],
    offered: Mapping[str, list[str]],
    local_ids: Collection[str],
) -> UpstreamTool:
    contract_id, digest = config.namespace + name, pin_hash(tool)
    findings = tuple(scan_tool(server, tool, known_tools=known, classifier=config.scan_classifier))

    shown = {key: tool[key] for key in PRESENTATION_FIELDS if tool.get(key) is not None}

    def report(status: ToolStatus, reason: str = "", **extra: Any) -> UpstreamTool:
        return UpstreamTool(
            server, name, contract_id, digest, status, findings, reason, presentation=shown, **extra
        )

    if not config.override(name).enabled:
        return report(ToolStatus.DISABLED, f"disabled in the config (tools.{name}.enabled)")
    execution = tool.get("execution")
    if isinstance(execution, Mapping) and execution.get("taskSupport") == "required":
        return report(
            ToolStatus.UNSUPPORTED,
            "requires MCP tasks (execution.taskSupport = 'required'), which the gateway does "
            "not serve; every call would fail, so it is not listed",
        )
    rivals = [s for s in offered[contract_id] if s != server]
    if rivals or contract_id in local_ids:
        holders = ", ".join(repr(s) for s in rivals) or "a local tool"
        target = rivals[0] if rivals and config.namespace == f"{server}." else server
        reason = (
            f"id {contract_id!r} is also offered by {holders}; give each upstream its own "
            f"namespace, e.g. mcpServers.{target}.namespace = {target + '.'!r}"
        )
        findings += (Finding("name_collision", Severity.HIGH, "/name", reason, server, name),)
        return report(ToolStatus.COLLISION, reason)
    try:
        contract = _contract(tool, config, contract_id, digest)
    except ToolkeeperError as exc:
        return report(ToolStatus.INVALID, f"cannot become a contract: {exc}")
    status, reason = pin_verdict(server, name, digest, findings, config, pins)
    if status is not ToolStatus.APPROVED:
        return report(status, reason)
    return report(ToolStatus.APPROVED, contract=contract)


def pin_verdict(
    server: str,
    key: str,
    digest: str,
    findings: Collection[Finding],
    config: UpstreamConfig,
    pins: PinStore,
) -> tuple[ToolStatus, str]:
    """Blocked, new, changed or approved, with the reason: the scan findings and the
    operator's pin for the definition hashed to `digest`, stored under `key` (a tool name,
    or a prompt's or resource's `pins.offering_key`)."""
    pin = pins.approved(server, key)
    blockers = blocking(findings, config.scan)
    shown = f"{server} {key}" if ":" not in key else f"{server} {key!r}"
    if blockers and not (pin and pin.hash == digest and pin.forced):
        codes = ", ".join(sorted({f.code for f in blockers}))
        return (
            ToolStatus.BLOCKED,
            f"blocked by scan findings ({codes}); inspect with `toolkeeper upstreams list`",
        )
    if pin is None:
        return (
            ToolStatus.NEW,
            f"new, not approved yet; review it, then `toolkeeper upstreams approve CONFIG {shown}`",
        )
    if pin.hash != digest:
        return (
            ToolStatus.CHANGED,
            f"changed since {pin.approved_by} approved it (a possible rug pull); review "
            f"`toolkeeper upstreams diff CONFIG {shown}`, then approve again",
        )
    return ToolStatus.APPROVED, ""


def _contract(
    tool: Mapping[str, Any], config: UpstreamConfig, contract_id: str, digest: str
) -> ToolContract:
    """The importer's cautious contract, with the operator's overrides on top; the pin hash
    is the implementation digest, so a ledger record names the exact definition it ran. The
    server's `call_timeout` is each tool's timeout unless the tool's override sets one."""
    fields: dict[str, Any] = {
        "id": contract_id,
        "version": "0.0.0",
        "implementation_digest": digest,
    }
    if config.call_timeout is not None:
        fields["timeout"] = config.call_timeout
    fields |= config.override(str(tool["name"])).contract_fields()
    return from_mcp_tool(pinned_definition(tool), **fields)
