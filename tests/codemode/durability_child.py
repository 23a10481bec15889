"""Child process of test_durability.py and benchmarks/code_mode_durability.py: runs or resumes
a Code Mode program whose every write waits on an approval, and can SIGKILL itself at a chosen
point, as a crashed process would stop.

    python durability_child.py HOME run WRITES KILL
    python durability_child.py HOME resume APPROVAL_ID KILL

Prints one JSON line: the envelope's status, approval id and request id. KILL is ``none``,
``after_answer`` (once the answer is printed) or ``in_write`` (inside the write, after its
effect is on disk and before the ledger hears of it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio

from toolkeeper import Principal, tool
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice")


def program(writes: int) -> str:
    return (
        "rows = list_rows(20)\n"
        "done = 0\n"
        f"for row in rows[:{writes}]:\n"
        "    append_line(f'row-{row}')\n"
        "    done += 1\n"
        "    print('wrote', row)\n"
        "done"
    )


def harness(home: Path, kill: str) -> Harness:
    h = Harness(home=home)
    effects = home / "effects.txt"

    @tool(side_effect="none")
    def list_rows(n: int) -> list[int]:
        """Row numbers."""
        return list(range(n))

    @tool(side_effect="committing", version="1.0.0")
    def append_line(line: str) -> dict[str, Any]:
        """Append one line to the effects file."""
        with effects.open("a") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
        if kill == "in_write":
            os.kill(os.getpid(), signal.SIGKILL)
        return {"appended": line}

    h.register(list_rows)
    h.register(append_line)
    return h


def main() -> None:
    home, mode, target, kill = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    h = harness(home, kill)

    async def act() -> Any:
        if mode == "run":
            return await h.run_code(program(int(target)), principal=ALICE)
        return await h.resume(target, principal=ALICE)

    envelope = anyio.run(act)
    meta = envelope.execution_meta
    answer = {
        "status": envelope.status.value,
        "approval_id": meta.approval_id if meta else None,
        "request_id": meta.request_id if meta else None,
        "value": (envelope.structured_content or {}).get("value"),
    }
    print(json.dumps(answer), flush=True)
    if kill == "after_answer":
        os.kill(os.getpid(), signal.SIGKILL)
    h.close()


if __name__ == "__main__":
    main()
