"""A backend that goes down has its tools withdrawn, and when it comes back
its tools return, and the gateway's callers are told both times by a list
change, without listing again: a modern client holding `subscriptions/listen`
(the official Python SDK in 2026-07-28 mode) and a legacy session (the SDK
in 2025-11-25 mode) each hear `notifications/tools/list_changed` when the
backend is killed and again when it is back, and each list then says so.

    server-everything ─ facade :port (killed, started again on the same port) ─┐
    server-everything ─ facade ─────────────────────────────────────────────────┴─ gateway ─ clients
"""
from __future__ import annotations

import anyio
import yaml

from conftest import free_port, sidecar_path, wait_http_ok

from gateway_helpers import gateway_args
from helpers import everything_stdio, run_async
from warden_helpers import policy_doc, sdk_client

# Time for the gateway to notice (it asks every few seconds) and announce.
HEAR_WITHIN = 20


def open_policy(**fields) -> dict:
    return policy_doc(auth={"anonymous": {"role": "user"}}, defaultAction="deny", **fields)


def start_backend(start_process, tmp_path, port: int, admin_port: int):
    policy = tmp_path / f"ev-{port}.yaml"
    policy.write_text(yaml.safe_dump(open_policy(tools=[{"name": "echo"}])))
    proc = start_process([str(sidecar_path()), "run", "--listen", f"127.0.0.1:{port}",
                          "--admin-listen", f"127.0.0.1:{admin_port}", "--policy", str(policy),
                          "--generated-admin-token-file", str(tmp_path / f"admin-{admin_port}.token"),
                          "--", *everything_stdio()])
    wait_http_ok(f"http://127.0.0.1:{admin_port}/readyz", proc=proc)
    return proc


def names(result) -> set[str]:
    return {t.name for t in result.tools}


def test_callers_of_both_eras_hear_a_backend_go_and_come_back(start_process, facade, tmp_path):
    port, admin_port = free_port(), free_port()
    backend = start_backend(start_process, tmp_path, port, admin_port)
    other = facade(upstream=everything_stdio(), policy=open_policy(tools=[{"name": "echo"}]))
    gw = facade(policy=open_policy(tools=[{"name": "ev__echo"}, {"name": "other__echo"}]),
                extra_args=gateway_args({"ev": f"http://127.0.0.1:{port}/mcp", "other": other.url}))

    async def go():
        heard = {"modern": 0, "legacy": 0}
        lists: dict[str, list[set[str]]] = {"modern": [], "legacy": []}

        async def legacy_handler(message):
            if "ToolListChanged" in repr(message) or "tools/list_changed" in repr(message):
                heard["legacy"] += 1

        async def until(count: int) -> None:
            with anyio.move_on_after(HEAR_WITHIN):
                while heard["modern"] < count or heard["legacy"] < count:
                    await anyio.sleep(0.1)
            assert heard["modern"] >= count and heard["legacy"] >= count, (count, heard)

        async with sdk_client(gw.url, mode="auto") as modern, \
                sdk_client(gw.url, message_handler=legacy_handler) as legacy:
            for era, client in (("modern", modern), ("legacy", legacy)):
                lists[era].append(names(await client.list_tools()))
            async with modern.listen(tools_list_changed=True) as sub:
                async def count_modern():
                    async for event in sub:
                        if "Tool" in type(event).__name__:
                            heard["modern"] += 1
                async with anyio.create_task_group() as tg:
                    tg.start_soon(count_modern)
                    backend.stop()
                    await until(1)
                    for era, client in (("modern", modern), ("legacy", legacy)):
                        lists[era].append(names(await client.list_tools()))
                    start_backend(start_process, tmp_path, port, admin_port)
                    await until(2)
                    for era, client in (("modern", modern), ("legacy", legacy)):
                        lists[era].append(names(await client.list_tools()))
                    tg.cancel_scope.cancel()
        return heard, lists

    heard, lists = run_async(go)
    both, withdrawn = {"ev__echo", "other__echo"}, {"other__echo"}
    for era in ("modern", "legacy"):
        assert lists[era] == [both, withdrawn, both], (era, lists)
        assert heard[era] >= 2, heard
