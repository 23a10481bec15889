"""Where a contract came from, and how a fix is phrased for that source.

A fix is only useful in the words of the place it is made: a decorated function is changed
through ``@tool(...)`` arguments, its docstring and its type hints; a contract file through
its keys; an imported tool through the gateway's per-tool overrides, since its source format
has no place for what toolkeeper needs. The origin is read off the contract alone, so
`lint_contract` and `lint_catalog` phrase a fix the same way:

- `Origin.FUNCTION`: the contract has an implementation digest, which only
  `ToolContract.from_function` (and so ``@tool``) computes.
- `Origin.IMPORTED`: no version, no digest, and exactly the importers' cautious effect
  defaults (committing, open-world, not idempotent; `CAUTIOUS_DEFAULTS`). A hand-written
  contract that declares precisely that and nothing more reads as imported too; it is then
  reported in the catalog's import note rather than tool by tool (docs/lint.md).
- `Origin.DATA`: everything else — a contract file, or a `ToolContract` built from data.
"""

from __future__ import annotations

from enum import StrEnum

from toolkeeper.contract.model import ToolContract
from toolkeeper.importers.formats import CAUTIOUS_DEFAULTS


class Origin(StrEnum):
    """The kind of source a contract came from, which decides how a fix is phrased."""

    FUNCTION = "function"
    DATA = "data"
    IMPORTED = "imported"


OVERRIDABLE = ("side_effect", "idempotency", "open_world", "timeout", "version", "description")
"""Contract fields the gateway's per-tool upstream overrides can set (`ToolOverride`)."""


def origin_of(contract: ToolContract) -> Origin:
    """The kind of source `contract` came from (see the module docstring)."""
    if contract.implementation_digest is not None:
        return Origin.FUNCTION
    cautious = all(getattr(contract, key) == value for key, value in CAUTIOUS_DEFAULTS.items())
    return Origin.IMPORTED if cautious and contract.version is None else Origin.DATA


def declare(contract: ToolContract, field: str, example: str) -> str:
    """Where and how to set contract field `field` (a dotted path such as
    ``result_projection.summary_template``) to `example` (a literal), for the source
    `contract` came from; fix texts read "<what to do>: <this>"."""
    origin = origin_of(contract)
    if origin is Origin.FUNCTION:
        return f"@tool({_keyword(field, example)}, ...)"
    if origin is Origin.IMPORTED and field in OVERRIDABLE:
        return (
            f"[upstreams.SERVER.tools.{contract.id}] {field} = {example} in the gateway's "
            "upstream config"
        )
    if origin is Origin.IMPORTED:
        return (
            f"{field}: {example} in a toolkeeper contract for the tool (its source format has "
            f"no place for {field})"
        )
    return f"{field}: {example} in the contract"


def _keyword(field: str, example: str) -> str:
    """`field=example` as a decorator keyword; a nested field becomes a dict argument."""
    head, _, rest = field.partition(".")
    return f"{head}={example}" if not rest else f'{head}={{"{rest}": {example}}}'
