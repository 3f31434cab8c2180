"""Helpers for the hardening, fault-injection and soak tests
(import: ``from hardening_helpers import ...``).

    ROGUE_FIXTURE, rogue_stdio()        the misbehaving stdio upstream
    ROGUE_POLICY                        its policy: a call timeout, an alias, an argument rule
    MANY_PER_CALLER                     facade flags lifting the per-caller session share
    rss_kb(pid), fd_count(pid)          a process's resident memory / open fds, from /proc
    children_of(pid)                    direct child pids, from /proc
    pid_alive(pid)
    sse_events(raw: bytes)              a WHATWG-conformant SSE parser (CR, LF and CRLF
                                        all end a line, as in real SDK clients)
    post_raw(url, body, headers, timeout)  one POST on its own connection
    messages_of(resp)                   JSON-RPC messages of a response, parsed the strict way
    Ledger, one_request(s, ledger, method, params)
                                        send a request, file what came back (ok, error kinds,
                                        lost, duplicated); sent == answered is the invariant
"""
from __future__ import annotations

import json
import os
import sys
import threading
from collections import Counter
from pathlib import Path

import httpx

from conftest import TESTS_DIR
from helpers import RawMcp
from warden_helpers import policy_doc

ROGUE_FIXTURE = TESTS_DIR / "fixtures" / "rogue_fixture.py"
CALL_TIMEOUT = 2      # hang, wedge and echo (`say`)
PROFILE_TIMEOUT = 10  # every other tool: long enough that a broken link shows as -32603, not -32007
ROGUE_TOOLS = ["echo", "whoami", "unknown_ids", "garbage", "flood", "hang", "wedge", "exit_mid",
               "huge", "cr_json", "twice"]
ROGUE_POLICY = policy_doc(
    auth={"anonymous": {"role": "user"}},
    defaultAction="deny",
    limits={"callTimeoutSeconds": PROFILE_TIMEOUT},
    tools=[{"name": "echo", "alias": "say", "limits": {"callTimeoutSeconds": CALL_TIMEOUT}},
           {"name": "whoami",
            "arguments": [{"name": "mode", "kind": "string", "allow": ["[a-z ]*"]}]},
           *[{"name": n, "limits": {"callTimeoutSeconds": CALL_TIMEOUT}} for n in ("hang", "wedge")],
           *[{"name": n} for n in ROGUE_TOOLS[2:] if n not in ("hang", "wedge")]],
)
# Every session in these tests is the same anonymous caller on loopback; they
# are about other limits, so its share of sessions is not the one that bites.
MANY_PER_CALLER = ["--max-sessions-per-identity", "100000"]


def rogue_stdio() -> list[str]:
    return [sys.executable, str(ROGUE_FIXTURE)]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def children_of(pid: int) -> list[int]:
    """Direct children of `pid` (scans /proc/*/stat)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces and parentheses
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry))
    return out


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def sse_events(raw: bytes) -> list[dict]:
    """Parse an event stream the way the SSE spec (and SDK clients) do: lines
    end at CRLF, LF or a lone CR; `data` lines join with LF; an event is
    dispatched at a blank line. Returns [{"id", "event", "data"}]."""
    text = raw.decode("utf-8", errors="replace")
    lines: list[str] = []
    cur = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\r":
            lines.append("".join(cur))
            cur = []
            if i + 1 < len(text) and text[i + 1] == "\n":
                i += 1
        elif c == "\n":
            lines.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    events, data, ev_id, ev_type, has_data = [], [], None, None, False
    for line in lines:
        if line == "":
            if has_data:
                events.append({"id": ev_id, "event": ev_type, "data": "\n".join(data)})
            data, ev_type, has_data = [], None, False
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
            has_data = True
        elif field == "id":
            ev_id = value
        elif field == "event":
            ev_type = value
    return events


def messages_of(resp: httpx.Response) -> list:
    """The JSON-RPC messages in a response, SSE parsed strictly; an event whose
    data is not JSON is returned as {"unparsable": data}."""
    ctype = resp.headers.get("content-type", "")
    if ctype.startswith("text/event-stream"):
        out = []
        for ev in sse_events(resp.content):
            if not ev["data"].strip():
                continue  # priming event
            try:
                out.append(json.loads(ev["data"]))
            except ValueError:
                out.append({"unparsable": ev["data"]})
        return out
    if not resp.content:
        return []
    body = resp.json()
    return body if isinstance(body, list) else [body]


class Ledger:
    """Every request sent and what came back for it, by kind (thread-safe)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent = 0
        self.answered = 0
        self.kinds: Counter = Counter()
        self.problems: list[str] = []

    def record(self, kind: str, problem: str | None = None):
        with self.lock:
            self.kinds[kind] += 1
            # the first few problems of each kind
            if problem and sum(p.startswith(f"[{kind}]") for p in self.problems) < 5:
                self.problems.append(f"[{kind}] {problem}")


def one_request(s: RawMcp, ledger: Ledger, method: str, params: dict | None, timeout: float = 20) -> dict | None:
    """Send one request; file the outcome. Returns the response message, if any."""
    rid = s.next_id()
    body = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    with ledger.lock:
        ledger.sent += 1
    try:
        r = s.http.post(s.url, content=json.dumps(body), headers=s.headers(), timeout=timeout)
    except httpx.HTTPError as e:
        ledger.record("lost", f"{method} id={rid}: {e!r}")
        return None
    msgs = [m for m in messages_of(r) if isinstance(m, dict) and "method" not in m]
    if r.status_code >= 400 and len(msgs) == 1 and msgs[0].get("id") is None and "error" in msgs[0]:
        # refused at the HTTP level (e.g. 404: the session ended): an answer, and a clear one
        with ledger.lock:
            ledger.answered += 1
        ledger.record(f"http{r.status_code}")
        return msgs[0]
    mine = [m for m in msgs if m.get("id") == rid]
    if len(mine) != 1 or len(msgs) != 1:
        ledger.record("lost" if not mine else "duplicated", f"{method} id={rid}: HTTP {r.status_code} {msgs[:2]}")
        return None
    with ledger.lock:
        ledger.answered += 1
    msg = mine[0]
    if "result" in msg:
        ledger.record("ok")
    else:
        err = msg.get("error", {})
        reason = (err.get("data") or {}).get("reason")
        kind = f"{err.get('code')}/{reason}"
        clear = err.get("code") == -32603 and len(err.get("message", "")) > 20 and (
            reason in ("upstream_failed", "session_closed")
            # the facade's own list pipeline gave up waiting for the server
            or (method == "tools/list" and reason == "upstream_timeout"))
        ledger.record(kind, None if clear else f"unclear error for {method}: {msg}")
    return msg
