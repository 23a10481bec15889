"""Equivalence on BFCL multi-turn: every gold turn run as a Code Mode program over BFCL's own
executable API classes ends in the same state as running the same calls directly.

For each entry of ``multi_turn_base`` whose classes need nothing beyond the standard library,
two fresh sets of the entry's API instances are loaded with its initial configuration. One
runs each turn's gold calls directly (``instance.method(**arguments)``, as BFCL's checker
does); the other registers every method as a tool (its BFCL function doc imported as a
contract) and runs the turn's calls, in order, as one program through `Harness.run_code` —
every call a governed inner call. After each turn the two sets of instances must be equal,
attribute by attribute. Goal: 100% of turns.

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

SOURCE = "bfcl_eval/eval_checker/multi_turn_eval/func_source_code/"
CLASSES = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system"),
    "TwitterAPI": ("posting_api", "posting_api"),
    "MessageAPI": ("message_api", "message_api"),
    "TicketAPI": ("ticket_api", "ticket_api"),
    "TradingBot": ("trading_bot", "trading_bot"),
    "TravelAPI": ("travel_booking", "travel_booking"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control"),
}
"""Class → (its module, its function-doc file): the classes that need only the stdlib."""
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


def code_mode_harness(home: Path, entry: dict[str, Any], objects: dict[str, Any]) -> Any:
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
    entries = [json.loads(line) for line in (data / "BFCL_v4_multi_turn_base.json").open()]
    entries = [e for e in entries if set(e["involved_classes"]) <= set(CLASSES)]
    turns = equal = calls = 0
    mismatches = []
    with tempfile.TemporaryDirectory(prefix="tk-bfcl-") as tmp:
        for n, entry in enumerate(entries[: args.entries]):
            direct, coded = instances(entry), instances(entry)
            harness, names, refs = code_mode_harness(Path(tmp) / str(n), entry, coded)
            for index, turn in enumerate(answers[entry["id"]]):
                parsed = calls_of(turn)
                for name, call_args, call_kwargs in parsed:
                    # A raise is an answer too (as the program's try/except takes it).
                    with contextlib.suppress(Exception):
                        method(direct, name)(*call_args, **call_kwargs)
                sent = parsed[:-1] if args.control else parsed
                envelope = anyio.run(run_turn, harness, program(sent, names, refs))
                turns += 1
                calls += len(parsed)
                same = envelope.status is Status.SUCCEEDED and state(direct) == state(coded)
                equal += same
                if not same:
                    rejected = [
                        f"{c['function']}: {c['error']}"
                        for c in envelope.structured_content["calls"]
                        if c["status"] == "rejected"
                    ]
                    mismatches.append((entry["id"], index, envelope.status.value, rejected))
            harness.close()
    print(
        f"BFCL multi_turn_base: {len(entries[: args.entries])} entries, {turns} turns, "
        f"{calls} gold calls as governed inner calls"
    )
    print(
        f"final state equal to direct execution: {equal}/{turns} turns "
        f"({100 * equal / max(turns, 1):.1f}%, goal 100%)"
    )
    for mismatch in mismatches[:10]:
        print(f"  differs: {mismatch}")
    if mismatches:
        print(
            "(a turn whose program had a call rejected differs because the gold call breaks "
            "the function's own declared schema: the pipeline validates it, raw Python does not)"
        )


if __name__ == "__main__":
    main()
