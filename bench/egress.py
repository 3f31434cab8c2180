"""The egress proxy's added latency (a section of run_bench.py, `--only egress`;
also runnable alone: `python bench/egress.py --sidecar PATH`).

A 1 MiB HTTPS download (a new TCP connection and TLS handshake each time,
GET /bytes/1048576 from tests/fixtures/https_files.py with a test CA) two
ways, interleaved round by round in one run:

    direct   straight to the server (127.0.0.1, SNI the server's name)
    proxy    through `mcp-warden-sidecar egress`: CONNECT name:port with the
             client's credential; the proxy resolves the name (through
             tests/fixtures/dns_server.py, TTL 0: one lookup per download,
             so the number includes the proxy's DNS round trip), judges
             the address, connects and relays

Reported: p50 and p90 of each, and the added time (proxy - direct) at each.
The DNS stand-in listens on port 53 of a loopback address: needs root
(the section is skipped otherwise).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
FIXTURES = BENCH.parent / "tests" / "fixtures"
NAME = "files.egress.bench"
SIZE = 1 << 20
TOKEN = "bench-token"


def _log(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(proc, log: Path, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"listening on [^\s:]+:(\d+)", log.read_text())
        if m:
            return int(m.group(1))
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited: {log.read_text()[-2000:]}")
        time.sleep(0.05)
    raise RuntimeError(f"{proc.args} did not start")


def _make_ca(d: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a certificate it signs for NAME, made with the
    `openssl` command (the bench's own environment has no test packages)."""
    openssl = shutil.which("openssl")
    if not openssl:
        raise RuntimeError("openssl not found: the egress section needs it for its test CA")
    d.mkdir(parents=True, exist_ok=True)
    ext = d / "leaf.ext"
    ext.write_text(f"subjectAltName=DNS:{NAME}\nextendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for cmd in (
        [openssl, "req", "-x509", *ec, "-keyout", d / "ca.key", "-out", d / "ca.pem", "-days", "1",
         "-subj", "/CN=mcp-warden bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"],
        [openssl, "req", *ec, "-keyout", d / "server.key", "-out", d / "server.csr", "-subj", f"/CN={NAME}"],
        [openssl, "x509", "-req", "-in", d / "server.csr", "-CA", d / "ca.pem", "-CAkey", d / "ca.key",
         "-CAcreateserial", "-out", d / "server.pem", "-days", "1", "-extfile", ext],
    ):
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"openssl failed: {r.stderr[-500:]}")
    return d / "ca.pem", d / "server.pem", d / "server.key"


def _download(ctx: ssl.SSLContext, port: int, proxy: int | None) -> float:
    t0 = time.perf_counter()
    if proxy is None:
        sock = socket.create_connection(("127.0.0.1", port))
    else:
        sock = socket.create_connection(("127.0.0.1", proxy))
        auth = "Basic " + __import__("base64").b64encode(f"bench/egress:{TOKEN}".encode()).decode()
        sock.sendall(f"CONNECT {NAME}:{port} HTTP/1.1\r\nHost: {NAME}:{port}\r\n"
                     f"Proxy-Authorization: {auth}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(4096)
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head[:200])
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with ctx.wrap_socket(sock, server_hostname=NAME) as t:
        t.sendall(f"GET /bytes/{SIZE} HTTP/1.1\r\nHost: {NAME}\r\nConnection: close\r\n\r\n".encode())
        got = 0
        buf = bytearray(1 << 16)
        while n := t.recv_into(buf):
            got += n
    if got < SIZE:
        raise RuntimeError(f"short download: {got}")
    return (time.perf_counter() - t0) * 1000.0


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def measure(sidecar: str, rounds: int = 10, per_round: int = 10) -> dict:
    if os.geteuid() != 0:
        return {"skipped": "the DNS stand-in needs port 53 on a loopback address (root)"}
    tmp = Path(tempfile.mkdtemp(prefix="egress-bench-"))
    procs = []

    def start(name, cmd, stdout=None):
        log = tmp / f"{name}.log"
        p = subprocess.Popen([str(c) for c in cmd], stdout=stdout or open(log, "w"), stderr=open(log, "a"),
                             stdin=subprocess.DEVNULL, start_new_session=True)
        procs.append(p)
        return p, log

    try:
        ca, cert, key = _make_ca(tmp / "pki")
        dns_ip = "127.53.77.77"
        p, log = start("dns", [sys.executable, FIXTURES / "dns_server.py", "--listen", f"{dns_ip}:53",
                               "--answer", f"{NAME}=127.0.0.1", "--log", tmp / "dns.jsonl"])
        _wait_listening(p, log)
        (tmp / "resolv.conf").write_text(f"nameserver {dns_ip}\noptions timeout:2 attempts:1\n")
        p, log = start("files", [sys.executable, FIXTURES / "https_files.py", "--listen", "127.0.0.1:0",
                                 "--cert", cert, "--key", key])
        port = _wait_listening(p, log)
        (tmp / "clients.json").write_text(json.dumps({"version": 1, "clients": [{
            "name": "bench/egress", "tokenSha256": hashlib.sha256(TOKEN.encode()).hexdigest(),
            "hosts": [{"host": NAME, "port": port}], "cidrs": [{"cidr": "127.0.0.0/8", "port": port}]}]}))
        proxy_port = _free_port()
        p, log = start("proxy", [sidecar, "egress", "--listen", f"127.0.0.1:{proxy_port}",
                                 "--clients-file", tmp / "clients.json", "--resolv-conf", tmp / "resolv.conf"],
                       stdout=open(tmp / "audit.jsonl", "w"))
        deadline = time.monotonic() + 20
        while "egress proxy listening" not in log.read_text():
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the proxy did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        ctx = ssl.create_default_context(cafile=str(ca))
        for _ in range(3):  # warm up both paths
            _download(ctx, port, None)
            _download(ctx, port, proxy_port)
        runs: dict[str, list[float]] = {"direct": [], "proxy": []}
        for _ in range(rounds):
            for _ in range(per_round):
                runs["direct"].append(_download(ctx, port, None))
                runs["proxy"].append(_download(ctx, port, proxy_port))
        out: dict = {"size_bytes": SIZE, "downloads_each": rounds * per_round,
                     "note": "new TCP+TLS per download; the proxy resolves the name each time (TTL 0)"}
        for name, xs in runs.items():
            out[name] = {"p50_ms": round(statistics.median(xs), 2), "p90_ms": round(_pct(xs, 0.9), 2)}
        out["added_p50_ms"] = round(out["proxy"]["p50_ms"] - out["direct"]["p50_ms"], 2)
        out["added_p90_ms"] = round(out["proxy"]["p90_ms"] - out["direct"]["p90_ms"], 2)
        tunnels = [json.loads(l) for l in (tmp / "audit.jsonl").read_text().splitlines() if l.strip()]
        out["audited_tunnels"] = sum(1 for r in tunnels if r.get("event") == "egress_tunnel")
        return out
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, 15)
            except ProcessLookupError:
                pass


def run(b) -> dict:
    """The run_bench.py section."""
    _log("== egress proxy: a 1 MiB HTTPS download through `egress` vs direct")
    res = measure(b.a.sidecar, rounds=max(b.a.rounds, 5) * 2)
    _log(f"   {res}")
    return res


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sidecar", required=True)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--per-round", type=int, default=10)
    a = ap.parse_args()
    print(json.dumps(measure(a.sidecar, a.rounds, a.per_round), indent=2))
