"""An offline stand-in for a vendor's HTTP API, so the agent loops here run without a key or
a network: each request the SDK sends is answered with the next response recorded in
examples/recorded/<vendor>.json, and the request bodies are kept for inspection."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

RECORDED = Path(__file__).resolve().parent.parent / "recorded"


class Replay:
    """Serves one vendor's recorded responses, in order, through a mock HTTP transport."""

    def __init__(self, vendor: str) -> None:
        self.responses: list[Any] = json.loads((RECORDED / f"{vendor}.json").read_text())
        self.requests: list[dict[str, Any]] = []

    def client(self, http: ModuleType) -> Any:
        """A ``Client`` of `http` (httpx, or httpx2 for SDKs built on it) that replays."""

        def answer(request: Any) -> Any:
            self.requests.append(json.loads(request.content))
            if len(self.requests) > len(self.responses):
                return http.Response(400, json={"error": {"message": "no more recordings"}})
            return http.Response(200, json=self.responses[len(self.requests) - 1])

        return http.Client(transport=http.MockTransport(answer))
