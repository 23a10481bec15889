"""What a developer is told at registration: a bare ``@tool`` and a tool no policy permits."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from toolkeeper import Principal, Proposal, tool
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

LOGGER = "toolkeeper.runtime.harness"


@tool(version="1.0.0", side_effect="reversible", idempotency="keyed", required_capabilities=["x"])
def archive(item: str) -> str:
    """Move an item to the archive."""
    return item


@tool(side_effect="none")
def read(item: str) -> str:
    """Read an item."""
    return item


def _never_permitted(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "no loaded policy permits" in r.message]


def test_a_tool_no_policy_permits_warns_with_the_permit_to_add(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        harness = Harness(home=tmp_path / "a")
        harness.register(read)
        harness.register(archive)
    (warning,) = _never_permitted(caplog)
    assert "archive@1.0.0 (side_effect reversible)" in warning
    permit = re.search(r"add to a policy file: (permit .*?;)", warning)
    assert permit is not None
    denied = harness.invoke_sync(
        Proposal("c1", "archive", {"item": "i"}), principal=Principal("p", capabilities={"x"})
    )
    assert denied.status == "rejected"
    harness.close()

    # The permit the warning gives is one Cedar accepts, and it is what was missing.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        fixed = Harness(home=tmp_path / "b", policy=CedarPolicyEngine(policies=permit[1]))
        fixed.register(archive)
    assert _never_permitted(caplog) == []
    allowed = fixed.invoke_sync(
        Proposal("c1", "archive", {"item": "i"}), principal=Principal("p", capabilities={"x"})
    )
    assert allowed.status == "succeeded"
    fixed.close()


def test_a_forbidden_tool_is_not_this_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    forbid = 'forbid (principal, action, resource) when { resource.id == "read" };'
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        harness = Harness(home=tmp_path, policy=CedarPolicyEngine(policies=forbid))
        harness.register(read)
    assert _never_permitted(caplog) == []


def test_a_bare_tool_waits_for_a_human(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Registered as undeclared (counts as committing): the default policy asks a human."""
    with caplog.at_level(logging.WARNING):

        @tool
        def ping(host: str) -> str:
            """Ping a host."""
            return host

        harness = Harness(home=tmp_path)
        harness.register(ping)
    assert [r.name for r in caplog.records] == ["toolkeeper.contract.functions"]
    answer = harness.invoke_sync(Proposal("c1", "ping", {"host": "h"}), principal=Principal("p"))
    assert answer.status == "pending_approval"
    harness.close()
