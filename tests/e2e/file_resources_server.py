"""A real MCP server (the official Python SDK's MCPServer, over stdio)
serving `file://` resources from memory, as a filesystem-backed server
lists them: for the tests of path rules over `file://` URIs. Nothing is
read from disk.

    file:///srv/public/readme.txt    "public readme"
    file:///srv/secrets/db.key       "SECRET-DB-KEY"
    file:///srv/ops/runbook.md       "ops runbook"
"""
from __future__ import annotations

from mcp.server.mcpserver import MCPServer

FILES = {
    "file:///srv/public/readme.txt": "public readme",
    "file:///srv/secrets/db.key": "SECRET-DB-KEY",
    "file:///srv/ops/runbook.md": "ops runbook",
}

server = MCPServer("file-resources")


def serve(uri: str, text: str) -> None:
    @server.resource(uri, name=uri.rsplit("/", 1)[-1], mime_type="text/plain")
    def read() -> str:
        return text


for uri, text in FILES.items():
    serve(uri, text)

if __name__ == "__main__":
    server.run("stdio")
