"""In-process executors: plain Python functions, async or sync.

Sync functions run on a worker thread so a slow tool never blocks the event loop. A thread
cannot be killed: when its call times out, the harness answers at once and the function runs
on to its end in the background; that is exactly why a timed-out write's effect is unknown.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

import anyio.to_thread

from toolkeeper.runtime.context import ToolContext


def _context_parameter(fn: Callable[..., Any]) -> str | None:
    try:
        hints = get_type_hints(fn)
    except Exception:
        hints = {}
    for name, param in inspect.signature(fn).parameters.items():
        annotation = hints.get(name, param.annotation)
        if annotation is ToolContext or annotation == "ToolContext":
            return name
    return None


class FunctionExecutor:
    """Calls a Python function with the validated arguments (and its `ToolContext`)."""

    source = "in_process"

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self._is_async = inspect.iscoroutinefunction(fn)
        self._context_param = _context_parameter(fn)

    def __repr__(self) -> str:
        return f"FunctionExecutor({getattr(self.fn, '__qualname__', self.fn)!r})"

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        kwargs = dict(arguments)
        if self._context_param is not None:
            kwargs[self._context_param] = context
        if self._is_async:
            return await self.fn(**kwargs)
        # abandon_on_cancel: a timed-out thread is left to finish; its effect is unknown.
        return await anyio.to_thread.run_sync(
            functools.partial(self.fn, **kwargs), abandon_on_cancel=True
        )
