"""Path rules over `file://` resources at a gateway. The gateway's URIs wrap
its backend's (`files+file:///srv/…`); its own policy's path rules judge the
file each one names, however the caller spells it, in the list and on read.

    file_resources_server.py ─ facade (every resource allowed) ─ gateway ─ alice, bob

The backend's server (the official Python SDK) serves three files from
memory. The gateway denies `/srv/secrets/**` and lets only admins (alice) at
`/srv/ops/**`; bob is a user. Raw modern (2026-07-28) requests.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from era_helpers import ModernMcp
from gateway_helpers import key_tree, keyed_gateway
from warden_helpers import rpc_error, token_entry

ALICE, BOB = "gwp-alice-token-0123456789", "gwp-bob-token-0123456789"
SERVER = Path(__file__).with_name("file_resources_server.py")
PUBLIC, OPS = "files+file:///srv/public/readme.txt", "files+file:///srv/ops/runbook.md"
# The secret, as listed and as a caller could spell it to get past a rule
# that matched only the text.
SECRETS = ["files+file:///srv/secrets/db.key", "files+file://localhost/srv/secrets/db.key",
           "files+file:////srv/secrets/db.key", "files+file:///srv/public/../secrets/db.key",
           "files+FILE:///srv/secrets/db.key", "files+file:///srv/secrets/./db.key"]


@pytest.fixture(scope="module")
def gateway(module_facade, tmp_path_factory):
    tree = key_tree(tmp_path_factory, "gwp")
    _, front = keyed_gateway(
        module_facade, tree, "gwp-e2e", name="files", upstream=[sys.executable, str(SERVER)],
        backend=dict(roles=[{"role": "user", "issuer": "static", "subjects": ["alice", "bob"]}],
                     defaultAction="deny", resources={"defaultAction": "allow"}),
        front=dict(
            auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice"), token_entry(BOB, "bob")]}},
            roles=[{"role": "admin", "subjects": ["alice"]}, {"role": "user", "subjects": ["bob"]}],
            defaultAction="allow",
            resources={"defaultAction": "allow", "rules": [
                {"uri": "/srv/secrets/**", "action": "deny"},
                {"uri": "/srv/ops/**", "requiredRole": "admin"}]}))
    mcp = ModernMcp(front.url)
    yield mcp
    mcp.close()


def listed(mcp: ModernMcp, token: str) -> list[str]:
    _, answer = mcp.request("resources/list", {}, token=token)
    return sorted(r["uri"] for r in answer["result"]["resources"])


def test_each_caller_lists_only_the_files_the_gateways_path_rules_give_them(gateway):
    assert listed(gateway, BOB) == [PUBLIC]
    assert listed(gateway, ALICE) == sorted([OPS, PUBLIC])


def test_a_denied_file_is_refused_however_its_uri_is_spelled(gateway):
    _, public = gateway.request("resources/read", {"uri": PUBLIC}, token=BOB)
    assert public["result"]["contents"][0]["text"] == "public readme", public
    for uri in SECRETS:
        for token in (ALICE, BOB):
            _, answer = gateway.request("resources/read", {"uri": uri}, token=token)
            assert "SECRET-DB-KEY" not in json.dumps(answer), (uri, answer)
            assert rpc_error(answer)["data"]["reason"] == "resource_not_available", (uri, answer)


def test_a_path_for_admins_is_read_by_admins_only(gateway):
    _, ops = gateway.request("resources/read", {"uri": OPS}, token=ALICE)
    assert ops["result"]["contents"][0]["text"] == "ops runbook", ops
    # The rule's role, whatever the spelling (the refusal names the rule,
    # as for any URI it covers, not whether the file exists).
    for uri in (OPS, "files+file://localhost/srv/ops/runbook.md", "files+file:///srv/public/../ops/runbook.md"):
        _, answer = gateway.request("resources/read", {"uri": uri}, token=BOB)
        error = rpc_error(answer)
        assert (error["code"], error["data"]["reason"]) == (-32003, "role_too_low"), (uri, answer)
        assert "ops runbook" not in json.dumps(answer)
