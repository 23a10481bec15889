"""CLI conventions a script relies on: --version, exit codes, usage errors, one --format,
a closed pipe, exception groups, and how `call` reads its arguments."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from cli_support import command, environment, toolkeeper
from hypothesis import given
from hypothesis import strategies as st

from toolkeeper import Principal, Proposal, __version__, tool
from toolkeeper.cli.client import call_arguments
from toolkeeper.errors import ConfigError
from toolkeeper.runtime.harness import Harness


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite ledger with enough rows that `ledger list` writes more than a pipe holds."""
    home = tmp_path_factory.mktemp("home")
    harness = Harness(home=home)

    @tool(side_effect="none")
    def get_note(note_id: str) -> dict[str, str]:
        """Read a note."""
        return {"note_id": note_id}

    harness.register(get_note)
    for index in range(600):
        proposal = Proposal(f"c{index}", "get_note", {"note_id": f"n{index}"})
        harness.invoke_sync(proposal, principal=Principal("bob"))
    harness.close()
    return home


def test_version() -> None:
    done = toolkeeper("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"toolkeeper {__version__}")


def test_a_reader_that_closes_the_pipe_gets_no_traceback(home: Path) -> None:
    """The read end is closed before toolkeeper writes: every write fails with EPIPE, as
    when `| head -1` has read its line and gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            command("ledger", "list", "--home", str(home), "--limit", "600"),
            stdout=write,
            stderr=subprocess.PIPE,
            env=environment(),
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert done.stderr == ""
    assert done.returncode == 141


def test_ledger_list_into_head(home: Path) -> None:
    done = subprocess.run(
        f"{' '.join(command())} ledger list --home {home} --limit 600 | head -1",
        shell=True,
        capture_output=True,
        env=environment(),
        text=True,
        timeout=120,
    )
    assert done.stderr == ""
    assert len(done.stdout.splitlines()) == 1 and "req_" in done.stdout


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("ledger", "list", "--status", "bogus"), "argument --status: invalid choice: 'bogus'"),
        (("ledger", "tail", "--effect-state", "maybe"), "argument --effect-state: invalid choice"),
        (("ledger", "list", "--limit", "0"), "expected a positive whole number, got '0'"),
        (("serve", "x.toml", "--log-level", "verbose"), "argument --log-level: invalid choice"),
        (("ledger", "list", "--format", "yaml"), "invalid choice: 'yaml' (choose from text, json)"),
    ],
)
def test_usage_errors_exit_2_with_one_clear_line(
    home: Path, argv: tuple[str, ...], said: str
) -> None:
    done = toolkeeper(*argv, "--home", str(home)) if argv[0] == "ledger" else toolkeeper(*argv)
    assert done.returncode == 2
    assert said in done.stderr and "Traceback" not in done.stderr


def test_table_is_still_read_as_text(home: Path) -> None:
    text = toolkeeper("ledger", "list", "--home", str(home), "--limit", "2")
    table = toolkeeper("ledger", "list", "--home", str(home), "--limit", "2", "--format", "table")
    assert table.returncode == 0 and table.stdout == text.stdout


def test_a_wrong_url_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}/mcp"
    for argv in (("tools", "--url", url), ("call", "greet", "--url", "nonsense://x")):
        done = toolkeeper(*argv)
        assert done.returncode == 2
        assert done.stderr.startswith("toolkeeper: error: no gateway answers at")
        assert len(done.stderr.splitlines()) == 1


def test_the_no_ledger_hint_names_home_and_config(tmp_path: Path) -> None:
    done = toolkeeper("ledger", "list", cwd=tmp_path)
    assert done.returncode == 2
    assert "--home DIR" in done.stderr and "--config CONFIG" in done.stderr
    assert "demo" not in done.stderr


def test_an_import_failure_says_what_and_where(tmp_path: Path) -> None:
    (tmp_path / "broken_tools.py").write_text("def f():\n    pass\n\n\nnext(iter([]))\n")
    (tmp_path / "gateway.toml").write_text(
        'tools = ["broken_tools"]\nstdio_principal = "me"\n[principals.me]\n'
    )
    done = toolkeeper("serve", str(tmp_path / "gateway.toml"), stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "importing broken_tools failed: StopIteration (at " in done.stderr
    assert "broken_tools.py:5)" in done.stderr and "Traceback" not in done.stderr


# -- call's arguments ---------------------------------------------------------------------

_KEYS = st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=5,
)


@given(st.dictionaries(_KEYS, _JSON, max_size=4))
def test_key_value_pairs_carry_json_values(arguments: dict[str, object]) -> None:
    pairs = [f"{key}={json.dumps(value)}" for key, value in arguments.items()]
    assert call_arguments(pairs) == arguments


@given(_KEYS, st.text(min_size=1).filter(lambda t: not _parses(t)))
def test_a_value_that_is_not_json_is_a_string(key: str, text: str) -> None:
    assert call_arguments([f"{key}={text}"]) == {key: text}


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_an_object_from_text_file_or_stdin_then_pairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert call_arguments(['{"a": 1, "b": 2}', "b=3"]) == {"a": 1, "b": 3}
    (tmp_path / "args.json").write_text('{"title": "Tool Use"}')
    assert call_arguments([f"@{tmp_path / 'args.json'}", "n=5"]) == {"title": "Tool Use", "n": 5}
    monkeypatch.setattr("sys.stdin", open(tmp_path / "args.json"))  # noqa: SIM115
    assert call_arguments(["-"]) == {"title": "Tool Use"}
    assert call_arguments([]) == {}
    for bad in (["[1]"], ["{x}"], ['{"a": 1}', "loose"], [f"@{tmp_path / 'missing.json'}"]):
        with pytest.raises(ConfigError):
            call_arguments(bad)


def test_a_url_that_is_no_mcp_endpoint_is_one_line() -> None:
    """A plain web server at --url: the SDK's task groups wrap its error twice; the user
    reads one line naming the status, not "unhandled errors in a TaskGroup"."""
    server = subprocess.Popen(
        [*command()[:1], "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = server.stdout.readline().split("port ")[1].split()[0]
        done = toolkeeper("tools", "--url", f"http://127.0.0.1:{port}/mcp")
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"toolkeeper: error: http://127.0.0.1:{port}/mcp answered HTTP 501, not as an MCP "
        "endpoint; pass --url the gateway's endpoint, e.g. http://127.0.0.1:8765/mcp"
    ]


def test_ledger_tail_says_it_follows_on_stderr(home: Path) -> None:
    process = subprocess.Popen(
        command("ledger", "tail", "--home", str(home)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(),
        text=True,
    )
    try:
        assert process.stderr is not None
        said = process.stderr.readline()
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
    assert said == "following the ledger for new invocations; Ctrl-C stops\n"
    assert out == ""  # stdout carries invocations only, and none came since it started
