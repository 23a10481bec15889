"""In-process executors: plain Python functions, async or sync.

Sync functions run on a worker thread so a slow tool never blocks the event loop. A thread
cannot be killed: when its call times out, the harness answers at once and the function runs
on to its end in the background; that is exactly why a timed-out write's effect is unknown.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Generator
from typing import Any

import anyio.to_thread

from toolkeeper.contract.functions import context_parameter
from toolkeeper.runtime.context import ToolContext


class FunctionExecutor:
    """Calls a Python function with the validated arguments (and its `ToolContext`)."""

    source = "in_process"

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        # A callable object with `async def __call__` is as async as a coroutine function.
        self._is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            type(fn).__call__
        )
        self.context_parameter = context_parameter(fn)
        """The parameter that receives the `ToolContext` (the one the schema leaves out)."""

    def __repr__(self) -> str:
        return f"FunctionExecutor({getattr(self.fn, '__qualname__', self.fn)!r})"

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        kwargs = dict(arguments)
        if self.context_parameter is not None:
            kwargs[self.context_parameter] = context
        if self._is_async:
            return await self.fn(**kwargs)
        # abandon_on_cancel: a timed-out thread is left to finish; its effect is unknown.
        return await anyio.to_thread.run_sync(
            functools.partial(call_in_thread, _drained(self.fn), kwargs), abandon_on_cancel=True
        )


def _drained(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, with a generator it returns read to a list on its worker thread: the generator's
    body is tool code, which must run off the event loop and under the call's timeout."""

    def run(**kwargs: Any) -> Any:
        result = fn(**kwargs)
        return list(result) if isinstance(result, Generator) else result

    return run


def call_in_thread(fn: Callable[..., Any], kwargs: dict[str, Any], *args: Any) -> Any:
    """`fn(*args, **kwargs)`, meant for a worker thread the event loop awaits."""
    try:
        return fn(*args, **kwargs)
    except GeneratorExit as exc:
        # Handed back to the event loop, GeneratorExit would be thrown into the awaiting
        # coroutines, which closes them past every handler instead of failing the call.
        raise RuntimeError(f"the tool raised GeneratorExit: {exc}") from exc
