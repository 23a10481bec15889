"""Microseconds per policy decision: CedarPolicyEngine (defaults plus one operator file) against
a trivial allow-all Python engine, both through `decide_safely`, in the same run.

    python benchmarks/policy.py [--calls N]

The Cedar figure is steady state: the policy set is parsed once and the entities of a
(principal, tool) pair are cached after the first call, as they are in a running harness.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from toolkeeper import Principal, ToolContract
from toolkeeper.policy import (
    CedarPolicyEngine,
    Decision,
    PolicyDecision,
    PolicyRequest,
    decide_safely,
)

OPERATOR = """
@id("ops.small_payments")
@conditions("amount <= 100")
permit (principal, action, resource) when { resource.id == "pay" };
"""


class AllowAll:
    def decide(self, request: PolicyRequest) -> PolicyDecision:
        return PolicyDecision(Decision.ALLOW, ("allow_all",))


def _per_call_us(decide: Callable[[], PolicyDecision], calls: int, rounds: int = 5) -> float:
    """Median over rounds of mean microseconds per call; the median shrugs off noisy
    neighbours on a shared machine."""
    decide()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            decide()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    calls = parser.parse_args().calls
    principal = Principal(id="dev-7", tenant="acme", capabilities=frozenset({"repo.read"}))
    read = ToolContract(
        id="read_file",
        version="1.0.0",
        description="Read a file.",
        side_effect="none",
        required_capabilities=("repo.read",),
    )
    pay = ToolContract(id="pay", version="1.0.0", description="Pay.", side_effect="reversible")
    cases = {
        "read_file, 2 arguments": PolicyRequest(
            principal, read, {"path": "src/app.py", "ref": "main"}, {"hour": 14}
        ),
        "pay, conditions, float": PolicyRequest(
            principal, pay, {"amount": 42.5, "currency": "EUR", "memo": "x" * 40}, {"hour": 14}
        ),
    }
    start = time.perf_counter()
    cedar = CedarPolicyEngine(policies=OPERATOR)
    parse_ms = (time.perf_counter() - start) * 1e3
    python = AllowAll()
    print(f"policy set parse (once, at construction): {parse_ms:.1f} ms")
    print(f"{'case':28} {'cedar µs':>10} {'allow-all µs':>13} {'decision':>22}")
    for name, request in cases.items():
        cedar_us = _per_call_us(lambda r=request: decide_safely(cedar, r), calls)
        python_us = _per_call_us(lambda r=request: decide_safely(python, r), calls)
        decision = decide_safely(cedar, request).decision.value
        print(f"{name:28} {cedar_us:10.1f} {python_us:13.2f} {decision:>22}")


if __name__ == "__main__":
    main()
