#!/usr/bin/env python3
"""Record the tool definitions real MCP servers list, for the benign half of
the poisoning corpus (tests/corpora/poison_benign.jsonl).

The servers are installed by hand into a scratch directory, never into the
repository (they are not test dependencies; their definitions are what we
keep):

    mkdir -p /tmp/harvest/npm && cd /tmp/harvest/npm && npm init -y
    npm install --ignore-scripts @modelcontextprotocol/server-sequential-thinking ...   # NPM below
    python3 -m venv /tmp/harvest/py && /tmp/harvest/py/bin/pip install mcp-server-fetch ...  # PYPI below
    python3 -m venv /tmp/harvest/py1 && /tmp/harvest/py1/bin/pip install 'mcp<2' mcp-server-sqlite ...

(the second virtualenv for the servers written against the 1.x Python SDK,
which the 2.x SDK the others need no longer runs)

    python3 tests/corpora/harvest.py --npm /tmp/harvest/npm --py /tmp/harvest/py \
        --py /tmp/harvest/py1 > tests/corpora/poison_benign.jsonl

Each server is started over stdio with fake credentials (enough for every
server here to list its tools without reaching the network), sent
`initialize`, `notifications/initialized` and `tools/list` (following
`nextCursor`), and stopped. One JSON line per tool:
`{"source": "<package>@<version>", "expect": "clean", "why": ..., "split": ..., "tool": {...}}`
(`split`: a fixed third, by a hash of package and tool name, is "heldout").
A server that does not answer within the timeout is skipped with a note on
stderr, so the corpus is what could be recorded, not what was hoped for.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

FAKE = {
    # Shapes servers check at start-up; none of these is a real credential.
    "GITHUB_PERSONAL_ACCESS_TOKEN": "fake-token-for-listing-tools",
    "GITLAB_PERSONAL_ACCESS_TOKEN": "fake-token-for-listing-tools",
    "GITLAB_API_URL": "http://127.0.0.1:9/api/v4",
    "SLACK_BOT_TOKEN": "fake-token-for-listing-tools",
    "SLACK_TEAM_ID": "T00000000",
    "BRAVE_API_KEY": "fake-key-for-listing-tools",
    "GOOGLE_MAPS_API_KEY": "fake-key-for-listing-tools",
    "EVERART_API_KEY": "fake-key-for-listing-tools",
    "AWS_ACCESS_KEY_ID": "fake-id-for-listing-tools",
    "AWS_SECRET_ACCESS_KEY": "fake-secret-for-listing-tools",
    "AWS_REGION": "us-east-1",
    "FIRECRAWL_API_KEY": "fc-fake-key-for-listing-tools",
    "TAVILY_API_KEY": "tvly-fake-key-for-listing-tools",
    "EXA_API_KEY": "fake-key-for-listing-tools",
    "SUPABASE_ACCESS_TOKEN": "fake-token-for-listing-tools",
    "NOTION_TOKEN": "fake-token-for-listing-tools",
    "OPENAPI_MCP_HEADERS": "{}",
    "PUPPETEER_SKIP_DOWNLOAD": "1",
    "QDRANT_URL": "http://127.0.0.1:9",
    "COLLECTION_NAME": "docs",
    "NEO4J_URI": "bolt://127.0.0.1:9",
    "NEO4J_USERNAME": "neo4j",
    "NEO4J_PASSWORD": "fake-password-for-listing-tools",
    "JIRA_URL": "https://example.atlassian.net",
    "JIRA_USERNAME": "me@example.com",
    "JIRA_API_TOKEN": "fake-token-for-listing-tools",
    "CONFLUENCE_URL": "https://example.atlassian.net/wiki",
    "CONFLUENCE_USERNAME": "me@example.com",
    "CONFLUENCE_API_TOKEN": "fake-token-for-listing-tools",
    "MYSQL_HOST": "127.0.0.1",
    "MYSQL_PORT": "9",
    "MYSQL_USER": "root",
    "MYSQL_PASS": "fake-password-for-listing-tools",
    "MYSQL_DB": "app",
    "MDB_MCP_CONNECTION_STRING": "mongodb://127.0.0.1:9/app",
    "ES_URL": "http://127.0.0.1:9",
    "ES_API_KEY": "fake-key-for-listing-tools",
    "STRIPE_SECRET_KEY": "sk_test_fake_for_listing_tools",
    "AIRTABLE_API_KEY": "fake-key-for-listing-tools",
    "REDIS_URL": "redis://127.0.0.1:9",
    "HEROKU_API_KEY": "fake-key-for-listing-tools",
    "CIRCLECI_TOKEN": "fake-token-for-listing-tools",
    "PRIVATE_APP_ACCESS_TOKEN": "fake-token-for-listing-tools",
    "SENTRY_ACCESS_TOKEN": "fake-token-for-listing-tools",
    "UPSTASH_EMAIL": "me@example.com",
    "UPSTASH_API_KEY": "fake-key-for-listing-tools",
    "BROWSERBASE_API_KEY": "fake-key-for-listing-tools",
    "BROWSERBASE_PROJECT_ID": "fake-project",
    "GEMINI_API_KEY": "fake-key-for-listing-tools",
}

# (package as installed, how to start it: a bin name in node_modules/.bin or
# the venv's bin, extra arguments; {tmp} is a scratch directory per server)
NPM = [
    ("@modelcontextprotocol/server-everything", "mcp-server-everything", []),
    ("@modelcontextprotocol/server-filesystem", "mcp-server-filesystem", ["{tmp}"]),
    ("@modelcontextprotocol/server-memory", "mcp-server-memory", []),
    ("@modelcontextprotocol/server-sequential-thinking", "mcp-server-sequential-thinking", []),
    ("@modelcontextprotocol/server-github", "mcp-server-github", []),
    ("@modelcontextprotocol/server-gitlab", "mcp-server-gitlab", []),
    ("@modelcontextprotocol/server-slack", "mcp-server-slack", []),
    ("@modelcontextprotocol/server-postgres", "mcp-server-postgres", ["postgresql://127.0.0.1:9/db"]),
    ("@modelcontextprotocol/server-brave-search", "mcp-server-brave-search", []),
    ("@modelcontextprotocol/server-google-maps", "mcp-server-google-maps", []),
    ("@modelcontextprotocol/server-puppeteer", "mcp-server-puppeteer", []),
    ("@modelcontextprotocol/server-everart", "mcp-server-everart", []),
    ("@modelcontextprotocol/server-aws-kb-retrieval", "mcp-server-aws-kb-retrieval", []),
    ("@playwright/mcp", "playwright-mcp", []),
    ("@wonderwhy-er/desktop-commander", "desktop-commander", []),
    ("@notionhq/notion-mcp-server", "notion-mcp-server", []),
    ("@upstash/context7-mcp", "context7-mcp", []),
    ("firecrawl-mcp", "firecrawl-mcp", []),
    ("tavily-mcp", "tavily-mcp", []),
    ("exa-mcp-server", "exa-mcp-server", []),
    ("@antv/mcp-server-chart", "mcp-server-chart", []),
    ("mcp-server-kubernetes", "mcp-server-kubernetes", []),
    ("@supabase/mcp-server-supabase", "mcp-server-supabase", []),
    ("mcp-server-code-runner", "mcp-server-code-runner", []),
    ("@benborla29/mcp-server-mysql", "mcp-server-mysql", []),
    ("mongodb-mcp-server", "mongodb-mcp-server", []),
    ("@elastic/mcp-server-elasticsearch", "mcp-server-elasticsearch", []),
    ("@stripe/mcp", "mcp", ["--tools=all", "--api-key=sk_test_fake_for_listing_tools"]),
    ("airtable-mcp-server", "airtable-mcp-server", []),
    ("@kimtaeyoon83/mcp-server-youtube-transcript", "mcp-server-youtube-transcript", []),
    ("@executeautomation/playwright-mcp-server", "playwright-mcp-server", []),
    ("@modelcontextprotocol/server-redis", "mcp-server-redis", ["redis://127.0.0.1:9"]),
    ("mcp-server-commands", "mcp-server-commands", []),
    ("@heroku/mcp-server", "heroku-mcp-server", []),
    ("@kazuph/mcp-taskmanager", "mcp-taskmanager", []),
    ("@circleci/mcp-server-circleci", "mcp-server-circleci", []),
    ("@hubspot/mcp-server", "mcp-hubspot", []),
    ("@sentry/mcp-server", "sentry-mcp", ["--access-token=fake-token-for-listing-tools"]),
    ("@upstash/mcp-server", "mcp-server", ["run", "me@example.com", "fake-key-for-listing-tools"]),
    ("@browserbasehq/mcp-server-browserbase", "mcp-server-browserbase", []),
]
PYPI = [
    ("mcp-server-fetch", "mcp-server-fetch", []),
    ("mcp-server-sqlite", "mcp-server-sqlite", ["--db-path", "{tmp}/db.sqlite"]),
    ("mcp-server-time", "mcp-server-time", []),
    ("mcp-server-git", "mcp-server-git", ["--repository", "{tmp}"]),
    ("mcp-server-qdrant", "mcp-server-qdrant", []),
    ("duckduckgo-mcp-server", "duckduckgo-mcp-server", []),
    ("arxiv-mcp-server", "arxiv-mcp-server", ["--storage-path", "{tmp}"]),
    ("mcp-server-calculator", "mcp-server-calculator", []),
    ("mcp-neo4j-cypher", "mcp-neo4j-cypher", []),
    ("markitdown-mcp", "markitdown-mcp", []),
    ("mcp-atlassian", "mcp-atlassian", []),
]


def npm_version(root: Path, package: str) -> str | None:
    try:
        return json.loads((root / "node_modules" / package / "package.json").read_text())["version"]
    except (OSError, KeyError, ValueError):
        return None


def py_version(venv: Path, package: str) -> str | None:
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "show", package],
                         capture_output=True, text=True, timeout=60)
    for line in out.stdout.splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    return None


class Peer:
    """A stdio MCP server and a line reader with a deadline."""

    def __init__(self, cmd: list[str], env: dict, cwd: str):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=cwd, text=True,
                                     start_new_session=True)
        self.lines: list[str] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()

    def send(self, msg: dict) -> None:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def answer(self, id_: int, timeout: float) -> dict:
        with self.cond:
            while True:
                for i, line in enumerate(self.lines):
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        continue
                    if msg.get("id") == id_ and ("result" in msg or "error" in msg):
                        del self.lines[: i + 1]
                        return msg
                if not self.cond.wait(timeout):
                    raise TimeoutError(f"no answer to request {id_}")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except OSError:
            pass
        self.proc.wait(5)


def list_tools(cmd: list[str], timeout: float) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [c.replace("{tmp}", tmp) for c in cmd]
        if "mcp-server-git" in cmd[0]:
            subprocess.run(["git", "init", "-q", tmp], check=True)
        peer = Peer(cmd, {**os.environ, **FAKE}, tmp)
        try:
            peer.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "mcp-warden-harvest", "version": "1"}}})
            peer.answer(1, timeout)
            peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            tools, cursor, n = [], None, 2
            while True:
                params = {"cursor": cursor} if cursor else {}
                peer.send({"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": params})
                result = peer.answer(n, timeout).get("result") or {}
                tools += result.get("tools", [])
                cursor, n = result.get("nextCursor"), n + 1
                if not cursor:
                    return tools
        finally:
            peer.stop()


def split(source: str, name: str) -> str:
    """A fixed third set aside (held out): no detector is tuned on it. Keyed
    by package and tool name, not version, so a re-harvest keeps the split."""
    key = f"{source.rsplit('@', 1)[0]}:{name}"
    return "heldout" if int(hashlib.sha256(key.encode()).hexdigest(), 16) % 3 == 0 else "tune"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--npm", type=Path, action="append", default=[], help="a directory with node_modules")
    ap.add_argument("--py", type=Path, action="append", default=[], help="a virtualenv")
    ap.add_argument("--timeout", type=float, default=30)
    args = ap.parse_args()
    args.npm, args.py = [p.resolve() for p in args.npm], [p.resolve() for p in args.py]
    servers = []
    for package, bin_name, extra in NPM:
        root = next((r for r in args.npm if (r / "node_modules" / ".bin" / bin_name).exists()), None)
        if root is None:
            print(f"harvest: {package} not installed, skipped", file=sys.stderr)
            continue
        servers.append((f"{package}@{npm_version(root, package)}",
                        [str(root / "node_modules" / ".bin" / bin_name), *extra]))
    for package, bin_name, extra in PYPI:
        venv = next((v for v in args.py if (v / "bin" / bin_name).exists()), None)
        if venv is None:
            print(f"harvest: {package} not installed, skipped", file=sys.stderr)
            continue
        servers.append((f"{package}@{py_version(venv, package)}", [str(venv / "bin" / bin_name), *extra]))
    total = 0
    for source, cmd in servers:
        try:
            tools = list_tools(cmd, args.timeout)
        except (TimeoutError, OSError, subprocess.SubprocessError) as e:
            print(f"harvest: {source}: {e}, skipped", file=sys.stderr)
            continue
        for tool in sorted(tools, key=lambda t: t.get("name", "")):
            print(json.dumps({"source": source, "expect": "clean",
                              "why": f"listed by {source.rsplit('@', 1)[0]} as installed from its registry",
                              "split": split(source, tool.get("name", "")),
                              "tool": tool}, ensure_ascii=False, sort_keys=True))
        print(f"harvest: {source}: {len(tools)} tools", file=sys.stderr)
        total += len(tools)
    print(f"harvest: {total} tools from {len(servers)} servers", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
