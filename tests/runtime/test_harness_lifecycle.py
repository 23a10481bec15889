"""Attacks on the harness lifecycle: use after close, nested `with`, opening from two
threads at once, sync entry points inside a running loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import Principal, Proposal, Status, tool
from toolkeeper.errors import ToolkeeperError
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice", "acme")


@tool(side_effect="none")
def ping() -> dict[str, Any]:
    """Answer pong."""
    return {"pong": True}


def permissive() -> CedarPolicyEngine:
    return CedarPolicyEngine(
        policies="permit(principal, action, resource);", include_defaults=False
    )


def test_a_harness_closed_with_a_given_ledger_says_it_cannot_open_again(tmp_path: Path) -> None:
    """Defect: after `with Harness(ledger=...)` the harness reopened the ledger it had
    closed, and every call failed with "Cannot operate on a closed database"."""
    harness = Harness(
        home=tmp_path, ledger=SQLiteLedger(tmp_path / "given.db"), policy=permissive()
    )
    harness.register(ping)
    with harness:
        assert harness.invoke_sync(Proposal("c1", "ping", {}), principal=ALICE).ok
    with pytest.raises(ToolkeeperError, match="build a new Harness with a new ledger"):
        harness.invoke_sync(Proposal("c2", "ping", {}), principal=ALICE)


def test_a_harness_with_its_own_ledger_opens_again_after_close(tmp_path: Path) -> None:
    harness = Harness(home=tmp_path / "tk", policy=permissive())
    harness.register(ping)
    with harness:
        with harness:  # nested: the inner exit closes, the outer use opens again
            assert harness.invoke_sync(Proposal("c1", "ping", {}), principal=ALICE).ok
        assert harness.invoke_sync(Proposal("c2", "ping", {}), principal=ALICE).ok
    assert len(Harness(home=tmp_path / "tk").ledger.query()) == 2


def test_opening_from_many_threads_at_once_opens_one_ledger(tmp_path: Path) -> None:
    harness = Harness(home=tmp_path / "tk", policy=permissive())
    harness.register(ping)
    barrier = threading.Barrier(8)
    ledgers: list[Any] = []

    def open_and_call(n: int) -> None:
        barrier.wait()
        ledgers.append(harness.open().ledger)
        envelope = harness.invoke_sync(Proposal(f"c{n}", "ping", {}), principal=ALICE)
        assert envelope.status is Status.SUCCEEDED

    threads = [threading.Thread(target=open_and_call, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(ledger) for ledger in ledgers}) == 1
    assert len(harness.ledger.query()) == 8
    harness.close()


def test_sync_entry_points_inside_a_running_loop_say_what_to_await(tmp_path: Path) -> None:
    harness = Harness(home=tmp_path / "tk", policy=permissive())

    async def inside() -> None:
        with pytest.raises(ToolkeeperError, match=r"await harness.invoke"):
            harness.invoke_sync(Proposal("c1", "ping", {}), principal=ALICE)
        with pytest.raises(ToolkeeperError, match=r"await harness.resume"):
            harness.resume_sync("apr_x", principal=ALICE)

    asyncio.run(inside())
