"""`toolkeeper lint` reads a Python file by its path: its contracts, ``@tool`` functions and
the tools registered on its harness (issue 11, "what hurt" 4)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from toolkeeper.cli import main
from toolkeeper.errors import CatalogError
from toolkeeper.lint.targets import load_target

TOOLS = '''
from toolkeeper import Harness, ToolContract, tool
from helpers import CITY_HELP


@tool(side_effect="none")
def get_weather(city: str) -> dict:
    """Current weather for a city, e.g. "Oslo".

    Args:
        city: CITY_HELP
    """
    return {"city": city}


def _forecast(city: str) -> dict:
    """Seven-day forecast for a city, registered on the harness only."""
    return {"city": city}


RATE = ToolContract(id="get_rate", description="Read the exchange rate of two currencies.")
harness = Harness()
harness.register(tool(side_effect="none", id="get_forecast")(_forecast))
'''


@pytest.fixture
def module_file(tmp_path: Path) -> Path:
    (tmp_path / "helpers.py").write_text('CITY_HELP = "City name"\n')
    path = tmp_path / "weather-tools.py"
    path.write_text(textwrap.dedent(TOOLS))
    return path


def test_a_python_file_yields_its_tools_functions_and_harness(module_file: Path) -> None:
    catalog = load_target(module_file)
    assert sorted(c.id for c in catalog.contracts) == ["get_forecast", "get_rate", "get_weather"]
    assert catalog.sources["get_weather@0.0.0"] == f"{module_file}:get_weather"
    assert catalog.sources["get_forecast@0.0.0"] == f"{module_file}:harness"
    assert catalog.problems == ()


def test_the_cli_lints_a_python_file_by_path(
    module_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # get_rate declares no side effect (TK501) and so needs a version (TK601).
    assert main(["lint", str(module_file), "--select", "TK5,TK6"]) == 1
    out = capsys.readouterr().out
    assert f"get_rate@0.0.0  ({module_file}:RATE)" in out
    assert out.count("error   TK501") == out.count("error   TK601") == 1  # get_rate only
    assert main(["lint", str(module_file), "--select", "TK506"]) == 0
    assert "@tool(timeout=30, ...)" in capsys.readouterr().out


def test_a_module_that_fails_to_import_is_a_load_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no database in CI')\n")
    with pytest.raises(CatalogError, match=r"importing .*broken.py failed: RuntimeError: no "):
        load_target(broken)
    assert main(["lint", str(broken)]) == 2
    assert "no database in CI" in capsys.readouterr().err
    assert not [name for name in sys.modules if "toolkeeper_lint_broken" in name]


def test_a_module_without_tools_says_what_it_looks_for(tmp_path: Path) -> None:
    empty = tmp_path / "empty.py"
    empty.write_text("VALUE = 1\n")
    with pytest.raises(CatalogError, match=r"defines no ToolContract, @toolkeeper\.tool function"):
        load_target(empty)


def test_a_module_path_with_only_a_harness_is_read_through_its_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tk_lint_harness_only.py").write_text(
        textwrap.dedent(
            '''
            from toolkeeper import Harness, tool
            harness = Harness()

            def _status() -> dict:
                """Read the service status: up, degraded or down."""
                return {}

            harness.register(tool(side_effect="none", id="get_status")(_status))
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    catalog = load_target("tk_lint_harness_only")
    assert [c.id for c in catalog.contracts] == ["get_status"]


def test_a_data_target_is_read_as_before(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="does not exist"):
        load_target(tmp_path / "missing.json")
