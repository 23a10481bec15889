"""Grants: the short-lived, signed authorization an executor demands before it runs.

"No approval needed" is not "allowed" (seed 000 §12): after authorize (and approve, where
policy asks), the harness mints a `Grant` bound to the principal, the contract id@version,
the argument digest and a resource scope, and the executor gate runs `GrantAuthority.check`
on the request it is about to execute. The grant then travels in the `ToolContext`, and an
executor that acts out of process (an upstream MCP server, a sandbox) checks it again with
`GrantAuthority.check_call` on the arguments it is about to send. A grant that was altered,
expired, or minted for another principal, contract, argument set or resource is refused.

Grants are HMAC-SHA256 signed with the authority's key, so only the process (or replicas
sharing the key) that minted a grant can vouch for it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from toolkeeper.errors import ConfigError
from toolkeeper.runtime.invocation import Principal, arguments_digest, new_id

if TYPE_CHECKING:
    from toolkeeper.runtime.context import ToolContext
    from toolkeeper.runtime.invocation import InvocationRequest

_MIN_KEY_BYTES = 16


@dataclasses.dataclass(frozen=True, slots=True)
class Grant:
    """A signed permission to run one request's action, valid until `expires_at`."""

    grant_id: str
    principal_id: str
    tenant: str
    contract_ref: str
    arguments_digest: str
    resource_scope: tuple[str, ...]
    """fnmatch patterns every read and write of the request must match."""
    conditions: tuple[str, ...]
    """Conditions policy attached (``Condition.describe()`` text), recorded with the grant."""
    expires_at: float
    """Seconds since the epoch, on the authority's clock."""
    approval_id: str | None
    signature: str
    """Hex HMAC-SHA256 over every other field."""


class GrantAuthority:
    """Mints and checks grants under one HMAC key.

    `ttl` is how many seconds a grant stays valid; `clock` is injectable for tests and must
    match across replicas that share `key`.
    """

    def __init__(
        self,
        *,
        key: bytes | None = None,
        ttl: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if key is not None and len(key) < _MIN_KEY_BYTES:
            raise ConfigError(
                f"grant key is {len(key)} bytes; use at least {_MIN_KEY_BYTES} random bytes "
                "(e.g. secrets.token_bytes(32))",
                key="key",
                value=f"<{len(key)} bytes>",
            )
        if not ttl > 0:
            raise ConfigError(
                f"grant ttl must be positive seconds, not {ttl!r}", key="ttl", value=ttl
            )
        self._key = key if key is not None else secrets.token_bytes(32)
        self._ttl = ttl
        self._clock = clock

    def __repr__(self) -> str:
        # The key is a secret; a repr must never print it.
        return f"GrantAuthority(ttl={self._ttl}, key=<hidden>)"

    def mint(
        self,
        request: InvocationRequest,
        *,
        resource_scope: Sequence[str] = (),
        conditions: Sequence[str] = (),
        approval_id: str | None = None,
        valid_for: float = 0.0,
    ) -> Grant:
        """Sign a grant for exactly this request. Without `resource_scope`, the scope is the
        request's own declared read and write sets. It expires after the authority's ttl or
        `valid_for` seconds, whichever is longer, so a call's whole retry budget fits."""
        scope = tuple(resource_scope) or (*request.read_set, *request.write_set)
        fields = (
            new_id("grt"),
            request.principal.id,
            request.principal.tenant,
            request.contract_ref,
            request.arguments_digest,
            tuple(dict.fromkeys(scope)),
            tuple(conditions),
            self._clock() + max(self._ttl, valid_for),
            approval_id,
        )
        # Signed over the values in field order, then built once: no unsigned copy.
        return Grant(*fields, signature=self._signature(fields))

    def check(self, grant: Grant | None, request: InvocationRequest) -> str | None:
        """None when `grant` authorizes `request` now; otherwise why it does not."""
        refusal = self._check(
            grant, request.principal, request.contract_ref, request.arguments_digest
        )
        if refusal is not None:
            return refusal
        assert grant is not None
        for resource in (*request.read_set, *request.write_set):
            if not any(fnmatchcase(resource, pattern) for pattern in grant.resource_scope):
                return f"resource outside grant scope: {resource}"
        return None

    def check_call(self, context: ToolContext, arguments: dict[str, Any]) -> str | None:
        """None when `context.grant` authorizes the executor to run `context.contract_ref`
        for `context.principal` with exactly `arguments` now; otherwise why it does not.

        This is what an executor can check with what it holds, and the digest is recomputed
        from the arguments it is about to send. The resource scope stays the harness gate's
        (`check`): an executor does not know the request's read and write sets.
        """
        digest = arguments_digest(arguments)
        return self._check(context.grant, context.principal, context.contract_ref, digest)

    def _check(
        self,
        grant: Grant | None,
        principal: Principal,
        contract_ref: str,
        digest: str,
    ) -> str | None:
        if grant is None:
            return "missing grant"
        signature = grant.signature if isinstance(grant.signature, str) else ""
        # Bytes, because compare_digest refuses non-ASCII str instead of answering False.
        if not hmac.compare_digest(signature.encode(), self._sign(grant).encode()):
            return "grant signature invalid"
        if self._clock() >= grant.expires_at:
            return "grant expired"
        if grant.principal_id != principal.id:
            return f"grant is for principal {grant.principal_id}"
        if grant.tenant != principal.tenant:
            return f"grant is for tenant {grant.tenant}"
        if grant.contract_ref != contract_ref:
            return f"grant is for contract {grant.contract_ref}"
        if grant.arguments_digest != digest:
            return "grant is for other arguments"
        return None

    def _sign(self, grant: Grant) -> str:
        return self._signature(tuple(getattr(grant, name) for name in _SIGNED))

    def _signature(self, values: tuple[object, ...]) -> str:
        # The repr of a tuple of str, float, None and tuples of str is exact and stable, and
        # costs a fraction of JSON: signing runs twice on every call's hot path.
        return hmac.new(self._key, repr(values).encode(), hashlib.sha256).hexdigest()


_SIGNED = tuple(f.name for f in dataclasses.fields(Grant) if f.name != "signature")
