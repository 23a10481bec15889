"""Validations per second: toolkeeper.validate_arguments against bare jsonschema and jsonschema_rs.

Run: python benchmarks/validate.py [--quick]

Four cases — a small flat schema and a large nested one, each with valid and invalid input
(already-parsed dicts, the form the libraries take) — timed in the same run. Goals:
valid input within 5x of bare jsonschema_rs `is_valid`; invalid input, with full field
errors and fixes, within 10x of bare jsonschema `list(iter_errors)`. All three check
formats (jsonschema with its FORMAT_CHECKER, jsonschema_rs with validate_formats=True).
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable, Sequence
from typing import Any

import jsonschema
import jsonschema_rs

from toolkeeper import ToolContract, validate_arguments

FLAT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city"],
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "unit": {"enum": ["celsius", "fahrenheit"], "default": "celsius"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
    },
}
FLAT_VALID = {"city": "Paris", "unit": "celsius", "days": 3}
FLAT_INVALID = {"ctiy": "Paris", "unit": "kelvin", "days": "30"}

_ADDRESS = {
    "type": "object",
    "additionalProperties": False,
    "required": ["street", "city", "country"],
    "properties": {
        "street": {"type": "string", "maxLength": 200},
        "city": {"type": "string"},
        "postcode": {"type": "string", "pattern": "^[0-9A-Z -]{3,10}$"},
        "country": {"type": "string", "enum": ["DE", "FR", "GB", "NL", "US"]},
    },
}
NESTED: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["customer", "items", "shipping"],
    "$defs": {"address": _ADDRESS},
    "properties": {
        "order_id": {"type": "string", "format": "uuid"},
        "customer": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "email"],
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "email": {"type": "string", "format": "email"},
                "tier": {"enum": ["free", "pro", "enterprise"], "default": "free"},
                "billing": {"$ref": "#/$defs/address"},
            },
        },
        "items": {
            "type": "array",
            "minItems": 1,
            "maxItems": 50,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["sku", "quantity"],
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 100},
                    "gift": {"type": "boolean", "default": False},
                    "note": {"type": ["string", "null"], "maxLength": 140},
                },
            },
        },
        "shipping": {
            "type": "object",
            "required": ["method", "address"],
            "properties": {
                "method": {"enum": ["standard", "express", "pickup"]},
                "address": {"$ref": "#/$defs/address"},
                "deliver_on": {"type": "string", "format": "date"},
            },
        },
        "coupon": {"type": "string", "maxLength": 20},
        "priority": {"type": "integer", "minimum": 0, "maximum": 9, "default": 5},
    },
}
_HOME = {"street": "1 Main St", "city": "Berlin", "postcode": "10115", "country": "DE"}
NESTED_VALID: dict[str, Any] = {
    "order_id": "123e4567-e89b-12d3-a456-426614174000",
    "customer": {"name": "Ada", "email": "ada@example.com", "billing": _HOME},
    "items": [{"sku": f"ABC-{1000 + i}", "quantity": i + 1, "note": None} for i in range(10)],
    "shipping": {"method": "express", "address": _HOME, "deliver_on": "2024-05-01"},
    "coupon": "SPRING",
}
NESTED_INVALID: dict[str, Any] = {
    "order_id": "not-a-uuid",
    "customer": {"name": "Ada", "emial": "ada@example.com", "tier": "Pro"},
    "items": [
        {"sku": "ABC-1000", "quantity": 0},
        {"sku": "abc", "quantity": "2"},
        {"sku": "ABC-1002", "quantity": 3, "colour": "red"},
    ],
    "shipping": {"method": "overnight", "address": {**_HOME, "country": "Germany"}},
    "priority": 12,
}


def per_op(fns: Sequence[Callable[[], object]], budget: float) -> list[float]:
    """Best-of-N microseconds per call for each of `fns`, timed in interleaved rounds.

    Interleaving puts every function through the same background load (the machine is
    shared), so the ratios hold even when the absolute figures drift.
    """
    timers = [timeit.Timer(fn) for fn in fns]
    numbers = []
    for timer in timers:
        number, elapsed = timer.autorange()
        numbers.append(max(1, int(number * 0.05 / max(elapsed, 1e-9))))
    best = [float("inf")] * len(fns)
    rounds = max(5, int(budget / 0.05 / len(fns)))
    for _ in range(rounds):
        for index, (timer, number) in enumerate(zip(timers, numbers, strict=True)):
            best[index] = min(best[index], timer.timeit(number) / number * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing runs")
    budget = 0.5 if parser.parse_args().quick else 2.0

    print(
        f"{'case':<18}{'toolkeeper':>12}{'jsonschema':>12}{'jsonschema_rs':>15}"
        f"{'tk/rs':>8}{'tk/js':>8}  goal"
    )
    for name, schema, valid, invalid in (
        ("flat", FLAT, FLAT_VALID, FLAT_INVALID),
        ("nested", NESTED, NESTED_VALID, NESTED_INVALID),
    ):
        for kind, row in zip(
            ("valid", "invalid"), _rows(name, schema, valid, invalid), strict=True
        ):
            tk, jsv, rsv = per_op(row, budget)
            goal = "tk/rs <= 5" if kind == "valid" else "tk/js <= 10"
            print(
                f"{name + ' ' + kind:<18}{tk:>10.2f}µs{jsv:>10.2f}µs{rsv:>13.2f}µs"
                f"{tk / rsv:>8.1f}{tk / jsv:>8.2f}  {goal}"
            )


def _rows(
    name: str, schema: dict[str, Any], valid: dict[str, Any], invalid: dict[str, Any]
) -> tuple[tuple[Callable[[], object], ...], ...]:
    """(toolkeeper, jsonschema, jsonschema_rs) callables for the valid and invalid input."""
    contract = ToolContract(id=f"bench_{name}", description="benchmark", input_schema=schema)
    js = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    rs = jsonschema_rs.Draft202012Validator(schema, validate_formats=True)
    assert validate_arguments(contract, valid).ok and js.is_valid(valid) and rs.is_valid(valid)
    assert not validate_arguments(contract, invalid).ok
    return (
        (
            lambda: validate_arguments(contract, valid),
            lambda: js.is_valid(valid),
            lambda: rs.is_valid(valid),
        ),
        (
            lambda: validate_arguments(contract, invalid),
            lambda: list(js.iter_errors(invalid)),
            lambda: list(rs.iter_errors(invalid)),
        ),
    )


if __name__ == "__main__":
    main()
