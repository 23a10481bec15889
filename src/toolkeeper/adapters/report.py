"""What a rendering could not keep: `RenderReport` and its `RenderIssue`s.

Vendors accept different subsets of JSON Schema. An adapter never fails a whole catalog over
one keyword: it renders the closest shape the vendor accepts and says, per tool and per JSON
pointer, what it changed, so a catalog author can see what the model will and will not be
told.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class IssueKind(StrEnum):
    """How a rendering departed from the contract's schema."""

    MOVED_TO_DESCRIPTION = "moved_to_description"
    """A keyword the vendor rejects was written into the node's description instead."""
    RELAXED = "relaxed"
    """A constraint was replaced by a weaker one the vendor accepts (e.g. oneOf as anyOf)."""
    DROPPED = "dropped"
    """Something was left out entirely (e.g. an example that does not fit the view schema)."""
    FALLBACK = "fallback"
    """The tool could not be rendered in the requested mode and used a looser one."""


@dataclass(frozen=True, slots=True)
class RenderIssue:
    """One departure from the contract, addressed by contract ref and JSON pointer."""

    ref: str
    path: str
    """JSON pointer into the view's input schema ('' is the root)."""
    kind: IssueKind
    detail: str

    def __str__(self) -> str:
        return f"{self.ref} {self.path or '/'}: {self.kind.value}: {self.detail}"


@dataclass(frozen=True, slots=True)
class RenderReport:
    """Every issue of one rendering; empty when the vendor got the contracts as written."""

    issues: tuple[RenderIssue, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.issues

    def for_tool(self, ref: str) -> tuple[RenderIssue, ...]:
        return tuple(issue for issue in self.issues if issue.ref == ref)

    def fallbacks(self) -> tuple[str, ...]:
        """Refs of the tools rendered in a looser mode than asked for."""
        return tuple(issue.ref for issue in self.issues if issue.kind is IssueKind.FALLBACK)
