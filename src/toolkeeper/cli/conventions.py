"""What every `toolkeeper` command shares: exit codes, ``--format``, argument types.

Exit codes (docs/cli.md):

* 0 — the command did what was asked (``call``: the tool call succeeded);
* 1 — it ran, and the outcome was a failure (``call``: rejected, failed, timed out,
  cancelled, effect unknown; ``lint``: errors found);
* 2 — usage: a mistake in the arguments, the configuration or the environment, said in one
  line on stderr;
* 3 — ``call`` only: the call waits for a human approval (``toolkeeper approvals``), so a
  script can tell "ask someone" from "it broke".
"""

from __future__ import annotations

import argparse

SUCCEEDED = 0
FAILED = 1
USAGE = 2
PENDING_APPROVAL = 3

FORMATS = ("text", "json")
_DEPRECATED_FORMATS = {"table": "text"}
"""Spellings older releases accepted, still understood."""


def _format(text: str) -> str:
    value = _DEPRECATED_FORMATS.get(text, text)
    if value not in FORMATS:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from text, json)")
    return value


def add_format(parser: argparse.ArgumentParser) -> None:
    """The one ``--format text|json`` (``table`` is read as ``text``)."""
    parser.add_argument(
        "--format",
        type=_format,
        default="text",
        metavar="{text,json}",
        help="text for people (default), json for programs",
    )


def positive(text: str) -> int:
    """An argparse type: a whole number of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception in `group`, however deeply task groups nested it, that is not
    itself a group; a ToolkeeperError first, since that one was written for the user."""
    from toolkeeper.errors import ToolkeeperError

    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending[:0] = list(exc.exceptions)
        else:
            leaves.append(exc)
    return next((e for e in leaves if isinstance(e, ToolkeeperError)), leaves[0])
