"""Attacks on policy with values Cedar cannot hold (issue 9, item 3) and on the decision
cache's memory (item 7).

A number left out of the Cedar context made ``context.arguments has x`` false, so a forbid
guarded by ``has x && x > T`` never fired for 20000.00001, 1e20 or 2**63, and the effect
ran. Every number must now reach policy exactly, or the comparison fails and the call is
denied: for any value above the threshold the decision is never ``allow``, while values a
Long or a decimal holds exactly are judged as before. Distinct large arguments grew the
decision cache by their size, never released; it is now bounded by bytes.
"""

from __future__ import annotations

import functools
import gc
import json
import tracemalloc
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from toolkeeper import ErrorCategory, Principal, Proposal, Status, ToolContract, tool
from toolkeeper.policy import CedarPolicyEngine, Decision, PolicyRequest, decide_safely
from toolkeeper.policy.cedar import DECISION_CACHE_BYTES
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice", "acme", frozenset())
CALC = ToolContract(id="calc", version="1.0.0", description="Calc.", side_effect="reversible")
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DECIMAL_LIMIT = Decimal("922337203685477.5807")

# -- values ---------------------------------------------------------------------------------

JSON_NUMBER_TEXT = st.from_regex(
    r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?", fullmatch=True
)
"""Numbers as a model writes them, read the way the validate stage reads argument text."""

NUMBERS = st.one_of(
    st.integers(LONG_MAX - 3, LONG_MAX + 3),
    st.integers(LONG_MIN - 3, LONG_MIN + 3),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.builds(lambda k, sign: sign * 10**k, st.integers(0, 40), st.sampled_from([1, -1])),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e-300, max_value=1e-300),  # subnormals and tiny values
    st.decimals(-(10**15), 10**15, places=4, allow_nan=False).map(lambda d: json.loads(str(d))),
    JSON_NUMBER_TEXT.map(json.loads),
    st.booleans(),  # JSON true is no number: it must never pass a numeric guard
)
EDGES = [
    "20000.00001",
    "10000.00001",
    "10000.0001",
    "1e20",
    "100000000000000000000",
    "9223372036854775808",
    "-9223372036854775809",
    "9223372036854775807",
    "1e308",
    "-1e308",
    "5e-324",
    "0.30000000000000004",
    "-0.0",
    "2e4",
    "99.99999",
    "100.00001",
    "922337203685477.5808",
    "true",
]


def numeric(value: Any) -> Fraction | None:
    """The JSON number policy must judge: a float is its shortest text (what `json.dumps`
    writes and the tool's JSON holds); None for what is no JSON number (a bool, infinity,
    which reading ``1e999`` gives)."""
    if isinstance(value, bool) or value in (float("inf"), float("-inf")):
        return None
    return Fraction(Decimal(repr(value))) if isinstance(value, float) else Fraction(value)


def is_long(value: Any) -> bool:
    number = numeric(value)
    return number is not None and number.denominator == 1 and LONG_MIN <= number <= LONG_MAX


def is_decimal(value: Any) -> bool:
    """A fraction Cedar's decimal holds exactly (an integral value is a Long instead)."""
    if not isinstance(value, float) or value.is_integer():
        return False
    exact = Decimal(repr(value))
    exponent = exact.as_tuple().exponent
    return isinstance(exponent, int) and exponent >= -4 and abs(exact) <= DECIMAL_LIMIT


# -- policies -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def engine(policies: str) -> CedarPolicyEngine:
    return CedarPolicyEngine(policies=policies, include_defaults=False)


def decided(policies: str, value: Any) -> Decision:
    request = PolicyRequest(ALICE, CALC, {"x": value})
    return decide_safely(engine(policies), request).decision


def cap(guard: str) -> str:
    return (
        '@id("ops.all") permit (principal, action, resource);\n'
        '@id("ops.cap") forbid (principal, action, resource)\n'
        f"when {{ context.arguments has x && {guard} }};"
    )


def floor(guard: str) -> str:
    return f'@id("ops.small") permit (principal, action, resource) when {{ {guard} }};'


LONG_THRESHOLDS = st.one_of(
    st.sampled_from([10000, 100, 0, -1, LONG_MAX, LONG_MIN + 1]),
    st.integers(LONG_MIN + 1, LONG_MAX),
)
DECIMAL_THRESHOLDS = st.one_of(
    st.sampled_from([Decimal("10000"), Decimal("100"), Decimal("0.1"), Decimal("0")]),
    st.decimals(-(10**14), 10**14, places=4, allow_nan=False),
)

VALUES = st.one_of(NUMBERS, st.sampled_from(EDGES).map(json.loads))
CEDAR = settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)


@CEDAR
@given(value=VALUES, threshold=LONG_THRESHOLDS)
@example(value=20000.00001, threshold=10000)
@example(value=10**20, threshold=10000)
@example(value=1e20, threshold=10000)
@example(value=2**63, threshold=10000)
def test_a_long_guarded_forbid_is_never_skipped(value: Any, threshold: int) -> None:
    """Defect: 20000.00001, 1e20 and 2**63 were left out of the context and the forbid was
    skipped. Above the threshold: never allow. Held exactly as a Long: judged as written."""
    decision = decided(cap(f"context.arguments.x > {threshold}"), value)
    number = numeric(value)
    if number is None or number > threshold:
        assert decision is not Decision.ALLOW
    assert (decision is Decision.ALLOW) == (
        is_long(value) and number is not None and number <= threshold
    )


@CEDAR
@given(value=VALUES, threshold=DECIMAL_THRESHOLDS)
@example(value=10000.00001, threshold=Decimal("10000"))
@example(value=20000.00001, threshold=Decimal("20000"))
@example(value=1e-7, threshold=Decimal("0"))
def test_a_decimal_guarded_forbid_is_never_skipped(value: Any, threshold: Decimal) -> None:
    """Rounding 10000.00001 to 10000.0000 would pass a `> 10000` guard: the number is held
    exactly or the guard cannot compare it."""
    guard = f'context.arguments.x.greaterThan(decimal("{threshold:.4f}"))'
    decision = decided(cap(guard), value)
    number = numeric(value)
    if number is None or number > threshold:
        assert decision is not Decision.ALLOW
    assert (decision is Decision.ALLOW) == (
        is_decimal(value) and number is not None and number <= threshold
    )


@CEDAR
@given(value=VALUES, threshold=LONG_THRESHOLDS, decimal_threshold=DECIMAL_THRESHOLDS)
@example(value=100.00001, threshold=100, decimal_threshold=Decimal("100"))
@example(value=2**64 + 5, threshold=100, decimal_threshold=Decimal("100"))
@example(value=True, threshold=100, decimal_threshold=Decimal("100"))
def test_a_permit_below_a_threshold_is_never_granted_to_a_value_at_or_above_it(
    value: Any, threshold: int, decimal_threshold: Decimal
) -> None:
    """Rounding down would wrongly grant a `< 100` permit to 100.00001; so would reading
    `true` as 1."""
    number = numeric(value)
    as_long = decided(floor(f"context.arguments.x < {threshold}"), value)
    if number is None or number >= threshold:
        assert as_long is not Decision.ALLOW
    assert (as_long is Decision.ALLOW) == (
        is_long(value) and number is not None and number < threshold
    )
    guard = f'context.arguments.x.lessThan(decimal("{decimal_threshold:.4f}"))'
    as_decimal = decided(floor(guard), value)
    if number is None or number >= decimal_threshold:
        assert as_decimal is not Decision.ALLOW
    assert (as_decimal is Decision.ALLOW) == (
        is_decimal(value) and number is not None and number < decimal_threshold
    )


@CEDAR
@given(value=VALUES)
def test_equality_with_an_inexact_number_is_numeric_equality(value: Any) -> None:
    """An inexact number reaches policy as `{number: text}`; equal numbers must give equal
    text (1e20 and 10**20), so a forbid on `x == y` cannot be dodged by respelling."""
    number = numeric(value)
    twin = int(number) if number is not None and number.denominator == 1 else value
    policies = cap("context.arguments.x == context.arguments.y")
    request = PolicyRequest(ALICE, CALC, {"x": value, "y": twin})
    assert decide_safely(engine(policies), request).decision is Decision.DENY


def test_the_deny_names_the_number_policy_could_not_compare() -> None:
    result = decide_safely(
        engine(cap("context.arguments.x > 10000")),
        PolicyRequest(ALICE, CALC, {"x": 20000.00001}),
    )
    assert result.policy_ids == ("toolkeeper.evaluation_error",)
    assert any("/arguments/x = 20000.00001" in reason for reason in result.reasons)


# -- end to end: the tool never runs --------------------------------------------------------

CAP_AND_FLOOR = """
@id("ops.all") permit (principal, action, resource) when { resource.id != "pay_small" };
@id("ops.cap") forbid (principal, action, resource)
when { context.arguments has amount_cents && context.arguments.amount_cents > 10000 };
@id("ops.small") permit (principal, action, resource)
when { resource.id == "pay_small" && context.arguments.amount_cents < 100 };
"""


def payments(tmp_path: Path) -> tuple[Harness, list[tuple[str, Any]]]:
    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(policies=CAP_AND_FLOOR, include_defaults=False),
    )
    effects: list[tuple[str, Any]] = []

    @tool(id="refund", version="1.0.0", side_effect="committing")
    def refund(amount_cents: int) -> dict[str, Any]:
        """Refund an amount in cents."""
        effects.append(("refund", amount_cents))
        return {"refunded": True}

    @tool(id="transfer", version="1.0.0", side_effect="committing")
    def transfer(amount_cents: float) -> dict[str, Any]:
        """Transfer an amount in cents."""
        effects.append(("transfer", amount_cents))
        return {"sent": True}

    @tool(id="pay_small", version="1.0.0", side_effect="committing")
    def pay_small(amount_cents: float) -> dict[str, Any]:
        """Pay an amount under 100 cents."""
        effects.append(("pay_small", amount_cents))
        return {"paid": True}

    for function in (refund, transfer, pay_small):
        harness.register(function)
    return harness, effects


@pytest.mark.parametrize(
    ("name", "amount"),
    [
        ("refund", "1e20"),
        ("refund", "100000000000000000000"),
        ("refund", "9223372036854775808"),
        ("transfer", "20000.00001"),
        ("transfer", "10000.00001"),
        ("transfer", "1e300"),
    ],
)
def test_a_committing_tool_never_runs_for_a_value_policy_forbids(
    tmp_path: Path, name: str, amount: str
) -> None:
    """Defect: the forbid was skipped and the refund ran for 1e20, 10**20 and 2**63."""
    harness, effects = payments(tmp_path)
    text = f'{{"amount_cents": {amount}}}'
    envelope = harness.invoke_sync(Proposal("c1", name, text), principal=ALICE)
    assert envelope.status is Status.REJECTED
    assert envelope.error is not None
    assert envelope.error.category is ErrorCategory.POLICY_DENIED
    assert effects == []
    harness.flush()
    (record,) = harness.ledger.query()
    assert record.status == "rejected"
    harness.close()


@pytest.mark.parametrize(
    ("name", "amount", "received"),
    [("refund", "5e3", 5000), ("transfer", "9999.0", 9999.0), ("pay_small", "5e1", 50.0)],
)
def test_values_policy_allows_still_run(
    tmp_path: Path, name: str, amount: str, received: Any
) -> None:
    """An integer spelled as a float (what an integer schema accepts) is a Long: the
    natural guard judges it instead of failing on a decimal."""
    harness, effects = payments(tmp_path)
    text = f'{{"amount_cents": {amount}}}'
    envelope = harness.invoke_sync(Proposal("c1", name, text), principal=ALICE)
    assert envelope.status is Status.SUCCEEDED, envelope.error
    assert effects == [(name, received)]
    harness.close()


# -- the decision cache is bounded by bytes -------------------------------------------------

READS_ARGUMENTS = (
    '@id("ops.named") permit (principal, action, resource) when { context.arguments has blob };'
)


def traced_growth(engine: CedarPolicyEngine, arguments: list[dict[str, Any]]) -> int:
    """Bytes Python still holds after deciding every request, the requests themselves freed."""
    engine.decide(PolicyRequest(ALICE, CALC, {"blob": "warm"}))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for index in range(len(arguments)):
            decision = engine.decide(PolicyRequest(ALICE, CALC, arguments[index]))
            assert decision.decision is Decision.ALLOW
            arguments[index] = {}
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_distinct_large_arguments_do_not_grow_the_decision_cache() -> None:
    """Defect: each distinct 3 MB argument kept ~3.5 MB in the cache, never released."""
    policy = CedarPolicyEngine(policies=READS_ARGUMENTS)
    arguments = [{"blob": f"{index:04d}" + "x" * 3_000_000} for index in range(8)]
    growth = traced_growth(policy, arguments)
    assert growth < 3_000_000, f"{growth} bytes still held after 8 distinct 3 MB arguments"
    assert policy.cached_bytes <= DECISION_CACHE_BYTES


def test_the_cache_keeps_its_byte_bound_under_many_distinct_contexts() -> None:
    limit = 1024 * 1024
    policy = CedarPolicyEngine(policies=READS_ARGUMENTS, decision_cache_bytes=limit)
    arguments = [{"blob": f"{index:04d}" + "y" * 40_000} for index in range(100)]  # ~4 MB
    growth = traced_growth(policy, arguments)
    assert 0 < policy.cached_bytes <= limit
    # the accounting overstates an entry (1 KiB for ~0.6 KiB measured); the slack is for
    # allocations outside the cache while tracing
    assert growth <= limit + 64 * 1024, f"{growth} bytes held with a {limit}-byte bound"
    # what is kept is still served: the newest answer is there, the oldest were dropped
    newest = {"blob": "0099" + "y" * 40_000}
    assert policy.decide(PolicyRequest(ALICE, CALC, newest)) is policy.decide(
        PolicyRequest(ALICE, CALC, newest)
    )
