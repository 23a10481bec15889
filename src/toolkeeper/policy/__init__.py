"""Policy: may this principal invoke this tool with these arguments, here and now?

The authorize stage asks a `PolicyEngine` through `decide_safely`; `CedarPolicyEngine` is the
shipped engine and `default_policies()` its shipped Cedar text (``default.cedar`` here).

    decision.py   the seam: PolicyRequest → PolicyDecision (Decision, Condition), decide_safely
    cedar.py      CedarPolicyEngine: the Cedar model, annotations, default policies
"""

from toolkeeper.policy.cedar import CedarPolicyEngine, default_policies
from toolkeeper.policy.decision import (
    CONDITION_GRAMMAR,
    Condition,
    Decision,
    PolicyDecision,
    PolicyEngine,
    PolicyRequest,
    decide_safely,
)

__all__ = [
    "CONDITION_GRAMMAR",
    "CedarPolicyEngine",
    "Condition",
    "Decision",
    "PolicyDecision",
    "PolicyEngine",
    "PolicyRequest",
    "decide_safely",
    "default_policies",
]
