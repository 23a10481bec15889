"""Upstream MCP servers behind the gateway: their configuration, the link to each, the pins
that hold their tool definitions, the assessment of each tool and the federation of all."""
