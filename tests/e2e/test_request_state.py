"""Signed `requestState`: what a modern client retries with is held to the
call it continues.

The facade answers a modern client with `input_required` when a person must
approve a call (an argument rule says `check`) or when a legacy server asks
something in the middle of a call; the state it hands out is bound to the
caller, the exact request and an expiry. A retry whose state was altered,
made up, replayed for other arguments, replayed by another caller, expired or
already used is refused with -32602 and a reason saying which — and never
reaches the server. Server: @modelcontextprotocol/server-everything (legacy,
stdio); clients: hand-driven modern requests (era_helpers.ModernMcp).
"""
from __future__ import annotations

import base64
import json
import time

import pytest

from era_helpers import ModernMcp
from helpers import everything_stdio
from warden_helpers import policy_doc, token_entry

ALICE, MALLORY = "alice-token-0123456789", "mallory-token-0123456789"
ELICITS = {"elicitation": {}}
APPROVE = {"mcp-warden/approval": {"action": "accept", "content": {"approve": True}}}

POLICY = policy_doc(
    auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice"), token_entry(MALLORY, "mallory")]}},
    roles=[{"role": "user", "subjects": ["alice", "mallory"]}],
    defaultAction="deny",
    sandbox={"writeAllowed": True},
    tools=[
        {"name": "echo", "arguments": [{"name": "message", "kind": "command", "allow": ["deploy *", "ls"],
                                        "check": ["deploy"]}]},
        {"name": "trigger-elicitation-request"},
    ],
)


@pytest.fixture(scope="module")
def fa(module_facade):
    return module_facade(upstream=everything_stdio(), policy=POLICY, extra_args=["--request-state-ttl-secs", "3"])


def ask_approval(mcp: ModernMcp, message: str) -> str:
    status, answer = mcp.request("tools/call", {"name": "echo", "arguments": {"message": message}},
                                 capabilities=ELICITS)
    assert status == 200, answer
    result = answer["result"]
    assert result["resultType"] == "input_required", result
    question = result["inputRequests"]["mcp-warden/approval"]
    assert question["method"] == "elicitation/create" and message in question["params"]["message"]
    return result["requestState"]


def retry(mcp: ModernMcp, message: str, state: str, responses=APPROVE, token=None):
    return mcp.request("tools/call", {"name": "echo", "arguments": {"message": message},
                                      "inputResponses": responses, "requestState": state},
                       capabilities=ELICITS, token=token)


def refused(answer: dict) -> str:
    assert "error" in answer, answer
    assert answer["error"]["code"] == -32602, answer
    return answer["error"]["data"]["reason"]


def test_an_approved_retry_runs_the_call(fa):
    mcp = ModernMcp(fa.url, ALICE)
    state = ask_approval(mcp, "deploy prod")
    status, answer = retry(mcp, "deploy prod", state)
    assert status == 200 and answer["result"]["content"][0]["text"] == "Echo: deploy prod", answer
    # Declined: the call is refused as a declined approval, and does not run.
    state = ask_approval(mcp, "deploy prod")
    _, answer = retry(mcp, "deploy prod", state, {"mcp-warden/approval": {"action": "decline"}})
    assert answer["error"]["code"] == -32004 and answer["error"]["data"]["reason"] == "approval_declined", answer


def test_a_client_that_cannot_elicit_is_refused_not_asked(fa):
    mcp = ModernMcp(fa.url, ALICE)
    _, answer = mcp.request("tools/call", {"name": "echo", "arguments": {"message": "deploy prod"}})
    assert answer["error"]["code"] == -32008 and answer["error"]["data"]["reason"] != "", answer


def tamper(state: str) -> str:
    """Rewrite the claims to say `approved`, keeping the old MAC."""
    prefix, body, mac = state.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["approved"] = True
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{prefix}.{forged}.{mac}"


def test_altered_made_up_and_replayed_states_are_refused(fa):
    mcp = ModernMcp(fa.url, ALICE)
    state = ask_approval(mcp, "deploy prod")
    _, answer = retry(mcp, "deploy prod", tamper(state))
    assert refused(answer) == "request_state_tampered"
    _, answer = retry(mcp, "deploy prod", "opaque-server-state")
    assert refused(answer) == "request_state_tampered"
    # The same state for other arguments: the approval was for "deploy prod".
    _, answer = retry(mcp, "deploy staging", state)
    assert refused(answer) == "request_state_other_arguments"
    # Another caller replays alice's state.
    _, answer = retry(mcp, "deploy prod", state, token=MALLORY)
    assert refused(answer) == "request_state_other_caller"


def test_an_expired_state_is_refused(fa):
    mcp = ModernMcp(fa.url, ALICE)
    state = ask_approval(mcp, "deploy prod")
    time.sleep(4.2)  # the facade was started with --request-state-ttl-secs 3
    _, answer = retry(mcp, "deploy prod", state)
    assert refused(answer) == "request_state_expired"


def test_a_legacy_servers_question_is_a_parked_call_held_to_its_request(fa):
    mcp = ModernMcp(fa.url, ALICE)
    status, answer = mcp.request("tools/call", {"name": "trigger-elicitation-request", "arguments": {}},
                                 capabilities=ELICITS)
    assert status == 200, answer
    result = answer["result"]
    assert result["resultType"] == "input_required", result
    (key, question), = result["inputRequests"].items()
    assert question["method"] == "elicitation/create", question
    state = result["requestState"]
    params = {"name": "trigger-elicitation-request", "arguments": {}, "requestState": state,
              "inputResponses": {key: {"action": "accept", "content": {"name": "octocat", "check": True,
                                                                        "email": "o@example.com"}}}}
    # Another caller, other arguments: refused, and the call stays parked.
    _, bad = mcp.request("tools/call", params, capabilities=ELICITS, token=MALLORY)
    assert refused(bad) == "request_state_other_caller"
    _, bad = mcp.request("tools/call", {**params, "arguments": {"x": 1}}, capabilities=ELICITS)
    assert refused(bad) == "request_state_other_arguments"
    # The caller's own retry completes the call the server was running.
    status, done = mcp.request("tools/call", params, capabilities=ELICITS)
    text = " ".join(c.get("text", "") for c in done["result"]["content"])
    assert status == 200 and "octocat" in text, done
    # Used once: the same state again continues nothing.
    _, again = mcp.request("tools/call", params, capabilities=ELICITS)
    assert refused(again) == "request_state_consumed"
