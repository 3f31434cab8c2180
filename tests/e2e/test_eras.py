"""The facade is dual-era: every client era in front of every server era.

Clients (real SDKs, run as programs, see era_helpers.run_era_client):
  ts-v2-modern   @modelcontextprotocol/client 2.4, pinned to 2026-07-28
  py-modern      Python `mcp` 2.3 in its default mode (probes server/discover)
  ts-v1-legacy   @modelcontextprotocol/sdk 1.x (initialize handshake)
  ts-v2-legacy   @modelcontextprotocol/client 2.4 in legacy mode
Servers behind the facade:
  modern-http    the TypeScript SDK 2.4 fixture, modern only, over HTTP
  modern-stdio   the same over stdio: one process serves every caller
  everything     @modelcontextprotocol/server-everything (legacy, stdio)
  git-legacy     mcp-server-git forced legacy (--upstream-era legacy)
  git            mcp-server-git as the probe finds it (it is dual-era: modern)

For each pair: tools (list + call), progress, resources, prompts, elicitation
(through a multi round-trip result or a server request, whichever each side
speaks), cancellation (and that it reached the server), subscriptions, and a
policy refusal with the same code in both eras.
"""
from __future__ import annotations

import pytest

from era_helpers import CLIENTS, modern_fixture_http, modern_fixture_stdio, run_era_client
from warden_helpers import git_stdio, policy_doc, token_entry
from helpers import everything_stdio

MODERN_TOOLS = ["test_simple_text", "test_tool_with_progress", "test_input_required_result_elicitation",
                "test_sleep", "test_counters", "test_trigger_tool_change"]
EVERYTHING_TOOLS = ["echo", "trigger-long-running-operation", "trigger-elicitation-request",
                    "toggle-subscriber-updates"]
GIT_TOOLS = ["git_status", "git_log"]


def token_of(client: str) -> str:
    return f"era-token-{client}"


def era_policy(tools: list[str]) -> dict:
    # A caller per client: a modern caller's bridge to a legacy server is its
    # own (server-everything's subscription toggle is per server session).
    return policy_doc(
        auth={"staticTokens": {"tokens": [token_entry(token_of(c), c) for c in CLIENTS]}},
        roles=[{"role": "user", "subjects": CLIENTS}],
        defaultAction="deny",
        tools=[{"name": t} for t in tools],
        # The test servers' tools carry no read-only hints: they may write.
        sandbox={"writeAllowed": True},
        resources={"defaultAction": "allow"},
        prompts={"defaultAction": "allow"},
    )


def profiles(repo) -> dict[str, dict]:
    modern = {
        "tool": {"name": "test_simple_text"},
        "progress": {"name": "test_tool_with_progress"},
        "resource": "test://static-text",
        "prompt": {"name": "test_simple_prompt"},
        "elicit": {"name": "test_input_required_result_elicitation"},
        "slow": {"name": "test_sleep", "args": {"ms": 15000}},
        "subscribe": {"filter": {"toolsListChanged": True}, "trigger": {"name": "test_trigger_tool_change"},
                      "expect": "notifications/tools/list_changed"},
        "denied": {"name": "test_error_handling"},
    }
    everything = {
        "tool": {"name": "echo", "args": {"message": "hi"}},
        "progress": {"name": "trigger-long-running-operation", "args": {"duration": 1, "steps": 3}},
        "resource": "demo://resource/dynamic/text/1",
        "prompt": {"name": "simple-prompt"},
        "elicit": {"name": "trigger-elicitation-request"},
        "slow": {"name": "trigger-long-running-operation", "args": {"duration": 15, "steps": 15}},
        "subscribe": {"filter": {"resourceSubscriptions": ["demo://resource/dynamic/text/1"]},
                      "trigger": {"name": "toggle-subscriber-updates"},
                      "expect": "notifications/resources/updated", "wait_ms": 9000},
        "denied": {"name": "get-env"},
    }
    git = {
        "tool": {"name": "git_status", "args": {"repo_path": str(repo)}},
        "denied": {"name": "git_commit", "args": {"repo_path": str(repo), "message": "x"}},
    }
    return {"modern-http": modern, "modern-stdio": modern, "everything": everything,
            "git-legacy": git, "git": git}


@pytest.fixture(scope="module")
def git_repo_module(tmp_path_factory):
    import subprocess
    repo = tmp_path_factory.mktemp("era-git") / "repo"
    repo.mkdir()
    for cmd in (["git", "init", "-q"], ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q",
                                         "--allow-empty", "-m", "init"]):
        subprocess.run(cmd, cwd=repo, check=True)
    return repo


@pytest.fixture(scope="module", params=["modern-http", "modern-stdio", "everything", "git-legacy", "git"])
def server(request, module_facade, start_module_process, git_repo_module):
    kind = request.param
    if kind == "modern-http":
        fa = module_facade(upstream_url=modern_fixture_http(start_module_process), policy=era_policy(MODERN_TOOLS))
    elif kind == "modern-stdio":
        fa = module_facade(upstream=modern_fixture_stdio(), policy=era_policy(MODERN_TOOLS))
    elif kind == "everything":
        fa = module_facade(upstream=everything_stdio(), policy=era_policy(EVERYTHING_TOOLS))
    elif kind == "git-legacy":
        fa = module_facade(upstream=git_stdio(git_repo_module), policy=era_policy(GIT_TOOLS),
                           extra_args=["--upstream-era", "legacy"])
    else:
        fa = module_facade(upstream=git_stdio(git_repo_module), policy=era_policy(GIT_TOOLS))
    fa.kind = kind
    fa.profile = profiles(git_repo_module)[kind]
    return fa


@pytest.mark.parametrize("client", CLIENTS)
def test_every_client_era_in_front_of_every_server_era(server, client):
    profile = server.profile
    report = run_era_client(client, server.url, profile, token=token_of(client))
    steps = report["steps"]
    failed = {k: v for k, v in steps.items() if not v.get("ok")}
    assert not failed, f"{client} → {server.kind}: {failed}"
    modern_client = client.endswith("modern")
    assert report["version"] == ("2026-07-28" if modern_client else "2025-11-25"), report["version"]

    tools = steps["tools"]
    assert profile["tool"]["name"] in tools["tools"] and not tools["isError"], tools
    # The refusal is the policy's, with the same code in both eras, and the
    # refused tool is not listed.
    assert profile["denied"]["name"] not in tools["tools"]
    assert steps["denied"]["refused"] and steps["denied"]["code"] == -32004, steps["denied"]

    if "progress" in profile:
        assert len(steps["progress"]["progress"]) >= 3, steps["progress"]
    if "resource" in profile:
        assert steps["resources"]["contents"] == [profile["resource"]]
        assert profile["resource"] in steps["resources"]["listed"] or server.kind == "everything"
    if "prompt" in profile:
        assert steps["prompts"]["messages"] >= 1
        assert profile["prompt"]["name"] in steps["prompts"]["listed"]
    if "elicit" in profile:
        e = steps["elicitation"]
        assert e["asked"] == 1 and not e["isError"] and "octocat" in e["text"], e
    if "slow" in profile:
        c = steps["cancellation"]
        assert c["aborted"] and c["took"] < 10_000 and c["after"], c
    if "subscribe" in profile:
        assert steps["subscriptions"]["notified"], steps["subscriptions"]


def test_cancellations_reached_the_modern_server(server):
    """After the matrix ran against it: every client's cancellation stopped
    the fixture's `test_sleep` (it counts the aborts it saw)."""
    if not server.kind.startswith("modern"):
        pytest.skip("only the fixture counts cancellations")
    report = run_era_client("ts-v2-modern", server.url, {"tool": {"name": "test_counters"},
                                                          "denied": {"name": "test_error_handling"}},
                            token=token_of("ts-v2-modern"))
    import json
    counters = json.loads(report["steps"]["tools"]["text"])
    assert counters["cancelled"] >= len(CLIENTS), counters
