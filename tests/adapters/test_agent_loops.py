"""The README's agent loops (examples/agent_loops) run offline against the recorded vendor
responses: the model's parallel calls go through the harness and each answer carries the
call id the model gave."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FINAL = "Oslo is 4 °C and overcast; Lima is 19 °C and sunny."
LOOPS = {
    "openai_chat": "openai_chat",
    "openai_responses": "openai_responses",
    "anthropic_messages": "anthropic",
    "gemini": "gemini",
}


def recorded_call_ids(vendor: str) -> list[str]:
    first = json.loads((EXAMPLES / "recorded" / f"{vendor}.json").read_text())[0]
    if vendor == "openai_chat":
        return [c["id"] for c in first["choices"][0]["message"]["tool_calls"]]
    if vendor == "openai_responses":
        return [i["call_id"] for i in first["output"] if i["type"] == "function_call"]
    if vendor == "anthropic":
        return [b["id"] for b in first["content"] if b["type"] == "tool_use"]
    # Gemini sent no ids; its answers correlate by name and order.
    return [p["functionCall"]["name"] for p in first["candidates"][0]["content"]["parts"]]


@pytest.mark.parametrize("script", sorted(LOOPS))
def test_agent_loop_runs_offline_against_the_recording(
    script: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(EXAMPLES / "agent_loops"))
    runpy.run_path(str(EXAMPLES / "agent_loops" / f"{script}.py"), run_name="__main__")
    final, *answers = capsys.readouterr().out.strip().splitlines()
    assert final == FINAL
    assert [line.split()[0] for line in answers] == recorded_call_ids(LOOPS[script])
    assert all(line.endswith("status: succeeded") for line in answers)
    assert (tmp_path / ".toolkeeper" / "agent_loops" / "ledger.db").exists()  # their own home
