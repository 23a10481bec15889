"""`toolkeeper upstreams list|approve|diff CONFIG [SERVER [TOOL]]`: review what upstream MCP
servers offer and approve exact definitions before the gateway serves them.

What is reviewed is every tool, and every prompt, resource and resource template, named by
its pin key (``prompt:review``, ``resource:docs://readme``, ``template:docs://{page}``).

Each command connects to every upstream of the configuration (collisions are judged across
all of them), records what each offers in the pin store, and then shows, approves or diffs.
An approval pins the definition the operator just saw: if the upstream changes it before the
approval is written, the approval is refused.
"""

from __future__ import annotations

import argparse
import getpass
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio

from toolkeeper.cli.conventions import add_format
from toolkeeper.cli.escaping import visible
from toolkeeper.errors import ConfigError, ToolkeeperError
from toolkeeper.gateway.config.settings import GatewayConfig, load_config
from toolkeeper.gateway.scanning.findings import Finding
from toolkeeper.gateway.upstreams.assessment import ToolStatus, UpstreamTool
from toolkeeper.gateway.upstreams.federation import survey_upstreams
from toolkeeper.gateway.upstreams.pins import PinStore

_APPROVABLE = (ToolStatus.NEW, ToolStatus.CHANGED)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "upstreams",
        help="review and approve the tools, prompts and resources of upstream MCP servers",
    )
    commands = parser.add_subparsers(dest="upstreams_command", metavar="ACTION", required=True)
    listing = commands.add_parser("list", help="every upstream tool with its status and findings")
    _common(listing)
    listing.set_defaults(func=run_list)
    approve = commands.add_parser("approve", help="pin the definitions you reviewed")
    _common(approve)
    approve.add_argument("--all", action="store_true", help="every new or changed tool of SERVER")
    approve.add_argument("--by", default=None, help="who approves (default: the OS user)")
    approve.add_argument(
        "--force", action="store_true", help="approve despite blocking findings (needs --reason)"
    )
    approve.add_argument("--reason", default=None, help="why; kept with the pin")
    approve.set_defaults(func=run_approve)
    diff = commands.add_parser("diff", help="what changed since a tool was approved")
    _common(diff)
    diff.set_defaults(func=run_diff)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=Path, help="gateway configuration (.toml, .yaml, .json)")
    parser.add_argument("server", nargs="?", help="one upstream server of the configuration")
    parser.add_argument(
        "tool",
        nargs="?",
        help="one tool of that server (its upstream name), or a prompt, resource or template "
        "by its key (prompt:NAME, resource:URI, template:URI_TEMPLATE)",
    )
    parser.add_argument("--home", type=Path, default=None, help="state directory (default: home)")
    add_format(parser)


def _survey(args: argparse.Namespace) -> tuple[list[UpstreamTool], dict[str, str], Path]:
    config = load_config(args.config)
    home = args.home or config.home
    _check_selection(config, args)
    tools, errors = anyio.run(lambda: survey_upstreams(config.upstreams, home=home))
    chosen = [
        tool
        for tool in tools
        if args.server in (None, tool.server) and args.tool in (None, tool.name)
    ]
    return chosen, errors, home


def _check_selection(config: GatewayConfig, args: argparse.Namespace) -> None:
    if args.server is not None and args.server not in config.upstreams:
        known = ", ".join(sorted(config.upstreams)) or "none are configured"
        raise ConfigError(
            f"{args.config} has no upstream {args.server!r} (known: {known})",
            key="server",
            value=args.server,
        )


def run_list(args: argparse.Namespace) -> int:
    """Exits 1 when an upstream (of those selected) could not be reached: a script or a
    health check must not read an empty listing as "nothing to review"."""
    tools, errors, _ = _survey(args)
    errors = {server: e for server, e in errors.items() if args.server in (None, server)}
    if args.format == "json":
        print(json.dumps({"tools": [_as_json(t) for t in tools], "errors": errors}, indent=2))
        return 1 if errors else 0
    for tool in tools:
        print(
            f"{tool.status.value:<10} {visible(tool.server)}/{visible(tool.name)}  "
            f"id={visible(tool.contract_id)}  {tool.hash[:19]}"
        )
        if tool.reason:
            print(f"    {visible(tool.reason)}")
        for finding in (f for f in tool.findings if f.message != tool.reason):
            print(f"    ! {_finding_line(finding)}")
    for server, error in sorted(errors.items()):
        print(f"unreachable {visible(server)}: {visible(error)}")
    offered = sum(t.kind != "tool" for t in tools)
    approved = sum(t.status is ToolStatus.APPROVED for t in tools)
    print(
        f"{len(tools) - offered} tool(s), {offered} prompt(s) and resource(s), {approved} approved"
    )
    return 1 if errors else 0


def run_approve(args: argparse.Namespace) -> int:
    if args.server is None or (args.tool is None) == (not args.all):
        raise ConfigError(
            "name what to approve: SERVER TOOL, or SERVER --all for every new or changed tool",
            key="tool",
        )
    tools, errors, home = _survey(args)
    if args.server in errors:
        raise ToolkeeperError(f"upstream {args.server!r} is unreachable: {errors[args.server]}")
    if args.tool is not None and not tools:
        raise ConfigError(
            f"upstream {args.server!r} does not offer a tool {args.tool!r}", key="tool"
        )
    pins, by, refused = PinStore.in_home(home), args.by or getpass.getuser(), 0
    for tool in tools:
        label = visible(f"{tool.server}/{tool.name}")
        forced = tool.status is ToolStatus.BLOCKED and args.force
        if tool.status is ToolStatus.APPROVED:
            print(f"already approved: {label}")
        elif tool.status in _APPROVABLE or forced:
            pin = pins.approve(
                tool.server,
                tool.name,
                by=by,
                expected_hash=tool.hash,
                reason=args.reason,
                forced=forced,
            )
            extra = " despite blocking findings" if forced else ""
            print(f"approved {label} {pin.hash[:19]} by {by}{extra}")
        elif tool.status is ToolStatus.BLOCKED:
            refused += 1
            print(
                f"refused {label}: {visible(tool.reason)} (after review, --force --reason "
                "'...' approves it anyway)"
            )
        else:  # a collision, invalid or disabled tool cannot be served whatever is approved
            if not args.all:
                refused += 1
            print(f"cannot approve {label}: {tool.status.value}: {visible(tool.reason)}")
    return 1 if refused else 0


def run_diff(args: argparse.Namespace) -> int:
    if args.server is None or args.tool is None:
        raise ConfigError("diff needs SERVER and TOOL", key="tool")
    tools, errors, home = _survey(args)
    if args.server in errors:
        print(
            f"note: {args.server} is unreachable ({errors[args.server]}); "
            "showing the definition seen last"
        )
    diff = PinStore.in_home(home).diff(args.server, args.tool)
    if diff:
        print("\n".join(visible(line) for line in diff.splitlines()))
    else:
        print(f"{visible(args.server)}/{visible(args.tool)}: no change since it was approved")
    findings = [f for tool in tools for f in tool.findings]
    if findings:
        print(f"scan findings in the current definition ({len(findings)}):")
        for finding in findings:
            print(f"  ! {_finding_line(finding)}")
    return 0


def _finding_line(finding: Finding) -> str:
    """One finding as a reviewer reads it: severity, class and check, where, and why."""
    check = f"/{finding.check}" if finding.check and finding.check != finding.code else ""
    where = finding.path + (f"[{finding.span[0]}:{finding.span[1]}]" if finding.span else "")
    line = f"{finding.severity.value} {finding.code}{check} {where}: {finding.message}"
    return visible(line)  # upstream metadata: no raw control character reaches the terminal


def _as_json(tool: UpstreamTool) -> dict[str, Any]:
    return {
        "server": tool.server,
        "kind": tool.kind,
        "name": tool.name,
        "id": tool.contract_id,
        "hash": tool.hash,
        "status": tool.status.value,
        "reason": tool.reason,
        "findings": [asdict(finding) for finding in tool.findings],
    }
