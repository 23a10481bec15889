"""What an operator sees of a running `toolkeeper serve --http`: timestamped log lines, the
upstream connections as they progress, one line per call and per refused request, and the
Prometheus metrics the ``[telemetry]`` section asks for. One real gateway process, shared."""

from __future__ import annotations

import os
import re
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

UPSTREAM = Path(__file__).parents[1] / "gateway" / "upstream_fixtures" / "tools_server.py"
TOKEN = "telemetry-test-token-5fd2a1"
WRONG_TOKEN = "wrong-token-77c1e9"

TOOLS = '''
from toolkeeper import tool


@tool(side_effect="none")
def lookup(item: str) -> dict:
    """Read one item."""
    return {"item": item}
'''

CONFIG = """
home = "{home}"
tools = ["logged_tools"]
policies = ["policy.cedar"]

[principals.alice]
tenant = "acme"
token = "{token}"

[http]
port = 0

[telemetry]
prometheus = "127.0.0.1:0"

[mcpServers.fixture]
command = "{python}"
args = ["{upstream}"]

[mcpServers.gone]
url = "http://user:pw-in-url@127.0.0.1:{closed}/mcp?key=key-in-query"
timeout = 2
"""

POLICY = '@id("t.all") permit(principal, action, resource);\n'

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR) \S+: ")


@dataclass(frozen=True)
class Served:
    lines: list[str]
    """The gateway's stderr, once it stopped."""
    metrics: str
    """What its Prometheus endpoint served after the calls."""


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _url(process: subprocess.Popen[str], log: Path) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            line = process.stdout.readline()
            if line.startswith("toolkeeper gateway listening on "):
                return line.rsplit(" ", 1)[-1].strip()
    raise AssertionError(f"the gateway did not start:\n{log.read_text()}")


async def _calls(url: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        assert not (await client.call_tool("lookup", {"item": "apples"})).is_error
        assert (await client.call_tool("lookup", {"item": 3})).is_error
    async with httpx2.AsyncClient() as http:
        refused = await http.post(url, json={}, headers={"Authorization": f"Bearer {WRONG_TOKEN}"})
        assert refused.status_code == 401


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("served")
    (directory / "logged_tools.py").write_text(TOOLS)
    (directory / "policy.cedar").write_text(POLICY)
    config = directory / "gateway.toml"
    config.write_text(
        CONFIG.format(
            home=directory / "home",
            token=TOKEN,
            python=sys.executable,
            upstream=UPSTREAM,
            closed=_closed_port(),
        )
    )
    log = directory / "serve.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolkeeper", "serve", str(config), "--http", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            text=True,
        )
        try:
            url = _url(process, log)
            anyio.run(_calls, url)
            # The gateway serves before its upstreams connect: wait for both to report.
            deadline = time.monotonic() + 30
            while not (
                "upstream fixture: connected" in (text := log.read_text())
                and "upstream gone: failed" in text
            ):
                assert time.monotonic() < deadline, text
                time.sleep(0.1)
            [metrics_url] = re.findall(r"serving Prometheus metrics on (\S+)", log.read_text())
            metrics = httpx.get(metrics_url).text
        finally:
            process.terminate()
            process.wait(timeout=15)
    yield Served(log.read_text().splitlines(), metrics)


def test_every_line_is_stamped_with_utc_time_to_the_millisecond(served: Served) -> None:
    assert served.lines
    unstamped = [line for line in served.lines if not STAMP.match(line)]
    assert unstamped == []


def test_upstream_connections_are_logged_as_they_progress(served: Served) -> None:
    progress = [line.split(": ", 1)[1] for line in served.lines if "upstreams.link" in line]
    fixture = [p for p in progress if p.startswith("upstream fixture: ")]
    command = Path(sys.executable).name
    assert fixture[0] == f"upstream fixture: connecting to {command} (stdio) (timeout 30 s)"
    assert re.fullmatch(r"upstream fixture: connected in \d+ ms, \d+ tool\(s\) listed", fixture[1])
    assert any(
        re.fullmatch(r"upstream gone: connecting to http://127\.0\.0\.1:\d+/mcp \(timeout 2 s\)", p)
        for p in progress
    ), progress
    assert any(re.match(r"upstream gone: failed after \d+ ms: ", p) for p in progress), progress
    # The URL's credentials and query never reach the log.
    text = "\n".join(served.lines)
    assert "pw-in-url" not in text and "key-in-query" not in text


def test_each_call_is_one_info_line(served: Served) -> None:
    calls = [line for line in served.lines if " INFO toolkeeper.calls: " in line]
    assert len(calls) == 2
    assert re.search(
        r"request=req_\w+ call_id=\S+ principal=acme/alice tool=lookup@0\.0\.0 "
        r"status=succeeded ms=\d+\.\d$",
        calls[0],
    )
    assert "status=rejected category=invalid_argument ms=" in calls[1]
    assert "apples" not in "\n".join(served.lines)  # an argument value


def test_a_refused_request_is_logged_without_its_token(served: Served) -> None:
    refused = [line for line in served.lines if "toolkeeper.gateway.auth" in line]
    assert len(refused) == 1
    assert refused[0].endswith(
        "refused POST /mcp from 127.0.0.1: 401, the bearer token was not accepted"
    )
    text = "\n".join(served.lines)
    assert WRONG_TOKEN not in text and TOKEN not in text


def test_the_prometheus_endpoint_counts_the_calls(served: Served) -> None:
    lines = served.metrics.splitlines()
    assert any(
        line.startswith("toolkeeper_calls_total{")
        and 'toolkeeper_status="succeeded"' in line
        and 'toolkeeper_tool="lookup"' in line
        and line.endswith(" 1.0")
        for line in lines
    ), served.metrics
    assert any(
        'error_type="invalid_argument"' in line and line.startswith("toolkeeper_calls_total{")
        for line in lines
    )
    assert 'service_name="toolkeeper"' in served.metrics
