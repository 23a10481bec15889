"""The full Berkeley Function Calling Leaderboard data, for tests that read every entry.

The `bfcl-eval` wheel on PyPI carries the data files (Apache-2.0). Installing it would pull
in its evaluation stack (torch among it), so tests take the data from an installed copy when
there is one, and otherwise fetch the wheel alone (`pip download --no-deps`, from the
registry pip already uses) once into a cache folder. tests/data/bfcl holds a small vendored
sample for the tests that need only that.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path

VERSION = "2026.3.23"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toolkeeper-tests"


@cache
def bfcl_data_dir() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is not None and spec.submodule_search_locations:
        installed = Path(next(iter(spec.submodule_search_locations))) / "data"
        if installed.is_dir():
            return installed
    target = CACHE / f"bfcl_eval-{VERSION}" / "data"
    if (target / "possible_answer").is_dir():
        return target
    with extracted_wheel("bfcl_eval/data/") as tmp:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():  # another test process may have finished first
            (tmp / "bfcl_eval" / "data").rename(target)
    return target


@contextlib.contextmanager
def extracted_wheel(prefix: str) -> Iterator[Path]:
    """A temporary folder in the cache holding the wheel's members under `prefix`: the wheel
    is fetched alone (`pip download --no-deps`), never installed."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--quiet",
                "--dest",
                tmp,
                f"bfcl-eval=={VERSION}",
            ],
            check=True,
        )
        [wheel] = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tmp, [m for m in archive.namelist() if m.startswith(prefix)])
        yield Path(tmp)
