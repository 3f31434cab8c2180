"""The egress proxy (`mcp-warden-sidecar egress`) against local HTTPS servers.

Names resolve through tests/fixtures/dns_server.py (the proxy's
--resolv-conf): approved names point at 127.0.0.1, where an HTTPS server with
a certificate from a test CA made here listens. Loopback is refused by the
SSRF guard unless a client's `cidrs` names it, so the clients here approve
127.0.0.0/8 on the servers' ports; the refused cases use names that resolve
into 10.0.0.0/8. Every case asserts its audit line (the proxy's stdout).
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from conftest import NODE22, TESTS_DIR, free_port, sidecar_path, wait_http_ok
from remote_helpers import _listening_port, make_ca, start_dns
from warden_helpers import check_egress_record

FILES = TESTS_DIR / "fixtures" / "https_files.py"
TOKEN_A, TOKEN_B = "tok-a-3f9c1e", "tok-b-77d0aa"
A, B = "team-a/fetch", "team-b/git"
ALLOWED, PRIVATE, REBIND, OTHER, PLAIN = ("allowed.egress.test", "private.egress.test",
                                          "rebind.egress.test", "other.egress.test", "plain.egress.test")
# Resolves only through a search domain (as a pod's resolv.conf lists them).
SNEAKY = "sneaky.egress.test"


def proxy_url(name: str, token: str, port: int) -> str:
    return f"http://{urllib.parse.quote(name, safe='')}:{token}@127.0.0.1:{port}"


def basic(name: str, token: str) -> str:
    return "Basic " + base64.b64encode(f"{name}:{token}".encode()).decode()


class Env:
    """The proxy, its DNS stand-in, an HTTPS and a plain HTTP server."""

    def __init__(self, start, tmp: Path, max_conns: int = 64):
        self.tmp = tmp
        self.dns = start_dns(start, tmp, {
            ALLOWED: ["127.0.0.1"], OTHER: ["127.0.0.1"], PLAIN: ["127.0.0.1"],
            PRIVATE: ["10.11.12.13"],
            # First a loopback address the client's block allows, then a private one.
            REBIND: ["127.0.0.1", "10.11.12.14"],
            f"{SNEAKY}.corp.test": ["127.0.0.1"],
        })
        # A pod's resolver configuration: a search list and ndots:5.
        self.dns.resolv_conf.write_text(f"nameserver {self.dns.ip}\nsearch corp.test\n"
                                        "options ndots:5 timeout:2 attempts:1\n")
        self.pki = make_ca(tmp / "pki", [ALLOWED, OTHER, REBIND, "127.0.0.1"])
        self.index = tmp / "index"
        self.index.mkdir()
        self.https = start([sys.executable, FILES, "--listen", "127.0.0.1:0", "--cert", self.pki.cert,
                            "--key", self.pki.key, "--dir", self.index, "--name", "https",
                            "--log", tmp / "https.jsonl"])
        self.port = _listening_port(self.https)
        self.http = start([sys.executable, FILES, "--listen", "127.0.0.1:0", "--name", "plain",
                           "--log", tmp / "http.jsonl"])
        self.http_port = _listening_port(self.http)
        self.clients_file = tmp / "clients.json"
        self.write_clients()
        self.proxy_port, self.metrics_port = free_port(), free_port()
        self.audit_path = tmp / "audit.jsonl"
        self.audit_out = open(self.audit_path, "w")
        self.audit_checked = 0
        self.proxy = start([sidecar_path(), "egress", "--listen", f"127.0.0.1:{self.proxy_port}",
                            "--clients-file", self.clients_file, "--resolv-conf", self.dns.resolv_conf,
                            "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
                            "--max-conns-per-client", str(max_conns)], stdout=self.audit_out)
        wait_http_ok(f"http://127.0.0.1:{self.metrics_port}/healthz", proc=self.proxy)

    def write_clients(self, extra_b_hosts: list[dict] | None = None):
        loop = [{"cidr": "127.0.0.0/8", "port": self.port}]
        doc = {"version": 1, "clients": [
            {"name": A, "tokenSha256": hashlib.sha256(TOKEN_A.encode()).hexdigest(),
             "hosts": [{"host": h, "port": self.port} for h in (ALLOWED, PRIVATE, REBIND, SNEAKY)],
             "cidrs": loop + [{"cidr": "127.0.0.0/8", "port": self.http_port}],
             "plainHttpHosts": [{"host": PLAIN, "port": self.http_port}]},
            {"name": B, "tokenSha256": hashlib.sha256(TOKEN_B.encode()).hexdigest(),
             "hosts": [{"host": OTHER, "port": self.port}] + (extra_b_hosts or []), "cidrs": loop},
        ]}
        tmp = self.clients_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(self.clients_file)

    def audit(self) -> list[dict]:
        """Every record so far, each checked against the egress audit schema."""
        self.audit_out.flush()
        records = [json.loads(line) for line in self.audit_path.read_text().splitlines() if line.strip()]
        for record in records[self.audit_checked:]:
            check_egress_record(record)
        self.audit_checked = max(self.audit_checked, len(records))
        return records

    def wait_record(self, timeout: float = 10, **fields) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for r in self.audit():
                if all(r.get(k) == v for k, v in fields.items()):
                    return r
            time.sleep(0.05)
        raise AssertionError(f"no audit record with {fields}; have:\n" +
                             "\n".join(json.dumps(r) for r in self.audit()))

    def connect(self, target: str, auth: str | None, keep: bool = False):
        """Send CONNECT; (status, headers, body, socket or None)."""
        s = socket.create_connection(("127.0.0.1", self.proxy_port), timeout=10)
        head = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
        if auth:
            head += f"Proxy-Authorization: {auth}\r\n"
        s.sendall((head + "\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        raw_head, _, body = data.partition(b"\r\n\r\n")
        lines = raw_head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
        if status == 200 and keep:
            return status, headers, body, s
        want = int(headers.get("content-length", "0"))
        while len(body) < want:
            chunk = s.recv(4096)
            if not chunk:
                break
            body += chunk
        s.close()
        return status, headers, body.decode(errors="replace"), None

    def tls_get(self, sock: socket.socket, host: str, path: str = "/hello") -> str:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca))
        with ctx.wrap_socket(sock, server_hostname=host) as t:
            t.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            out = b""
            while chunk := t.recv(65536):
                out += chunk
        return out.decode(errors="replace")

    def metric(self, name: str, labels: str) -> float:
        import httpx
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics").text
        prefix = f"{name}{{{labels}}} " if labels else f"{name} "
        for line in text.splitlines():
            if line.startswith(prefix):
                return float(line.split()[-1])
        return 0.0


@pytest.fixture
def env(start_process, tmp_path):
    e = Env(start_process, tmp_path)
    yield e
    e.audit_out.close()


def test_an_allowed_host_is_reached_through_connect_with_curl(env):
    out = subprocess.run(
        ["curl", "-sS", "--max-time", "20", "--cacert", str(env.pki.ca),
         "--proxy", proxy_url(A, TOKEN_A, env.proxy_port), f"https://{ALLOWED}:{env.port}/hello"],
        capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "hello from https\n"
    r = env.wait_record(event="egress_tunnel", host=ALLOWED)
    assert (r["v"], r["client"], r["port"], r["outcome"], r["status"], r["address"]) == \
        (1, A, env.port, "tunnel", 200, "127.0.0.1")
    # TLS went end to end: the bytes are the handshake and the encrypted exchange.
    assert r["bytes_up"] > 200 and r["bytes_down"] > 500 and r["duration_ms"] > 0
    assert env.metric("mcpwarden_egress_requests_total", 'outcome="tunnel"') >= 1
    assert env.metric("mcpwarden_egress_bytes_total", 'direction="down"') >= r["bytes_down"]


def test_python_urllib_and_httpx_honour_https_proxy_with_credentials(env):
    code = (
        "import os, ssl, urllib.request, httpx\n"
        f"url = 'https://{ALLOWED}:{env.port}/hello'\n"
        "print(urllib.request.urlopen(url, timeout=20).read().decode(), end='')\n"
        "print(httpx.get(url, timeout=20).text, end='')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={
        **os.environ, "HTTPS_PROXY": proxy_url(A, TOKEN_A, env.proxy_port),
        "SSL_CERT_FILE": str(env.pki.ca), "NO_PROXY": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "hello from https\n" * 2
    deadline = time.monotonic() + 10
    while len([r for r in env.audit() if r["event"] == "egress_tunnel"]) < 2:
        assert time.monotonic() < deadline, env.audit()
        time.sleep(0.05)
    assert {r["client"] for r in env.audit()} == {A}


def test_no_or_a_wrong_credential_gets_407_and_nothing_else(env):
    for auth in (None, basic(A, "wrong"), basic(A, TOKEN_B), "Bearer " + TOKEN_A):
        status, headers, body, _ = env.connect(f"{ALLOWED}:{env.port}", auth)
        assert status == 407, (auth, status)
        assert headers["proxy-authenticate"] == 'Basic realm="mcp-warden-egress"'
        assert "x-mcp-warden-egress-reason" not in headers and body == ""
    records = [r for r in env.audit() if r["outcome"] == "unauthenticated"]
    assert len(records) == 4
    assert all(r["client"] is None and r["status"] == 407 and r["event"] == "egress_refused" for r in records)
    assert env.metric("mcpwarden_egress_requests_total", 'outcome="unauthenticated"') == 4


def test_a_host_not_approved_is_refused_before_any_connection(env):
    before = len((env.tmp / "https.jsonl").read_text().splitlines())
    for target in (f"{OTHER}:{env.port}", f"{ALLOWED}:{env.port + 1}", "example.org:443",
                   f"127.0.0.1:{env.port + 1}"):
        status, headers, body, _ = env.connect(target, basic(A, TOKEN_A))
        assert status == 403, target
        assert headers["x-mcp-warden-egress-reason"] == "host_not_approved"
        assert "not approved for team-a/fetch" in body
    r = env.wait_record(outcome="host_not_approved", host=OTHER)
    assert (r["client"], r["port"], r["status"]) == (A, env.port, 403)
    assert len((env.tmp / "https.jsonl").read_text().splitlines()) == before
    # An address is approved by a block: 127.0.0.1 on the block's port passes.
    status, _, _, sock = env.connect(f"127.0.0.1:{env.port}", basic(A, TOKEN_A), keep=True)
    assert status == 200
    assert "hello from https" in env.tls_get(sock, "127.0.0.1")


def test_another_clients_credential_cannot_use_this_clients_hosts(env):
    status, headers, _, _ = env.connect(f"{ALLOWED}:{env.port}", basic(B, TOKEN_B))
    assert (status, headers["x-mcp-warden-egress-reason"]) == (403, "host_not_approved")
    r = env.wait_record(outcome="host_not_approved", host=ALLOWED)
    assert r["client"] == B
    # B's own host works with B's credential, and not with A's.
    status, _, _, sock = env.connect(f"{OTHER}:{env.port}", basic(B, TOKEN_B), keep=True)
    assert status == 200
    assert "hello from https" in env.tls_get(sock, OTHER)
    status, _, _, _ = env.connect(f"{OTHER}:{env.port}", basic(A, TOKEN_A))
    assert status == 403


def test_a_name_resolving_to_a_private_address_is_refused(env):
    status, headers, body, _ = env.connect(f"{PRIVATE}:{env.port}", basic(A, TOKEN_A))
    assert (status, headers["x-mcp-warden-egress-reason"]) == (403, "address_not_allowed")
    assert "10.11.12.13 is a private address" in body
    r = env.wait_record(outcome="address_not_allowed", host=PRIVATE)
    assert (r["client"], r["address"], r["status"]) == (A, "10.11.12.13", 403)
    # The name was looked up by the proxy itself.
    assert env.dns.queries(PRIVATE)


def test_a_rebinding_name_is_caught_on_the_second_lookup(env):
    status, _, _, sock = env.connect(f"{REBIND}:{env.port}", basic(A, TOKEN_A), keep=True)
    assert status == 200
    assert "hello from https" in env.tls_get(sock, REBIND)
    # The same name now answers a private address: the next CONNECT asks again and is refused.
    status, headers, _, _ = env.connect(f"{REBIND}:{env.port}", basic(A, TOKEN_A))
    assert (status, headers["x-mcp-warden-egress-reason"]) == (403, "address_not_allowed")
    r = env.wait_record(outcome="address_not_allowed", host=REBIND)
    assert (r["client"], r["address"]) == (A, "10.11.12.14")
    assert len(env.dns.queries(REBIND)) >= 2
    ok = env.wait_record(event="egress_tunnel", host=REBIND)
    assert ok["address"] == "127.0.0.1"


def test_names_are_resolved_fully_qualified_never_through_the_search_list(env):
    status, headers, body, _ = env.connect(f"{SNEAKY}:{env.port}", basic(A, TOKEN_A))
    assert (status, headers["x-mcp-warden-egress-reason"]) == (502, "upstream_failed"), body
    r = env.wait_record(outcome="upstream_failed", host=SNEAKY)
    assert r["client"] == A and "cannot resolve" in r["detail"]
    assert not [q for q in env.dns.queries(f"{SNEAKY}.corp.test")]


def test_plain_http_only_where_approved_and_never_https_absolute_form(env):
    proxies = {"http://": proxy_url(A, TOKEN_A, env.proxy_port)}
    import httpx
    with httpx.Client(proxy=proxies["http://"], trust_env=False, timeout=20) as c:
        r = c.get(f"http://{PLAIN}:{env.http_port}/hello")
        assert (r.status_code, r.text) == (200, "hello from plain\n")
        r = c.get(f"http://{ALLOWED}:{env.http_port}/hello")
        assert (r.status_code, r.headers["x-mcp-warden-egress-reason"]) == (403, "host_not_approved")
        # The upstream is asked for the approved host, whatever Host the client sends.
        r = c.get(f"http://{PLAIN}:{env.http_port}/hello", headers={"Host": "intranet.corp"})
        assert r.status_code == 200
    hosts = [json.loads(l)["host"] for l in (env.tmp / "http.jsonl").read_text().splitlines()]
    assert hosts == [f"{PLAIN}:{env.http_port}"] * 2, hosts
    rec = env.wait_record(event="egress_http", host=PLAIN)
    assert (rec["client"], rec["method"], rec["outcome"], rec["status"], rec["bytes_down"]) == \
        (A, "GET", "forwarded", 200, len("hello from plain\n"))
    # An https:// URL in absolute form is not forwarded (the proxy would see plaintext).
    s = socket.create_connection(("127.0.0.1", env.proxy_port), timeout=10)
    s.sendall(f"GET https://{ALLOWED}:{env.port}/hello HTTP/1.1\r\nHost: {ALLOWED}\r\n"
              f"Proxy-Authorization: {basic(A, TOKEN_A)}\r\nConnection: close\r\n\r\n".encode())
    answer = b""
    while chunk := s.recv(4096):
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 400") and b"bad_request" in answer
    env.wait_record(outcome="bad_request", client=A)


def test_a_client_at_its_connection_bound_is_refused_not_queued(start_process, tmp_path):
    env = Env(start_process, tmp_path, max_conns=2)
    held = []
    for _ in range(2):
        status, _, _, sock = env.connect(f"{ALLOWED}:{env.port}", basic(A, TOKEN_A), keep=True)
        assert status == 200
        held.append(sock)
    started = time.monotonic()
    status, headers, _, _ = env.connect(f"{ALLOWED}:{env.port}", basic(A, TOKEN_A))
    assert (status, headers["x-mcp-warden-egress-reason"]) == (429, "limited")
    assert time.monotonic() - started < 2
    env.wait_record(outcome="limited", client=A)
    # Another client is not affected, and a closed tunnel gives its slot back.
    assert env.connect(f"{OTHER}:{env.port}", basic(B, TOKEN_B))[0] == 200
    held.pop().close()
    deadline = time.monotonic() + 10
    while env.connect(f"{ALLOWED}:{env.port}", basic(A, TOKEN_A))[0] != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    for s in held:
        s.close()
    env.audit_out.close()


def test_the_clients_file_is_reloaded_and_a_bad_one_keeps_the_last_good_set(env):
    assert env.connect(f"{ALLOWED}:{env.port}", basic(B, TOKEN_B))[0] == 403
    env.write_clients(extra_b_hosts=[{"host": ALLOWED, "port": env.port}])
    deadline = time.monotonic() + 15
    while env.connect(f"{ALLOWED}:{env.port}", basic(B, TOKEN_B))[0] != 200:
        assert time.monotonic() < deadline, "the new clients file was not taken"
        time.sleep(0.3)
    env.clients_file.write_text("{not json")
    time.sleep(4)
    assert env.connect(f"{ALLOWED}:{env.port}", basic(B, TOKEN_B))[0] == 200
    assert "invalid clients file" in env.proxy.stderr_text()
    assert env.metric("mcpwarden_egress_clients_reload_failing", "") == 1


def _wheel(index: Path) -> None:
    """A one-file wheel `egtiny` 1.0 in a PEP 503 simple index under `index`."""
    import zipfile
    name = "egtiny-1.0-py3-none-any.whl"
    pkg = index / "simple" / "egtiny"
    pkg.mkdir(parents=True)
    files = {"egtiny.py": "X = 1\n",
             "egtiny-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: egtiny\nVersion: 1.0\n",
             "egtiny-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{p},,\n" for p in files) + "egtiny-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(pkg / name, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)
        z.writestr("egtiny-1.0.dist-info/RECORD", record)
    (pkg / "index.html").write_text(f'<html><body><a href="{name}">{name}</a></body></html>\n')


def test_pip_downloads_through_the_proxy(env, tmp_path):
    _wheel(env.index)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
         "--index-url", f"https://{ALLOWED}:{env.port}/simple/", "--cert", str(env.pki.ca),
         "-d", str(tmp_path / "dl"), "egtiny"],
        capture_output=True, text=True, timeout=120, env={
            **os.environ, "HTTPS_PROXY": proxy_url(A, TOKEN_A, env.proxy_port), "NO_PROXY": "",
            # pip's requests takes REQUESTS_CA_BUNDLE over --cert / PIP_CERT when it is set.
            "REQUESTS_CA_BUNDLE": str(env.pki.ca), "PIP_CERT": str(env.pki.ca)})
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "dl" / "egtiny-1.0-py3-none-any.whl").exists()
    env.wait_record(event="egress_tunnel", client=A, host=ALLOWED)


def test_node_undici_with_node_use_env_proxy(env):
    if not NODE22.exists():
        pytest.skip(f"{NODE22} missing")
    code = f"fetch('https://{ALLOWED}:{env.port}/hello').then(r => r.text()).then(t => process.stdout.write(t))" \
           ".catch(e => { console.error(e); process.exit(1) })"
    base = {**os.environ, "HTTPS_PROXY": proxy_url(A, TOKEN_A, env.proxy_port), "NO_PROXY": "",
            "NODE_EXTRA_CA_CERTS": str(env.pki.ca)}
    out = subprocess.run([NODE22, "-e", code], capture_output=True, text=True, timeout=60,
                         env={**base, "NODE_USE_ENV_PROXY": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "hello from https\n"
    r = env.wait_record(event="egress_tunnel", client=A, host=ALLOWED)
    assert r["bytes_down"] > 0


def test_npm_honours_https_proxy_with_credentials(env):
    npm = shutil.which("npm")
    if not npm:
        pytest.skip("npm is not installed")
    (env.index / "egtiny").write_text(json.dumps({
        "name": "egtiny", "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": {"name": "egtiny", "version": "1.0.0",
                               "dist": {"tarball": f"https://{ALLOWED}:{env.port}/egtiny-1.0.0.tgz"}}}}))
    out = subprocess.run([npm, "view", "egtiny", "version", "--registry", f"https://{ALLOWED}:{env.port}/",
                          "--cache", str(env.tmp / "npm-cache"), "--prefer-online",
                          # npm does not take NODE_EXTRA_CA_CERTS for its registry: its own cafile.
                          "--cafile", str(env.pki.ca)],
                         capture_output=True, text=True, timeout=120, cwd=env.tmp, env={
                             **os.environ, "HTTPS_PROXY": proxy_url(A, TOKEN_A, env.proxy_port),
                             "NO_PROXY": "", "NODE_EXTRA_CA_CERTS": str(env.pki.ca)})
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "1.0.0"
    env.wait_record(event="egress_tunnel", client=A, host=ALLOWED)


def test_sigterm_stops_the_proxy_within_its_drain_even_with_a_tunnel_open(env):
    """The kubelet stops a pod with SIGTERM; as PID 1 a process without a
    handler ignores it and is killed only at the end of the grace period, so
    every rollout and uninstall waited for it. The proxy stops taking
    connections, gives open tunnels a few seconds, and exits 0."""
    status, _, _, tunnel = env.connect(f"{ALLOWED}:{env.port}", basic(A, TOKEN_A), keep=True)
    assert status == 200 and tunnel is not None
    proc = env.proxy.proc
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=15)
    took = time.monotonic() - started
    tunnel.close()
    assert rc == 0, rc
    assert took < 10, f"the proxy took {took:.1f}s to stop"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", env.proxy_port), timeout=2).close()
