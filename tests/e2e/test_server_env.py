"""The facade passes a server it starts only the environment it is told to:
server-everything's `get-env` (a real server reporting its own environment)
run behind `mcp-warden-sidecar run … -- node …` sees the baseline (PATH,
HOME, the locale…) and what `--server-env` names or sets, and nothing else
of the facade's environment: not a secret-looking variable of the shell that
started it, not `npm_config_*`, not the facade's own `MCP_WARDEN_*`
settings, not `TERM`. `MCP_WARDEN_SERVER_ENV` names more, and a malformed
`--server-env` stops the facade at start with a message.
"""
from __future__ import annotations

import json
import secrets
import subprocess

from conftest import sidecar_path
from helpers import everything_stdio, run_async
from warden_helpers import policy_doc, sdk_client, text_of_result

ANON = {"anonymous": {"role": "user"}}
POLICY = policy_doc(auth=ANON, tools=[{"name": "get-env"}])
SECRET = "tok-" + secrets.token_hex(12)


def server_environment(fa) -> dict:
    async def body():
        async with sdk_client(fa.url) as c:
            return text_of_result(await c.call_tool("get-env", {}))
    text = run_async(body)
    start = text.index("{")
    return json.loads(text[start:text.rindex("}") + 1])


def test_only_the_baseline_and_named_variables_reach_the_server(facade):
    env = {"MY_CLOUD_TOKEN": SECRET, "npm_config__authToken": SECRET, "MCP_WARDEN_LOG": "info",
           "TERM": "xterm-256color", "NAMED_ONE": "passed-through", "LC_TIME": "C.UTF-8",
           "LISTED_TWO": "listed", "MCP_WARDEN_SERVER_ENV": "LISTED_TWO"}
    fa = facade(upstream=everything_stdio(), policy=POLICY, env=env, forward_env=False,
                extra_args=["--server-env", "NAMED_ONE", "--server-env", "SET_THREE=a=b"])
    seen = server_environment(fa)
    for name in ("MY_CLOUD_TOKEN", "npm_config__authToken", "MCP_WARDEN_LOG", "MCP_WARDEN_SERVER_ENV", "TERM"):
        assert name not in seen, f"{name} reached the server: {sorted(seen)}"
    assert SECRET not in json.dumps(seen)
    assert seen["NAMED_ONE"] == "passed-through"
    assert seen["LISTED_TWO"] == "listed"
    assert seen["SET_THREE"] == "a=b"
    assert seen["LC_TIME"] == "C.UTF-8"
    assert "PATH" in seen and "HOME" in seen, sorted(seen)
    # Nothing beyond the baseline and what was named.
    baseline = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR"}
    extra = {n for n in seen if n not in baseline and not n.startswith("LC_")} - {"NAMED_ONE", "LISTED_TWO",
                                                                                  "SET_THREE"}
    assert not extra, f"more than was named: {sorted(extra)}"


def test_a_malformed_server_env_stops_the_facade():
    out = subprocess.run([str(sidecar_path()), "run", "--server-env", "=oops", "--", "true"],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 2, out
    assert '--server-env "=oops": expected NAME or NAME=VALUE' in out.stderr, out.stderr
