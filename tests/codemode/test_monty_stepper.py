"""The Monty driver's stepper thread: steps hand over and back through a socket pair whose
loop end times out after `STEP_WAIT_SECONDS`; a longer step is awaited off the loop."""

from __future__ import annotations

import itertools
import socket
import threading
import time

import anyio
import pytest

from toolkeeper.codemode import monty
from toolkeeper.codemode.monty import STEP_WAIT_SECONDS, _Stepper


def test_each_step_answers_with_its_own_result_around_a_step_that_outlasts_the_wait() -> None:
    """A step longer than the in-place wait is taken off the loop; the next steps still get
    their own answers (no answer left over from the long one), and a step that raises
    raises in the awaiting task."""
    stepper = _Stepper()
    threads: list[str] = []

    def slow(value: int) -> int:
        threads.append(threading.current_thread().name)
        time.sleep(STEP_WAIT_SECONDS * 20)
        return value

    def quick(value: int) -> int:
        threads.append(threading.current_thread().name)
        return value

    def fails() -> None:
        raise ValueError("from the step")

    async def main() -> list[int]:
        answers = [await stepper.step(quick, 1), await stepper.step(slow, 2)]
        answers += [await stepper.step(quick, n) for n in range(3, 40)]
        with pytest.raises(ValueError, match="from the step"):
            await stepper.step(fails)
        answers.append(await stepper.step(slow, 40))
        answers.append(await stepper.step(quick, 41))
        return answers

    try:
        assert anyio.run(main) == list(range(1, 42))
    finally:
        stepper.put_back()
    assert set(threads) == {"toolkeeper-monty"}  # every step ran on the stepper's thread


def test_the_loop_runs_other_tasks_while_a_long_step_runs() -> None:
    """Waiting in place is bounded: during a 200 ms step, a task ticking every millisecond
    keeps ticking, its longest gap a small fraction of the step."""
    stepper = _Stepper()
    ticks: list[float] = []

    async def main() -> None:
        done = anyio.Event()

        async def tick() -> None:
            while not done.is_set():
                ticks.append(time.monotonic())
                await anyio.sleep(0.001)

        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            await anyio.sleep(0.005)
            start = time.monotonic()
            await stepper.step(time.sleep, 0.2)
            end = time.monotonic()
            done.set()
        during = [t for t in ticks if start <= t <= end]
        gaps = [b - a for a, b in itertools.pairwise(during)]
        assert len(during) > 20 and max(gaps) < 0.05, (len(during), max(gaps))

    try:
        anyio.run(main)
    finally:
        stepper.put_back()


def test_a_stepper_put_back_beyond_the_idle_ones_ends_its_thread() -> None:
    kept = len(monty._IDLE)
    steppers = [_Stepper() for _ in range(monty.IDLE_STEPPERS - kept + 2)]
    before = {t.ident for t in threading.enumerate() if t.name == "toolkeeper-monty"}
    for stepper in steppers:
        stepper.put_back()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = {t.ident for t in threading.enumerate() if t.name == "toolkeeper-monty"}
        if len(before - alive) == 2:
            break
        time.sleep(0.01)
    assert len(before - alive) == 2
    assert len(monty._IDLE) == monty.IDLE_STEPPERS


def test_a_default_socket_timeout_changes_nothing_in_the_stepper() -> None:
    """An application's `socket.setdefaulttimeout` must neither end the stepper's thread
    while it waits for work nor stretch the loop's wait in place: a step started long after
    the stepper and a step that outlasts the default timeout both answer."""
    socket.setdefaulttimeout(0.05)
    try:
        stepper = _Stepper()
    finally:
        socket.setdefaulttimeout(None)

    async def main() -> list[int]:
        await anyio.sleep(0.2)  # past the default timeout while the thread waits for work
        first = await stepper.step(lambda: 1)
        slow = await stepper.step(lambda: time.sleep(0.1) or 2)
        return [first, slow]

    try:
        assert anyio.run(main) == [1, 2]
    finally:
        stepper.put_back()
