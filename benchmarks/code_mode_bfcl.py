"""Equivalence on BFCL multi-turn: every gold turn run as a Code Mode program over BFCL's own
executable API classes ends in the same state as running the same calls directly through the
governed pipeline.

For each entry of ``multi_turn_base`` (all 200: MathAPI needs ``mpmath``, which the ``bench``
extra installs), three fresh sets of the entry's API instances are loaded with its initial
configuration. Each set's methods are registered as tools (their BFCL function docs imported
as contracts) in a harness of its own:

- *direct*: each turn's gold calls, one `Harness.invoke` each, in order — a governed call
  per gold call, as a model calling the tools natively would make them;
- *code*: the turn's calls, in order, as one program through `Harness.run_code` — every call
  a governed inner call;
- *raw*: the calls on the instances themselves (``instance.method(**arguments)``, as BFCL's
  checker runs them), no pipeline.

After each turn *code* must equal *direct*, attribute by attribute: that is the goal, 100% of
turns, like for like (both validate each call against the declared schema). The script also
counts the turns where *direct* differs from *raw*: gold calls that break the function's own
declared schema, which raw Python runs and the pipeline refuses (see docs/code-mode.md).

The executable classes ship in the `bfcl-eval` wheel; like tests/bfcl_data.py, the wheel is
fetched alone (``pip download --no-deps``) once into a cache folder, never installed.

    python benchmarks/code_mode_bfcl.py [--entries 200] [--control]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import importlib
import inspect
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from bfcl_data import CACHE, VERSION, bfcl_data_dir, extracted_wheel  # noqa: E402
from toolkeeper import Principal, Status  # noqa: E402
from toolkeeper.codemode.sdk import python_names  # noqa: E402
from toolkeeper.importers.formats import from_bfcl_function  # noqa: E402
from toolkeeper.policy import CedarPolicyEngine  # noqa: E402
from toolkeeper.runtime.harness import Harness  # noqa: E402
from toolkeeper.runtime.invocation import Proposal  # noqa: E402

SOURCE = "bfcl_eval/eval_checker/multi_turn_eval/func_source_code/"
CLASSES = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system"),
    "TwitterAPI": ("posting_api", "posting_api"),
    "MessageAPI": ("message_api", "message_api"),
    "TicketAPI": ("ticket_api", "ticket_api"),
    "TradingBot": ("trading_bot", "trading_bot"),
    "TravelAPI": ("travel_booking", "travel_booking"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control"),
    "MathAPI": ("math_api", "math_api"),
}
"""Class → (its module, its function-doc file). MathAPI imports ``mpmath`` (the ``bench``
extra); the others need only the standard library."""
ALLOW_ALL = """
@id("bench.allow_all")
permit (principal, action == Toolkeeper::Action::"invoke", resource);
"""
ME = Principal("bfcl")


def executable_classes() -> Path:
    """The wheel's executable API classes, extracted once into the cache."""
    target = CACHE / f"bfcl_eval-{VERSION}-source"
    if (target / SOURCE).is_dir():
        return target
    with extracted_wheel(SOURCE) as tmp:
        # Only the classes are taken: the packages above them become plain namespaces.
        for package in (
            "bfcl_eval",
            "bfcl_eval/eval_checker",
            "bfcl_eval/eval_checker/multi_turn_eval",
        ):
            Path(tmp, package, "__init__.py").write_text("")
        target.mkdir(parents=True, exist_ok=True)
        if not (target / "bfcl_eval").exists():
            Path(tmp, "bfcl_eval").rename(target / "bfcl_eval")
    return target


def instances(entry: dict[str, Any]) -> dict[str, Any]:
    made = {}
    for name in entry["involved_classes"]:
        module = importlib.import_module(SOURCE.replace("/", ".") + CLASSES[name][0])
        instance = getattr(module, name)()
        config = copy.deepcopy(entry["initial_config"].get(name, {}))
        if hasattr(instance, "_load_scenario"):  # MathAPI keeps no state to load
            instance._load_scenario(config, long_context=False)
        made[name] = instance
    return made


def calls_of(turn: list[str]) -> list[tuple[str, list[Any], dict[str, Any]]]:
    parsed = []
    for text in turn:
        node = ast.parse(text, mode="eval").body
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        parsed.append((node.func.id, args, kwargs))
    return parsed


def method(objects: dict[str, Any], name: str) -> Any:
    for instance in objects.values():
        if hasattr(instance, name):
            return getattr(instance, name)
    raise LookupError(name)


def state(objects: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What BFCL's state checker compares: each instance's public attributes (its classes
    define `__eq__` for the objects they nest, timestamps aside)."""
    return {
        name: {k: v for k, v in vars(o).items() if not k.startswith("_")}
        for name, o in objects.items()
    }


def governed_harness(home: Path, entry: dict[str, Any], objects: dict[str, Any]) -> Any:
    """A harness whose tools are `objects`' methods, each contract imported from its BFCL
    function doc; with the SDK's Python names and each tool's ref."""
    harness = Harness(
        home=home, policy=CedarPolicyEngine(policies=ALLOW_ALL, include_defaults=False)
    )
    contracts = []
    docs = bfcl_data_dir() / "multi_turn_func_doc"
    for name in entry["involved_classes"]:
        for line in (docs / f"{CLASSES[name][1]}.json").open():
            doc = json.loads(line)
            contract = from_bfcl_function(doc, side_effect="reversible", version="1.0.0")
            bound = getattr(objects[name], doc["name"])
            harness.register(contract, executor=_executor(bound))
            contracts.append(contract)
    return harness, python_names(contracts), {c.id: c.ref for c in contracts}


def _executor(bound: Any) -> Any:
    def run(**arguments: Any) -> Any:
        return bound(**arguments)

    return run


def program(
    turn: list[tuple[str, list[Any], dict[str, Any]]], names: dict[str, str], refs: dict[str, str]
) -> str:
    lines = []
    for name, args, kwargs in turn:
        parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        call = f"{names[refs[name]]}({', '.join(parts)})"
        # A gold call may fail by design (BFCL's APIs answer errors as values or raise):
        # the direct side swallows a raise, so the program does too.
        lines.append(f"try:\n    {call}\nexcept Exception as e:\n    print('error', e)")
    return "\n".join(lines) or "None"


async def run_turn(harness: Harness, text: str) -> Any:
    return await harness.run_code(text, principal=ME)


async def invoke_turn(
    harness: Harness,
    objects: dict[str, Any],
    turn: list[tuple[str, list[Any], dict[str, Any]]],
    refs: dict[str, str],
) -> list[Any]:
    """Each gold call as one governed call, in order; their envelopes."""
    envelopes = []
    for number, (name, args, kwargs) in enumerate(turn):
        # A positional gold argument is named as the method names it.
        arguments = inspect.signature(method(objects, name)).bind(*args, **kwargs).arguments
        # A copy: an API keeps the lists it is given (a tweet's mentions), and the raw side
        # holds the parsed ones.
        proposal = Proposal(f"gold-{number}", refs[name], copy.deepcopy(dict(arguments)))
        envelopes.append(await harness.invoke(proposal, principal=ME))
    return envelopes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200)
    parser.add_argument(
        "--control",
        action="store_true",
        help="leave each turn's last call out of the program: the comparison must then fail "
        "for every turn whose last call changes state (shows the check can fail)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(executable_classes()))
    data = bfcl_data_dir()
    answers = {
        json.loads(line)["id"]: json.loads(line)["ground_truth"]
        for line in (data / "possible_answer" / "BFCL_v4_multi_turn_base.json").open()
    }
    every = [json.loads(line) for line in (data / "BFCL_v4_multi_turn_base.json").open()]
    entries = [e for e in every if set(e["involved_classes"]) <= set(CLASSES)]
    turns = equal = calls = raw_differs = 0
    mismatches = []
    schema_breaks = []
    with tempfile.TemporaryDirectory(prefix="tk-bfcl-") as tmp:
        for n, entry in enumerate(entries[: args.entries]):
            raw, direct, coded = instances(entry), instances(entry), instances(entry)
            governed, _, _ = governed_harness(Path(tmp) / f"{n}-direct", entry, direct)
            harness, names, refs = governed_harness(Path(tmp) / f"{n}-code", entry, coded)
            for index, turn in enumerate(answers[entry["id"]]):
                parsed = calls_of(turn)
                for name, call_args, call_kwargs in parsed:
                    # A raise is an answer too (as the program's try/except takes it).
                    with contextlib.suppress(Exception):
                        method(raw, name)(*call_args, **call_kwargs)
                envelopes = anyio.run(invoke_turn, governed, direct, parsed, refs)
                sent = parsed[:-1] if args.control else parsed
                envelope = anyio.run(run_turn, harness, program(sent, names, refs))
                turns += 1
                calls += len(parsed)
                same = envelope.status is Status.SUCCEEDED and state(direct) == state(coded)
                equal += same
                if not same:
                    mismatches.append((entry["id"], index, envelope.status.value))
                if state(raw) != state(direct):
                    raw_differs += 1
                    refused = [
                        f"{gold}: {e.error.category.value}: {e.error.message[:120]}"
                        for gold, e in zip(turn, envelopes, strict=True)
                        if e.error is not None and e.error.category.value == "invalid_argument"
                    ]
                    schema_breaks.append((entry["id"], index, refused))
            governed.close()
            harness.close()
    print(
        f"BFCL multi_turn_base: {len(entries[: args.entries])} entries "
        f"({len(every) - len(entries)} left out: a class not in CLASSES), {turns} turns, "
        f"{calls} gold calls, each as a governed call and as a governed inner call"
    )
    print(
        f"final state, Code Mode equal to direct governed calls: {equal}/{turns} turns "
        f"({100 * equal / max(turns, 1):.1f}%, goal 100%)"
    )
    for mismatch in mismatches[:10]:
        print(f"  differs: {mismatch}")
    print(
        f"final state, direct governed calls differing from raw Python on the instances: "
        f"{raw_differs}/{turns} turns (a gold call that breaks its function's declared "
        "schema: raw Python runs it, the pipeline refuses it)"
    )
    for broken in schema_breaks[:10]:
        print(f"  raw differs: {broken}")


if __name__ == "__main__":
    main()
