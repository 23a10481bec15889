"""An upstream MCP server the example gateway federates: a small style checker.

It is a plain SDK `MCPServer` that knows nothing of toolkeeper. The gateway connects to it
over stdio (``[mcpServers.style]`` in toolkeeper.toml), pins its tool definitions, and serves
them through the same pipeline as the local tools, under the operator's declared effects.
Run it alone with ``python upstream_server.py`` (stdio).
"""

from __future__ import annotations

import re
from collections import Counter

from mcp.server.mcpserver import MCPServer

server = MCPServer("style-checker", log_level="WARNING")

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")
_COMMON = frozenset(
    (
        *("a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "in", "is"),
        *("it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "with"),
    )
)


@server.tool()
def word_count(text: str) -> dict[str, int]:
    """Count the words and sentences of a text, e.g. a manuscript's abstract."""
    sentences = [s for s in re.split(r"[.!?]+", text) if s.strip()]
    return {"words": len(_WORD.findall(text)), "sentences": len(sentences)}


@server.tool()
def suggest_keywords(text: str, limit: int = 5) -> dict[str, list[str]]:
    """Suggest keywords for a text: its most frequent words that are not common words."""
    words = [w.lower() for w in _WORD.findall(text) if w.lower() not in _COMMON and len(w) > 3]
    return {"keywords": [word for word, _ in Counter(words).most_common(limit)]}


if __name__ == "__main__":
    server.run()
