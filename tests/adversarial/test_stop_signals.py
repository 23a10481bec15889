"""A gateway asked to stop (SIGTERM, SIGHUP) keeps its ledger: records written behind (reads)
land before the process ends. The signal's default action used to end the process first."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from toolkeeper.ledger.sqlite import SQLiteLedger


def _call_once_then_signal(home: Path, number: int) -> int:
    subprocess.run(
        [sys.executable, "-m", "toolkeeper", "init", str(home)], check=True, capture_output=True
    )
    gateway = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper", "serve", str(home / "gateway.toml")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert gateway.stdin is not None and gateway.stdout is not None

    def send(message: dict[str, object]) -> None:
        assert gateway.stdin is not None
        gateway.stdin.write(json.dumps(message) + "\n")
        gateway.stdin.flush()

    try:
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            }
        )
        assert json.loads(gateway.stdout.readline())["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "greet", "arguments": {"name": "Ada"}},
            }
        )
        answer = json.loads(gateway.stdout.readline())
        assert answer["id"] == 2 and not answer["result"].get("isError"), answer
        gateway.send_signal(number)  # stdin stays open: the stop comes from the signal alone
        return gateway.wait(timeout=30)
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait()


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_flushes_the_ledger_then_ends_as_the_signal_would(
    tmp_path: Path, number: int
) -> None:
    status = _call_once_then_signal(tmp_path / "gw", number)
    assert status == -number  # ended by the signal itself: supervisors see 128 + signal
    ledger = SQLiteLedger(tmp_path / "gw" / ".toolkeeper" / "ledger.db")
    try:
        assert [(r.tool, r.status) for r in ledger.query()] == [("greet", "succeeded")]
    finally:
        ledger.close()
