"""The MCP gateway: serves governed tools to any MCP client and federates upstream MCP servers
behind pins, scans and policy."""
