"""Running `toolkeeper` as a user does: a real subprocess, its own stdout and stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[2] / "src"


def environment(**extra: str) -> dict[str, str]:
    """This interpreter's environment with this checkout's toolkeeper first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("TOOLKEEPER_TOKEN", None)
    env.pop("TOOLKEEPER_URL", None)
    env.update(extra)
    return env


def command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "toolkeeper", *argv]


def toolkeeper(
    *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None, **options: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(*argv),
        cwd=cwd,
        env=env or environment(),
        capture_output=True,
        text=True,
        timeout=120,
        **options,
    )
