"""Routing of federated prompts and resources (`upstreams/offerings.py`): URI templates, the
owner of a URI, collisions, and the pin keys that keep them apart from tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.gateway.upstreams.assessment import ToolStatus
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.gateway.upstreams.offerings import (
    Routes,
    assess_offerings,
    kind_of,
    scanned_view,
    template_pattern,
)
from toolkeeper.gateway.upstreams.pins import PinStore, offering_key, pin_fields, pin_hash


@pytest.mark.parametrize(
    ("template", "uri", "matches"),
    [
        ("docs://pages/{page}", "docs://pages/7", True),
        ("docs://pages/{page}", "docs://pages/7/edit", False),  # one segment
        ("docs://pages/{page}", "docs://pages/", True),  # an empty value expands too
        ("docs://pages/{page}", "docsXpages/7", False),  # literal text is literal
        ("file:///{+path}", "file:///etc/hosts", True),
        ("search://{?q,lang}", "search://?q=x&lang=en", True),
        ("search://{?q,lang}", "search://", True),
        ("a://{x}.txt", "a://b.txt", True),
        ("a://{x}.txt", "a://b.md", False),
    ],
)
def test_template_patterns_match_what_the_template_expands_to(
    template: str, uri: str, matches: bool
) -> None:
    assert bool(template_pattern(template).fullmatch(uri)) is matches


def _routes(tmp_path: Path, listings: dict[str, dict[str, dict[str, object]]]) -> Routes:
    configs = {server: UpstreamConfig(command="x", namespace=f"{server}.") for server in listings}
    pins = PinStore.in_home(tmp_path)
    for server, items in listings.items():
        pins.record_seen(server, items)
        for key in items:
            pins.approve(server, key, by="olga")
    reports = assess_offerings(listings, configs, pins, known_tools={})
    assert all(r.status is ToolStatus.APPROVED for r in reports), reports
    return Routes.of(reports)


def test_a_listed_uri_wins_over_a_template_and_templates_of_two_servers_route_nowhere(
    tmp_path: Path,
) -> None:
    routes = _routes(
        tmp_path,
        {
            "one": {
                offering_key("resource", "a://x/1"): {"uri": "a://x/1", "name": "one"},
                offering_key("template", "a://x/{n}"): {"uriTemplate": "a://x/{n}", "name": "n"},
            },
            "two": {
                offering_key("template", "a://{+rest}"): {"uriTemplate": "a://{+rest}", "name": "r"}
            },
        },
    )
    listed = routes.owner("a://x/1")
    assert listed is not None and (listed.server, listed.kind) == ("one", "resource")
    assert routes.owner("a://x/2") is None  # both servers' templates match: ambiguous
    other = routes.owner("a://y/2")
    assert other is not None and (other.server, other.kind) == ("two", "template")
    assert routes.owner("b://x/1") is None


def test_prompts_are_served_under_the_namespace_and_forwarded_by_their_own_name(
    tmp_path: Path,
) -> None:
    routes = _routes(tmp_path, {"git": {"prompt:commit": {"name": "commit"}}})
    offering = routes.prompts["git.commit"]
    assert (offering.server, offering.upstream_id) == ("git", "commit")


def test_pin_keys_and_fields_keep_kinds_apart() -> None:
    assert kind_of("prompt:x") == "prompt" and kind_of("resource:a://b") == "resource"
    assert kind_of("template:a://{b}") == "template" and kind_of("search") == "tool"
    assert "uri" in pin_fields("resource:a://b") and "inputSchema" in pin_fields("search")
    # A resource's size is not pinned (it changes with its content); its description is.
    base = {"uri": "a://b", "name": "b", "description": "B."}
    fields = pin_fields("resource:a://b")
    assert pin_hash({**base, "size": 1}, fields) == pin_hash({**base, "size": 2}, fields)
    assert pin_hash(base, fields) != pin_hash({**base, "description": "B!"}, fields)


def test_the_scanner_reads_a_prompts_arguments_as_parameters() -> None:
    view = scanned_view(
        {
            "name": "p",
            "description": "D.",
            "arguments": [{"name": "path", "description": "The file."}, {"bad": 1}],
        }
    )
    assert view["inputSchema"]["properties"] == {"path": {"description": "The file."}}
