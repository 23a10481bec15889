"""Grants: the executor's gate refuses anything but a fresh, untampered grant for this call."""

from __future__ import annotations

import dataclasses

import pytest

from toolkeeper import Principal, ToolContext
from toolkeeper.errors import ConfigError
from toolkeeper.runtime.grants import Grant, GrantAuthority
from toolkeeper.runtime.invocation import InvocationRequest, arguments_digest

KEY = b"k" * 32
ARGUMENTS = {"branch": "fix-2048", "path": "src/app.py"}


class FakeClock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def request(**changes: object) -> InvocationRequest:
    base = InvocationRequest(
        request_id="req_1",
        call_id="call_1",
        contract_ref="edit_branch_file@1.0.0",
        implementation_digest="sha256:impl",
        arguments=ARGUMENTS,
        arguments_digest=arguments_digest(ARGUMENTS),
        principal=Principal(id="dev-7", tenant="acme", capabilities=frozenset({"repo.write"})),
        read_set=("repo:task2048/branch:fix-2048",),
        write_set=("repo:task2048/branch:fix-2048/src/app.py",),
    )
    return dataclasses.replace(base, **changes)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def authority(clock: FakeClock) -> GrantAuthority:
    return GrantAuthority(key=KEY, ttl=30.0, clock=clock)


def test_valid_grant_passes(authority: GrantAuthority) -> None:
    grant = authority.mint(request(), conditions=['path != "main"'], approval_id="apr_1")
    assert authority.check(grant, request()) is None
    assert grant.expires_at == 1_030.0
    assert grant.approval_id == "apr_1"


def test_empty_scope_means_the_requests_own_declared_sets(authority: GrantAuthority) -> None:
    grant = authority.mint(request())
    assert grant.resource_scope == (
        "repo:task2048/branch:fix-2048",
        "repo:task2048/branch:fix-2048/src/app.py",
    )


def test_missing_grant_is_refused(authority: GrantAuthority) -> None:
    assert authority.check(None, request()) == "missing grant"


@pytest.mark.parametrize(
    "change",
    [
        {"principal_id": "admin"},
        {"contract_ref": "merge_request@1.0.0"},
        {"arguments_digest": "sha256:other"},
        {"resource_scope": ("*",)},
        {"conditions": ()},
        {"expires_at": 9e9},
        {"approval_id": "apr_forged"},
        {"tenant": "globex"},
    ],
)
def test_altered_field_breaks_the_signature(authority: GrantAuthority, change: dict) -> None:
    grant = authority.mint(request(), conditions=["dry_run == true"], approval_id="apr_1")
    assert authority.check(dataclasses.replace(grant, **change), request()) == (
        "grant signature invalid"
    )


@pytest.mark.parametrize("signature", ["", "0" * 64, "é" * 64])
def test_wrong_signature_is_refused(authority: GrantAuthority, signature: str) -> None:
    grant = dataclasses.replace(authority.mint(request()), signature=signature)
    assert authority.check(grant, request()) == "grant signature invalid"


def test_grant_signed_with_another_key_is_refused(clock: FakeClock) -> None:
    other = GrantAuthority(key=b"x" * 32, clock=clock)
    grant = other.mint(request())
    assert GrantAuthority(key=KEY, clock=clock).check(grant, request()) == (
        "grant signature invalid"
    )


def test_random_keys_differ_between_authorities(clock: FakeClock) -> None:
    grant = GrantAuthority(clock=clock).mint(request())
    assert GrantAuthority(clock=clock).check(grant, request()) == "grant signature invalid"


def test_grant_expires_after_ttl(authority: GrantAuthority, clock: FakeClock) -> None:
    grant = authority.mint(request())
    clock.now = 1_029.9
    assert authority.check(grant, request()) is None
    clock.now = 1_030.0
    assert authority.check(grant, request()) == "grant expired"


def test_grant_for_another_principal_is_refused(authority: GrantAuthority) -> None:
    grant = authority.mint(request())
    intruder = request(principal=Principal(id="mallory", tenant="acme"))
    assert authority.check(grant, intruder) == "grant is for principal dev-7"


def test_grant_for_another_tenant_is_refused(authority: GrantAuthority) -> None:
    grant = authority.mint(request())
    elsewhere = request(principal=Principal(id="dev-7", tenant="globex"))
    assert authority.check(grant, elsewhere) == "grant is for tenant acme"


def test_grant_for_another_contract_is_refused(authority: GrantAuthority) -> None:
    """Seed 000 §12: a grant for branch edits cannot run the merge."""
    grant = authority.mint(request())
    merge = request(contract_ref="merge_request@1.0.0")
    assert authority.check(grant, merge) == "grant is for contract edit_branch_file@1.0.0"


def test_grant_for_other_arguments_is_refused(authority: GrantAuthority) -> None:
    grant = authority.mint(request())
    changed = {**ARGUMENTS, "path": "src/other.py"}
    other = request(arguments=changed, arguments_digest=arguments_digest(changed))
    assert authority.check(grant, other) == "grant is for other arguments"


def test_resource_outside_scope_is_refused(authority: GrantAuthority) -> None:
    grant = authority.mint(request(), resource_scope=["repo:task2048/branch:*"])
    assert authority.check(grant, request()) is None
    main = request(write_set=("repo:task2048/main",))
    assert authority.check(grant, main) == "resource outside grant scope: repo:task2048/main"


def test_scope_matching_is_case_sensitive(authority: GrantAuthority) -> None:
    grant = authority.mint(request(), resource_scope=["repo:task2048/branch:*"])
    shouting = request(read_set=("REPO:TASK2048/BRANCH:FIX",), write_set=())
    assert (
        authority.check(grant, shouting) == "resource outside grant scope: REPO:TASK2048/BRANCH:FIX"
    )


@pytest.mark.parametrize(
    ("options", "key"),
    [({"key": b"short"}, "key"), ({"ttl": 0}, "ttl"), ({"ttl": float("nan")}, "ttl")],
)
def test_weak_key_or_bad_ttl_is_a_config_error(options: dict, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        GrantAuthority(**options)
    assert caught.value.key == key


def test_repr_hides_the_key() -> None:
    assert "kkkk" not in repr(GrantAuthority(key=KEY))


def test_grant_is_frozen(authority: GrantAuthority) -> None:
    grant: Grant = authority.mint(request())
    with pytest.raises(dataclasses.FrozenInstanceError):
        grant.expires_at = 9e9  # type: ignore[misc]


# -- the executor's own check: only what it holds -----------------------------------------------


def context(grant: Grant | None, **changes: object) -> ToolContext:
    base = ToolContext(
        request_id="req_1",
        call_id="call_1",
        contract_ref="edit_branch_file@1.0.0",
        principal=Principal(id="dev-7", tenant="acme"),
        grant=grant,
    )
    return dataclasses.replace(base, **changes)


def test_an_executor_accepts_the_grant_for_exactly_its_call(authority: GrantAuthority) -> None:
    grant = authority.mint(request())
    assert authority.check_call(context(grant), dict(ARGUMENTS)) is None
    reordered = dict(reversed(ARGUMENTS.items()))  # the digest is over canonical JSON
    assert authority.check_call(context(grant), reordered) is None


def test_an_executor_recomputes_the_digest_of_what_it_sends(authority: GrantAuthority) -> None:
    grant = authority.mint(request())
    changed = {**ARGUMENTS, "path": "src/other.py"}
    assert authority.check_call(context(grant), changed) == "grant is for other arguments"


def test_an_executor_refuses_a_grant_minted_for_other_arguments(
    authority: GrantAuthority,
) -> None:
    changed = {**ARGUMENTS, "path": "src/other.py"}
    grant = authority.mint(request(arguments=changed, arguments_digest=arguments_digest(changed)))
    assert authority.check_call(context(grant), ARGUMENTS) == "grant is for other arguments"


def test_an_executor_refuses_what_the_gate_refuses(
    authority: GrantAuthority, clock: FakeClock
) -> None:
    grant = authority.mint(request())
    assert authority.check_call(context(None), ARGUMENTS) == "missing grant"
    widened = dataclasses.replace(grant, arguments_digest=arguments_digest({}))
    assert authority.check_call(context(widened), {}) == "grant signature invalid"
    assert authority.check_call(
        context(grant, principal=Principal(id="mallory", tenant="acme")), ARGUMENTS
    ) == ("grant is for principal dev-7")
    assert authority.check_call(
        context(grant, principal=Principal(id="dev-7", tenant="globex")), ARGUMENTS
    ) == ("grant is for tenant acme")
    assert authority.check_call(context(grant, contract_ref="merge_request@1.0.0"), ARGUMENTS) == (
        "grant is for contract edit_branch_file@1.0.0"
    )
    clock.now = 1_030.0
    assert authority.check_call(context(grant), ARGUMENTS) == "grant expired"
