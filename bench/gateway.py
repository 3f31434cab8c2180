"""The gateway hop (a section of run_bench.py, `--only gateway`).

Six targets in front of the same mcp-bench-echo over HTTP, interleaved
round by round at concurrency 1 and 16 in one run:

    direct   the echo server's own endpoint
    backend  a facade in front of it (--upstream-url, allow-all, audit off;
             it also trusts the keyed gateway's key)
    backend-modern  the same backend facade, driven by stateless 2026-07-28
             requests (how the gateway speaks to it)
    gateway-modern  the same gateway, driven by stateless requests
    gateway  a facade in gateway mode in front of that backend facade
             (--backend echo=URL, prefix none, allow-all, audit off):
             client -> gateway -> backend facade -> server
    gateway-keyed  a second gateway, the same but with a signing key
             (Ed25519) and a static-token caller: every call reaches the
             backend with the gateway's assertion of that caller, which
             the backend verifies (the backend trusts the key; anonymous
             calls, the other rows', carry none)

Reported per level: p50, p99 and calls/s of each; the backend facade's own
overhead over direct and the gateway hop's over the backend (each the median
over rounds of the same-round difference, p50 and p99), and the ratio of the
two at the median; and what the key adds (`gateway-keyed` over `gateway`). The `gateway` and `backend` rows use a legacy (2025-11-25
session) client, but behind the gateway the backend serves stateless
2026-07-28 requests: the hop between rows of the same client era (modern:
`gateway-modern` over `backend-modern`) is reported beside it. The goal: the gateway hop adds no more at the median
than the backend facade's own overhead over the direct server.
"""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from common import (MESSAGE, TOKEN, Target, aggregate, allow_all_policy, fmt, free_port, log, paired_vs, table,
                    wait_port)

GOALS = {"gateway_hop_over_facade_overhead_p50": 1.0}
VARIANTS = ("direct", "backend", "backend-modern", "gateway", "gateway-modern", "gateway-keyed")
ISSUER = "bench-gateway"


def keyed_policies(tmp: Path) -> tuple[Path, Path, Path]:
    """(signing key, the backend's policy, the keyed gateway's policy): the
    allow-all policy of the other rows, the backend's also trusting the key
    for static-token callers, the gateway's naming its caller by a static
    token (an anonymous caller gets no assertion); that caller is an admin
    at both, as the anonymous caller of the other rows is."""
    key, pub = tmp / "gateway.key.pem", tmp / "gateway.pub.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)], check=True)
    base = tmp / "gw-allow-all.yaml"
    allow_all_policy(base)
    text = base.read_text()
    anonymous = "auth: {anonymous: {role: admin}}"
    assert anonymous in text, text
    backend, gateway = tmp / "gw-backend-keyed.yaml", tmp / "gw-gateway-keyed.yaml"
    backend.write_text(text.replace(anonymous, (
        "auth: {anonymous: {role: admin}, gateways: [{issuer: %s, publicKeyFile: '%s', audience: echo, "
        "callerIssuers: [static]}]}\nroles: [{role: admin, issuer: static, subjects: [bench]}]" % (ISSUER, pub))))
    sha = hashlib.sha256(TOKEN.encode()).hexdigest()
    gateway.write_text(text.replace(anonymous, "auth: {staticTokens: {tokens: [{sha256: '%s', subject: bench}]}}\n"
                                    "roles: [{role: admin, subjects: [bench]}]" % sha))
    return key, backend, gateway


def run(b, levels=(1, 16)) -> dict:
    a = b.a
    log("== gateway hop: client -> gateway -> backend facade -> mcp-bench-echo, vs the backend alone, vs direct")
    port = free_port()
    up = b.start("gw-echo", [a.echo, "http", "--listen", f"127.0.0.1:{port}"])
    wait_port(port, up)
    direct_url = f"http://127.0.0.1:{port}/mcp"
    res: dict = {"levels": {}, "upstream": "mcp-bench-echo (HTTP)",
                 "note": "allow-all facades, audit off; the gateway's one backend has prefix none"}
    try:
        key, backend_policy, keyed_policy = keyed_policies(b.tmp)
        # One backend for every gateway row: it trusts the key, which costs
        # the anonymous rows nothing (their requests carry no assertion).
        p, backend_url, _ = b.facade("gw-backend", upstream_url=direct_url, policy_file=backend_policy)
        backend = Target("backend", "facade", "http", backend_url, p.pid, note="facade --upstream-url")
        p, gateway_url, _ = b.facade("gw-gateway", extra=["--backend", f"echo={backend_url}",
                                                          "--backend-prefix", "echo=none"])
        gateway = Target("gateway", "facade", "http", gateway_url, p.pid, note="facade --backend (gateway mode)")
        p, keyed_url, _ = b.facade("gw-gateway-keyed", policy_file=keyed_policy, extra=[
            "--backend", f"echo={backend_url}", "--backend-prefix", "echo=none",
            "--gateway-key-file", str(key), "--gateway-issuer", ISSUER])
        keyed = Target("gateway-keyed", "facade", "http", keyed_url, p.pid, [f"Authorization: Bearer {TOKEN}"],
                       note="the gateway with a key and a static-token caller: an assertion on every call")
        direct = Target("direct", "direct", "http", direct_url, up.pid, note="the server's own endpoint")
        # The backend as the gateway speaks to it: stateless 2026-07-28
        # requests (no session), which is part of what the hop costs.
        modern = Target("backend-modern", "facade", "http", backend_url, backend.watch_pid, modern=True,
                        note="the backend facade, modern (stateless) client")
        gateway_modern = Target("gateway-modern", "facade", "http", gateway_url, gateway.watch_pid, modern=True,
                                note="the gateway, modern (stateless) client")
        targets = [direct, backend, modern, gateway, gateway_modern, keyed]
        for c in levels:
            runs: dict = {t.name: [] for t in targets}
            for r in range(a.rounds):
                for t in targets:
                    n = a.requests_c1 if c == 1 else a.requests
                    out = b.load(t, c, a.duration, a.warmup, n, expect=MESSAGE, sessions=min(c, 16))
                    if "failed" in out:
                        log(f"   gateway c={c} round {r} {t.name}: FAILED {out['failed'][:300]}")
                    runs[t.name].append(out)
            level = {name: aggregate(rs) for name, rs in runs.items()}
            summary = {"backend_vs_direct": paired_vs(runs["backend"], runs["direct"]),
                       "gateway_vs_backend": paired_vs(runs["gateway"], runs["backend"]),
                       "gateway_vs_direct": paired_vs(runs["gateway"], runs["direct"]),
                       "backend_modern_vs_backend": paired_vs(runs["backend-modern"], runs["backend"]),
                       "gateway_modern_vs_backend_modern": paired_vs(runs["gateway-modern"], runs["backend-modern"]),
                       "gateway_keyed_vs_gateway": paired_vs(runs["gateway-keyed"], runs["gateway"])}
            own = summary["backend_vs_direct"].get("added_p50_us")
            hop = summary["gateway_vs_backend"].get("added_p50_us")
            if own and hop is not None:
                summary["hop_over_facade_p50"] = hop / own
            level["summary"] = summary
            res["levels"][str(c)] = level
            log(f"   c={c:<3} " + "  ".join(f"{n} p50={fmt(level[n].get('p50_us'))}us" for n in VARIANTS)
                + f"  facade +{fmt(own)}us  gateway hop +{fmt(hop)}us")
    finally:
        b.stop_all()
    return res


def goals(res: dict) -> list[dict]:
    gw = res.get("gateway")
    if gw is None:
        return []
    out = []
    limit = GOALS["gateway_hop_over_facade_overhead_p50"]
    for c, level in gw["levels"].items():
        s = level.get("summary", {})
        ratio = s.get("hop_over_facade_p50")
        out.append({"goal": f"gateway hop adds <= the backend facade's own overhead at p50 (c={c})",
                    "value": round(ratio, 3) if ratio is not None else None, "limit": limit,
                    "met": ratio is not None and ratio <= limit,
                    "detail": (f"hop +{fmt(s['gateway_vs_backend'].get('added_p50_us'))} µs vs facade "
                               f"+{fmt(s['backend_vs_direct'].get('added_p50_us'))} µs; median over rounds of "
                               "the same-round difference") if ratio is not None else "missing measurement"})
    return out


def print_tables(res: dict) -> None:
    gw = res.get("gateway")
    if not gw:
        return
    print(f"\n### gateway hop ({gw['upstream']}; {gw['note']})")
    print("(added: the median over rounds of the same-round difference; hop/facade: the gateway hop's added "
          "p50 over the backend facade's own added p50)")
    rows = [("target", "c", "p50 µs", "p99 µs", "calls/s", "cpu µs/call", "err")]
    for c, level in gw["levels"].items():
        for name in VARIANTS:
            v = level.get(name, {})
            if "p50_us" not in v:
                rows.append((name, c, "FAILED", "", "", "", ""))
                continue
            rows.append((name, c, fmt(v["p50_us"]), fmt(v["p99_us"]), fmt(v["rps"]), fmt(v["cpu_us_per_call"], 1),
                         str(v["errors"])))
    table(rows)
    rows = [("c", "facade over direct +p50/+p99 µs", "gateway hop +p50/+p99 µs", "hop/facade p50",
             "gateway vs direct rps", "backend modern vs legacy +p50 µs", "hop, modern rows +p50 µs",
             "key +p50/+p99 µs")]
    for c, level in gw["levels"].items():
        s = level.get("summary", {})
        f, h, d = s.get("backend_vs_direct", {}), s.get("gateway_vs_backend", {}), s.get("gateway_vs_direct", {})
        rows.append((c, f"{fmt(f.get('added_p50_us'))} / {fmt(f.get('added_p99_us'))}",
                     f"{fmt(h.get('added_p50_us'))} / {fmt(h.get('added_p99_us'))}",
                     fmt(s.get("hop_over_facade_p50"), 2), fmt(d.get("rps_ratio"), 3),
                     fmt(s.get("backend_modern_vs_backend", {}).get("added_p50_us")),
                     fmt(s.get("gateway_modern_vs_backend_modern", {}).get("added_p50_us")),
                     f"{fmt(s.get('gateway_keyed_vs_gateway', {}).get('added_p50_us'))} / "
                     f"{fmt(s.get('gateway_keyed_vs_gateway', {}).get('added_p99_us'))}"))
    table(rows)
