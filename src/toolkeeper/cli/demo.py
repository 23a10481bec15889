"""`toolkeeper demo [NAME]`: run a shipped scenario from `examples/scenarios/` with a trace.

The demo keeps its state in ``.toolkeeper/demo`` (not ``.toolkeeper`` itself): its files
(its own manuscript store among them) must never meet those of a gateway or an example
running from the same directory."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from types import ModuleType

from toolkeeper.errors import ConfigError

DEMO_HOME = ".toolkeeper/demo"

# name → (module, keyword arguments for its run())
SCENARIOS: dict[str, tuple[str, dict[str, str]]] = {
    "manuscript_metadata": ("manuscript_metadata", {}),
    "manuscript_metadata_timeout": ("manuscript_metadata", {"variant": "timeout"}),
    "task2048": ("task2048", {}),
    "code_mode": ("code_mode", {}),
}


def scenario_dirs() -> list[Path]:
    """Where scenarios live: ./examples (a checkout), then beside the installed package."""
    package_root = Path(__file__).resolve().parents[3]
    return [Path.cwd() / "examples" / "scenarios", package_root / "examples" / "scenarios"]


def load_scenario(module_name: str) -> ModuleType:
    for directory in scenario_dirs():
        path = directory / f"{module_name}.py"
        if path.exists():
            spec = importlib.util.spec_from_file_location(f"toolkeeper_demo_{module_name}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    searched = ", ".join(str(d) for d in scenario_dirs())
    raise ConfigError(
        f"scenario file {module_name}.py not found in {searched}; run from a toolkeeper "
        "checkout (the examples/ folder ships with the source)",
        key="NAME",
        value=module_name,
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("demo", help="run a shipped scenario with a readable trace")
    parser.add_argument(
        "name",
        nargs="?",
        default="manuscript_metadata",
        choices=sorted(SCENARIOS),
        help="scenario to run (default manuscript_metadata)",
    )
    parser.add_argument("--home", default=DEMO_HOME, help=f"state directory (default {DEMO_HOME})")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    module_name, options = SCENARIOS[args.name]
    print(f"toolkeeper demo {args.name} (ledger in {args.home}/ledger.db)")
    load_scenario(module_name).run(Path(args.home), print, **options)
    return 0
