"""`toolkeeper schema NAME`: print a published JSON Schema."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from toolkeeper.contract.model import ToolContract
from toolkeeper.runtime.envelope import envelope_json_schema


def _contract_schema() -> dict[str, Any]:
    schema = ToolContract.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "envelope": envelope_json_schema,
    "contract": _contract_schema,
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("schema", help="print a published JSON Schema")
    parser.add_argument("name", choices=sorted(SCHEMAS), help="which schema to print")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(json.dumps(SCHEMAS[args.name](), indent=2))
    return 0
