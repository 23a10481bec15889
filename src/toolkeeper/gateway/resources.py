"""What the gateway serves through ``resources/read``: the stored-aside parts of a caller's own
results.

A result too large to send inline (over the limits' ``result_bytes``) is answered with a
``resource_link`` to its artifact, named `readable_uri`: the artifact's own URI with the
request that produced it (``toolkeeper-artifact://sha256/<hex>?request=<request id>``). Reading
it looks the request up in the ledger and serves the artifact only when the caller is the
principal (same id, same tenant) that made the call and the call's envelope holds that
artifact — the visibility a result has; a URI guessed or passed on to someone else reads
nothing. The ledger, not gateway memory, is the check, so any replica (and a restarted
gateway) serves it alike.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, BlobResourceContents, ReadResourceResult, TextResourceContents

from toolkeeper.artifacts.store import URI_PREFIX, ArtifactError
from toolkeeper.runtime import stages
from toolkeeper.runtime.envelope import ArtifactRef
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.invocation import Principal

RESOURCE_NOT_FOUND = -32002
"""The error code the MCP specification gives ``resources/read`` for an unknown URI."""


def readable_uri(ref: ArtifactRef, request_id: str) -> str:
    """The URI a caller reads `ref` by: the artifact and the request that stored it."""
    return f"{ref.uri}?request={request_id}"


def serves(uri: str) -> bool:
    """Whether `uri` names a stored-aside result (the gateway's own resource)."""
    return uri.startswith(URI_PREFIX)


async def read_artifact(harness: Harness, principal: Principal, uri: str) -> ReadResourceResult:
    """The contents of a stored-aside result `principal` may read; -32002 (not found) for a
    URI it may not, alike for a missing artifact and for another principal's, so the answer
    never says which artifacts exist."""
    missing = MCPError(code=RESOURCE_NOT_FOUND, message=f"resource not found: {uri}")
    parts = urlsplit(uri)
    artifact = uri.split("?", 1)[0]
    requests = parse_qs(parts.query).get("request", [])
    if len(requests) != 1:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"{uri!r}: read a stored result by the URI its call answered with "
            f"({URI_PREFIX}<hex>?request=<request id>)",
        )
    record = await stages.offload(harness.ledger.get, requests[0])
    if (
        record is None
        or record.principal_id != principal.id
        or record.tenant != principal.tenant
        or artifact.removeprefix(URI_PREFIX) not in json.dumps(record.envelope or {})
    ):
        raise missing
    try:
        blob = await stages.offload(harness.artifacts.get, artifact)
    except ArtifactError as exc:
        raise missing from exc
    return ReadResourceResult(contents=_contents(uri, blob, record.envelope or {}))


def _contents(uri: str, blob: bytes, envelope: dict[str, Any]) -> list[Any]:
    """A stored result as resource contents: stored content blocks one content each (text
    as text, image and audio as blobs, an embedded resource as itself, a link as its URI in
    text), any other stored value as its JSON."""
    stored = (envelope.get("content") or {}).get("stored") or {}
    if not (isinstance(stored, dict) and str(stored.get("uri")) == uri.split("?", 1)[0]):
        return [TextResourceContents(uri=uri, mime_type="application/json", text=blob.decode())]
    contents: list[Any] = []
    for block in json.loads(blob):
        kind = block.get("type")
        if kind == "text":
            contents.append(
                TextResourceContents(uri=uri, mime_type="text/plain", text=block["text"])
            )
        elif kind in ("image", "audio"):
            contents.append(
                BlobResourceContents(uri=uri, mime_type=block.get("mimeType"), blob=block["data"])
            )
        elif kind == "resource":
            resource = block["resource"]
            if "blob" in resource:
                contents.append(BlobResourceContents.model_validate(resource))
            else:
                contents.append(TextResourceContents.model_validate(resource))
        else:
            text = json.dumps(block, ensure_ascii=False)
            contents.append(TextResourceContents(uri=uri, mime_type="application/json", text=text))
    return contents
