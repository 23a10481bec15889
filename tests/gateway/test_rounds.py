"""`SuspendedCalls` (issue 10, item 2): a 2026-07-28 client's call waits in the gateway
between round trips, under a request state that is unguessable, used once, bound to its
principal, bounded in number and in lifetime. End to end with the SDK client in
test_links.py; here the edges, with a real call that asks through its peer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from mcp import types

from toolkeeper import Principal, ResultEnvelope, Status
from toolkeeper.gateway.rounds import RoundTripPeer, SuspendedCalls, UnknownRequestState
from toolkeeper.runtime.peer import InputRefused

pytestmark = pytest.mark.anyio
ALICE = Principal(id="alice", tenant="acme")
MALLORY = Principal(id="mallory", tenant="acme")
QUESTION = {
    "message": "What is your name?",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}


def answer(name: str) -> dict[str, object]:
    return {"action": "accept", "content": {"name": name}}


async def greet_twice(peer: RoundTripPeer) -> ResultEnvelope:
    """A tool that asks twice, one after the other, and reports what it heard (or why not)."""
    try:
        first = await peer.ask("elicit", QUESTION)
        second = await peer.ask("elicit", QUESTION)
    except InputRefused as refused:
        return ResultEnvelope(status=Status.FAILED, summary=f"refused: {refused.message}")
    names = [first["content"]["name"], second["content"]["name"]]
    return ResultEnvelope(status=Status.SUCCEEDED, summary=" and ".join(names))


@asynccontextmanager
async def suspended(*, limit: int = 8, lifetime: float = 30.0) -> AsyncIterator[SuspendedCalls]:
    calls = SuspendedCalls(limit=limit, lifetime=lifetime)
    async with calls.running():
        yield calls


def asked(outcome: object) -> tuple[dict[str, types.InputRequest], str]:
    """The requests and the state of an ``input_required`` answer."""
    assert isinstance(outcome, types.InputRequiredResult), outcome
    assert outcome.input_requests is not None and outcome.request_state is not None
    return outcome.input_requests, outcome.request_state


async def test_each_round_asks_once_and_the_call_completes_with_the_answers() -> None:
    async with suspended() as calls:
        requests, first = asked(await calls.start(ALICE, "greet", None, greet_twice))
        ((key, request),) = requests.items()
        assert isinstance(request, types.ElicitRequest)
        assert request.params.message == "What is your name?"
        requests, second = asked(
            await calls.resume(ALICE, "greet", first, {key: answer("Ada")}, None)
        )
        assert second != first
        with pytest.raises(UnknownRequestState):  # a state is good for one round trip
            await calls.resume(ALICE, "greet", first, {key: answer("Eve")}, None)
        (key,) = requests
        done = await calls.resume(ALICE, "greet", second, {key: answer("Bob")}, None)
    assert isinstance(done, ResultEnvelope)
    assert (done.status, done.summary) == (Status.SUCCEEDED, "Ada and Bob")


async def test_another_principals_or_tools_state_is_refused_and_the_owner_keeps_it() -> None:
    async with suspended() as calls:
        (key,), state = asked(await calls.start(ALICE, "greet", None, greet_twice))
        with pytest.raises(UnknownRequestState):
            await calls.resume(MALLORY, "greet", state, {key: answer("Eve")}, None)
        with pytest.raises(UnknownRequestState):
            await calls.resume(ALICE, "greet", "a-guessed-state", {key: answer("Eve")}, None)
        with pytest.raises(UnknownRequestState):  # the state of a call of another tool
            await calls.resume(ALICE, "delete", state, {key: answer("Eve")}, None)
        asked(await calls.resume(ALICE, "greet", state, {key: answer("Ada")}, None))


async def test_an_unanswered_request_is_asked_again() -> None:
    async with suspended() as calls:
        first, state = asked(await calls.start(ALICE, "greet", None, greet_twice))
        again, _ = asked(await calls.resume(ALICE, "greet", state, {}, None))
        assert list(again.values()) == list(first.values())


async def test_a_call_whose_client_never_returns_expires_with_a_clear_error() -> None:
    finished = anyio.Event()
    heard: list[str] = []

    async def ask_once(peer: RoundTripPeer) -> ResultEnvelope:
        try:
            await peer.ask("sample", {"messages": [], "maxTokens": 5})
        except InputRefused as refused:
            heard.append(refused.message)
        finished.set()
        return ResultEnvelope(status=Status.FAILED, summary="expired")

    async with suspended(lifetime=0.2) as calls:
        _, state = asked(await calls.start(ALICE, "greet", None, ask_once))
        with anyio.fail_after(10):
            await finished.wait()
        with pytest.raises(UnknownRequestState):
            await calls.resume(ALICE, "greet", state, {}, None)
    assert heard == [
        "the calling client did not answer the sampling request within 0.2 s; "
        "its request state expired"
    ]


async def test_calls_past_the_limit_are_not_suspended_and_say_why() -> None:
    async with suspended(limit=1) as calls:
        asked(await calls.start(ALICE, "greet", None, greet_twice))
        over = await calls.start(ALICE, "greet", None, greet_twice)
    assert isinstance(over, ResultEnvelope) and over.status is Status.FAILED
    assert over.summary == (
        "refused: the gateway already holds 1 calls waiting on their clients' input; "
        "the elicitation request was not sent"
    )


async def test_a_round_the_client_abandons_cancels_the_call() -> None:
    cancelled = anyio.Event()

    async def wait_forever(peer: RoundTripPeer) -> ResultEnvelope:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    async with suspended() as calls:
        with anyio.move_on_after(0.1):
            await calls.start(ALICE, "greet", None, wait_forever)
        with anyio.fail_after(10):
            await cancelled.wait()
