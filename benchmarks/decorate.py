"""Seconds to apply `@tool` to N simple functions defined in a real module file.

Run: python benchmarks/decorate.py [N ...]   (default: 100 1000 10000)

The functions are written to a temporary module and imported first, so their source is on
disk as in a real catalog; only the decoration is timed. Goal (issue 8): 10,000 simple
functions in under ~2 s.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from toolkeeper import tool

FUNCTION = '''
def lookup_{i}(city: str, limit: int = 10, exact: bool | None = None) -> dict[str, int]:
    """Look up thing {i} in a city.

    Use when: the user asks about thing {i}.

    Args:
        city: The city to search.
        limit: At most this many results.
    """
    return {{"found": limit}}
'''


def functions(count: int, directory: Path) -> list[Any]:
    path = directory / f"catalog_{count}.py"
    path.write_text("".join(FUNCTION.format(i=i) for i in range(count)))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return [getattr(module, f"lookup_{i}") for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("counts", nargs="*", type=int, default=[100, 1000, 10_000])
    counts = parser.parse_args().counts
    with tempfile.TemporaryDirectory() as directory:
        for count in counts:
            defined = functions(count, Path(directory))
            started = time.perf_counter()
            for function in defined:
                tool(side_effect="none")(function)
            elapsed = time.perf_counter() - started
            each = elapsed / count * 1e6
            print(f"@tool on {count:>6} functions: {elapsed:6.2f} s ({each:.0f} µs each)")


if __name__ == "__main__":
    main()
