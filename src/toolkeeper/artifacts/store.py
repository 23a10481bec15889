"""Large results stored aside: the content-addressed `ArtifactStore` and `project_result`.

The model's context is the scarcest resource a result touches (seed 000 §4, seed 003 pattern
3): the model needs a summary and a few verifiable fields, while auditors and evaluators need
the whole result. `project_result` splits one from the other; the store keeps the whole, named
by the sha256 of its bytes so that writing the same result twice is one file and a reference
can never point at changed content.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkeeper.contract.model import ResultProjection
from toolkeeper.errors import ToolkeeperError
from toolkeeper.runtime.envelope import ArtifactRef
from toolkeeper.schema.document import canonical_json

DEFAULT_ROOT = Path(".toolkeeper/artifacts")
URI_PREFIX = "toolkeeper-artifact://sha256/"
_URI = re.compile(r"^toolkeeper-artifact://sha256/([0-9a-f]{64})$")

PREVIEW_MAX_BYTES = 1024
"""Canonical-JSON size the preview of a stored-aside result stays within."""
PREVIEW_MAX_STRING = 256
"""Longer strings are described by their length in a preview instead of inlined."""
SUMMARY_MAX_CHARS = 500
_SUMMARY_FIELD_NAMES = 8


class ArtifactError(ToolkeeperError):
    """Raised when an artifact reference is malformed, missing from the store, or corrupted."""

    def __init__(self, message: str, *, uri: str | None = None):
        super().__init__(message)
        self.uri = uri


class ArtifactStore:
    """Content-addressed blobs under ``<root>/sha256/<first two hex>/<hex>``.

    Writes go to a temporary file in the target directory and are moved into place with
    `os.replace`, so a reader never sees a partial artifact and concurrent writers of the
    same content cannot corrupt each other.
    """

    def __init__(self, root: str | Path = DEFAULT_ROOT) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"ArtifactStore(root={str(self.root)!r})"

    def put(
        self,
        data: bytes | Any,
        *,
        media_type: str = "application/json",
        description: str | None = None,
    ) -> ArtifactRef:
        """Store `data` and return its ref: bytes as given, anything else as canonical JSON
        (a value JSON cannot hold is stored as its ``str``, as in every digest toolkeeper
        computes)."""
        blob = bytes(data) if isinstance(data, bytes | bytearray) else canonical_json(data).encode()
        hexdigest = hashlib.sha256(blob).hexdigest()
        path = self._path(hexdigest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{hexdigest[:8]}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(blob)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        return ArtifactRef(
            uri=URI_PREFIX + hexdigest,
            digest="sha256:" + hexdigest,
            media_type=media_type,
            size=len(blob),
            description=description,
        )

    def get(self, ref_or_uri: ArtifactRef | str) -> bytes:
        """The stored bytes, checked against their digest before they are returned."""
        hexdigest = _hex_of(ref_or_uri)
        uri = URI_PREFIX + hexdigest
        try:
            blob = self._path(hexdigest).read_bytes()
        except FileNotFoundError:
            raise ArtifactError(
                f"artifact {uri} is not in the store at {self.root}; check that the store root "
                "is the one the result was written to",
                uri=uri,
            ) from None
        if hashlib.sha256(blob).hexdigest() != hexdigest:
            raise ArtifactError(
                f"artifact {uri} at {self._path(hexdigest)} does not match its digest; the file "
                "was changed outside toolkeeper and must be restored or deleted",
                uri=uri,
            )
        return blob

    def get_json(self, ref_or_uri: ArtifactRef | str) -> Any:
        """The stored artifact parsed as JSON."""
        blob = self.get(ref_or_uri)
        try:
            return json.loads(blob)
        except ValueError as exc:
            uri = URI_PREFIX + _hex_of(ref_or_uri)
            raise ArtifactError(
                f"artifact {uri} is not JSON ({exc}); read it with get() instead", uri=uri
            ) from exc

    def exists(self, ref_or_uri: ArtifactRef | str) -> bool:
        return self._path(_hex_of(ref_or_uri)).is_file()

    def path_for(self, ref_or_uri: ArtifactRef | str) -> Path:
        """Where the artifact lives (or would live) on disk."""
        return self._path(_hex_of(ref_or_uri))

    def _path(self, hexdigest: str) -> Path:
        return self.root / "sha256" / hexdigest[:2] / hexdigest


def _hex_of(ref_or_uri: ArtifactRef | str) -> str:
    uri = ref_or_uri.uri if isinstance(ref_or_uri, ArtifactRef) else ref_or_uri
    match = _URI.match(uri) if isinstance(uri, str) else None
    if match is None:
        raise ArtifactError(
            f"{uri!r} is not an artifact reference; pass an ArtifactRef or a URI of the form "
            f"{URI_PREFIX}<64 lowercase hex digits>",
            uri=uri if isinstance(uri, str) else None,
        )
    return match.group(1)


# -- values stored aside in ledger rows ---------------------------------------------------

_ASIDE_KEY = "_artifact"


def aside_value(ref: ArtifactRef) -> dict[str, Any]:
    """What a ledger row holds in place of a value stored aside: its reference, with the
    digest and size, so the row stays small and the value stays checkable."""
    return {_ASIDE_KEY: ref.model_dump(mode="json", exclude_none=True)}


def stored_aside(value: Any) -> ArtifactRef | None:
    """The reference in a value `aside_value` made; None for any other value."""
    if not isinstance(value, Mapping) or set(value) != {_ASIDE_KEY}:
        return None
    try:
        return ArtifactRef.model_validate(value[_ASIDE_KEY])
    except ValueError:
        return None


# -- projection ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Projection:
    """What of one result reaches the model, and where the rest was stored."""

    structured_content: dict[str, Any]
    summary: str
    artifact_refs: tuple[ArtifactRef, ...] = ()


def project_result(
    output: dict[str, Any], projection: ResultProjection, store: ArtifactStore
) -> Projection:
    """Split a (validated, redacted) tool output into the model's share and the stored whole.

    The model keeps `projection.fields` (all fields when unset). When that share's canonical
    JSON exceeds `projection.artifact_threshold` bytes, the full output is stored aside and
    the model gets a bounded preview instead: short scalar fields inline, other fields
    described (``{"type": "array", "length": 1000}``) under ``"_omitted"``, and the artifact
    URI under ``"_artifact"``.
    """
    if projection.fields is None:
        content = dict(output)
    else:
        content = {name: output[name] for name in projection.fields if name in output}
    refs: tuple[ArtifactRef, ...] = ()
    if _size(content) > projection.artifact_threshold:
        ref = store.put(output, description="full tool result")
        refs = (ref,)
        content = _preview(content, ref)
    return Projection(
        structured_content=content,
        summary=_summary(output, projection.summary_template, refs),
        artifact_refs=refs,
    )


def _preview(content: Mapping[str, Any], ref: ArtifactRef) -> dict[str, Any]:
    preview: dict[str, Any] = {}
    omitted: dict[str, Any] = {}
    # Room is kept for the artifact URI and a "_more_fields" count, so the bound always holds.
    reserved = {"_artifact": ref.uri, "_omitted": {"_more_fields": 10**9}}
    budget = PREVIEW_MAX_BYTES - _size(reserved)
    for name, value in content.items():
        small = _is_small_scalar(value)
        entry = value if small else _describe(value)
        cost = _size({name: entry}) + 1
        if cost > budget:
            # Out of room: what is left is still in the artifact, so stop rather than skip,
            # which keeps the preview a prefix of the result in its own field order.
            omitted["_more_fields"] = len(content) - len(preview) - len(omitted)
            break
        budget -= cost
        (preview if small else omitted)[name] = entry
    if omitted:
        preview["_omitted"] = omitted
    preview["_artifact"] = ref.uri
    return preview


def _size(value: Any) -> int:
    """Bytes of the canonical JSON, the measure every threshold here is stated in."""
    return len(canonical_json(value).encode())


def _is_small_scalar(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= PREVIEW_MAX_STRING
    return value is None or isinstance(value, bool | int | float)


def _describe(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"type": "string", "length": len(value)}
    if isinstance(value, Mapping):
        return {"type": "object", "keys": len(value)}
    if isinstance(value, Sequence):
        return {"type": "array", "length": len(value)}
    return {"type": type(value).__name__}


class _Missing:
    """A template field the output does not have; it renders as its own placeholder."""

    def __init__(self, field_name: str) -> None:
        self.field_name = field_name


class _TolerantFormatter(string.Formatter):
    """`str.format_map` semantics, except that a missing key renders as ``{key}``."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        try:
            return super().get_field(field_name, args, kwargs)
        except (KeyError, IndexError, AttributeError, TypeError):
            return _Missing(field_name), field_name

    def format_field(self, value: Any, format_spec: str) -> Any:
        if isinstance(value, _Missing):
            return "{" + value.field_name + "}"
        try:
            return super().format_field(value, format_spec)
        except (ValueError, TypeError):
            # A spec that does not fit the value (``{count:d}`` over a string) must not cost
            # the caller the summary of a call that already ran.
            return str(value)


def _summary(output: Mapping[str, Any], template: str | None, refs: tuple[ArtifactRef, ...]) -> str:
    text = None
    if template is not None:
        try:
            text = _TolerantFormatter().vformat(template, (), output)
        except ValueError:
            # A malformed template is a contract bug that `toolkeeper lint` reports (TK403);
            # at run time the call has already happened, so fall back to the default summary.
            text = None
    if text is None:
        text = _default_summary(output, refs)
    if len(text) > SUMMARY_MAX_CHARS:
        text = text[: SUMMARY_MAX_CHARS - 1] + "…"
    return text


def _default_summary(output: Mapping[str, Any], refs: tuple[ArtifactRef, ...]) -> str:
    names = list(output)
    shown = ", ".join(names[:_SUMMARY_FIELD_NAMES])
    if len(names) > _SUMMARY_FIELD_NAMES:
        shown += f", … ({len(names) - _SUMMARY_FIELD_NAMES} more)"
    noun = "field" if len(names) == 1 else "fields"
    text = f"Returned {len(names)} {noun}: {shown}." if names else "Returned no fields."
    for ref in refs:
        text += f" Full result ({ref.size} bytes) stored as {ref.uri}."
    return text
