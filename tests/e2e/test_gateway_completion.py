"""`completion/complete` through the gateway, against server-everything's
own completions (its `completable-prompt` and its dynamic resource templates).

    server-everything ─ facade (its policy, its roles) ─ gateway ─ clients

A completion for a prefixed prompt name or a `{backend}+{uri}` template goes
to the backend that serves it, under the backend's own name, as the caller
(the backend's audit names the caller the gateway vouched for). A ref the
caller may not see — the backend hides it from that caller, or no backend
serves it, or the gateway withholds it — gets one and the same refusal, so the
answer never says what exists for others. Clients: the official Python SDK in
a legacy (2025-11-25) session and in its modern (2026-07-28) mode, and raw
modern requests where the exact error is compared.
"""
from __future__ import annotations

import pytest

from era_helpers import ModernMcp
from gateway_helpers import key_tree, keyed_gateway, two_callers
from helpers import run_async
from warden_helpers import Audit, rpc_error, sdk_client, sdk_error

ALICE, BOB = "gwc-alice-token-0123456789", "gwc-bob-token-0123456789"
GW_ISSUER = "gwc-e2e"
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
BLOB_TEMPLATE = "demo://resource/dynamic/blob/{resourceId}"
PROMPT = "everything__completable-prompt"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return key_tree(tmp_path_factory, "gwc")


@pytest.fixture(scope="module")
def gateway(module_facade, tree):
    """One backend: alice is a user there, bob a viewer. The completable
    prompt and the text template need a user; the blob template is hidden
    from everyone. The gateway's own policy lets every prompt and resource
    through, so every refusal below is the backend's."""
    _, front = keyed_gateway(
        module_facade, tree, GW_ISSUER,
        backend=dict(
            roles=[{"role": "user", "issuer": "static", "subjects": ["alice"]},
                   {"role": "viewer", "issuer": "static", "subjects": ["bob"]}],
            defaultAction="deny",
            tools=[{"name": "echo", "requiredRole": "viewer"}],
            prompts={"rules": [{"name": "completable-prompt", "requiredRole": "user"},
                               {"name": "simple-prompt"}]},
            # A rule's URI is a glob, matched against a template's text too.
            resources={"rules": [{"uri": "demo://resource/dynamic/text/*", "requiredRole": "user"}]},
        ),
        front=two_callers(ALICE, BOB, resources={"defaultAction": "allow"}, prompts={"defaultAction": "allow"}))
    return front


def prompt_ref(name: str = PROMPT) -> dict:
    return {"type": "ref/prompt", "name": name}


def template_ref(uri: str) -> dict:
    return {"type": "ref/resource", "uri": uri}


def completions(gateway, era: str) -> tuple:
    from mcp import types

    async def go():
        async with sdk_client(gateway.url, ALICE, mode=era) as client:
            # Nothing listed first: the gateway lists the prompts as the caller
            # when it has not seen the name yet.
            department = await client.complete(types.PromptReference(type="ref/prompt", name=PROMPT),
                                               {"name": "department", "value": "E"})
            member = await client.complete(types.PromptReference(type="ref/prompt", name=PROMPT),
                                           {"name": "name", "value": "A"}, {"department": "Engineering"})
            template = await client.complete(
                types.ResourceTemplateReference(type="ref/resource", uri=f"everything+{TEXT_TEMPLATE}"),
                {"name": "resourceId", "value": "7"})
            return client.protocol_version, department, member, template

    return run_async(go)


@pytest.mark.parametrize("era", ["legacy", "auto"])
def test_a_completion_reaches_the_backend_that_serves_the_ref(gateway, tree, era):
    version, department, member, template = completions(gateway, era)
    assert (version == "2026-07-28") == (era == "auto"), version
    # server-everything's own completers answered: prefix "E" → Engineering,
    # the context's department narrows the names, the template's id echoes.
    assert department.completion.values == ["Engineering"], department
    assert member.completion.values == ["Alice"], member
    assert template.completion.values == ["7"], template
    # As the caller: the backend judged alice (a user there), vouched for by
    # the gateway, under its own names for the prompt and the template.
    audit = Audit(tree / "backend-audit.jsonl")
    record = audit.wait(lambda r: r.get("event") == "completion" and r.get("decision") == "allow")
    assert (record["subject"], record["auth"]) == ("alice", "gateway"), record


def refusal(mcp: ModernMcp, ref: dict, argument: str, token: str) -> dict:
    _, answer = mcp.request("completion/complete", {"ref": ref, "argument": {"name": argument, "value": "1"}},
                            token=token)
    return rpc_error(answer)


def named(error: dict, name: str) -> dict:
    """The error with the ref's name taken out of its message."""
    return {**error, "message": error["message"].replace(name, "<ref>")}


def test_a_ref_the_caller_cannot_see_is_refused_as_an_unknown_one(gateway):
    mcp = ModernMcp(gateway.url)
    try:
        # Bob is a viewer at the backend: the completable prompt and the text
        # template need a user there.
        hidden_prompt = refusal(mcp, prompt_ref(), "department", BOB)
        unknown_prompt = refusal(mcp, prompt_ref("everything__no-such-prompt"), "department", BOB)
        no_backend = refusal(mcp, prompt_ref("nobody__completable-prompt"), "department", BOB)
        assert hidden_prompt["code"] == -32004 and hidden_prompt["data"]["reason"] == "prompt_not_available"
        assert named(hidden_prompt, PROMPT) == named(unknown_prompt, "everything__no-such-prompt") \
            == named(no_backend, "nobody__completable-prompt")
        # Alice may: the same ref answers her.
        _, answer = mcp.request("completion/complete", {"ref": prompt_ref(), "argument": {
            "name": "department", "value": "S"}}, token=ALICE)
        assert answer["result"]["completion"]["values"] == ["Sales", "Support"], answer

        text, blob = f"everything+{TEXT_TEMPLATE}", f"everything+{BLOB_TEMPLATE}"
        hidden_template = refusal(mcp, template_ref(text), "resourceId", BOB)
        hidden_from_all = refusal(mcp, template_ref(blob), "resourceId", ALICE)
        no_backend = refusal(mcp, template_ref(f"nobody+{TEXT_TEMPLATE}"), "resourceId", BOB)
        assert hidden_template["code"] == -32004 and hidden_template["data"]["reason"] == "resource_not_available"
        assert named(hidden_template, text) == named(hidden_from_all, blob) \
            == named(no_backend, f"nobody+{TEXT_TEMPLATE}")
        # The backend's own name for it never comes back to the caller.
        assert TEXT_TEMPLATE not in hidden_template["message"].replace(text, "")
    finally:
        mcp.close()


def test_a_legacy_session_gets_the_same_refusal(gateway):
    from mcp import types

    async def go():
        async with sdk_client(gateway.url, BOB) as client:
            hidden = await sdk_error(client.complete(types.PromptReference(type="ref/prompt", name=PROMPT),
                                                     {"name": "department", "value": "E"}))
            unknown = await sdk_error(client.complete(
                types.PromptReference(type="ref/prompt", name="everything__no-such-prompt"),
                {"name": "department", "value": "E"}))
            return hidden.error, unknown.error

    hidden, unknown = run_async(go)
    assert hidden.code == unknown.code == -32004, (hidden, unknown)
    assert hidden.message.replace(PROMPT, "<ref>") == unknown.message.replace("everything__no-such-prompt", "<ref>")
    assert hidden.data == unknown.data and hidden.data["reason"] == "prompt_not_available"


def test_the_gateway_offers_completions(gateway):
    mcp = ModernMcp(gateway.url, ALICE)
    try:
        _, answer = mcp.request("server/discover")
        assert "completions" in answer["result"]["capabilities"], answer
    finally:
        mcp.close()
