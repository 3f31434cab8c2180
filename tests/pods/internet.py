"""The internet as a remote MCPServer's pod sees it, stood in for inside the
pod's network namespace (this machine reaches no internet).

    Internet(work, pki, remote_spec, secret_values) ... Pod(..., network=internet.start, dns=internet.dns)
    internet.requests()  what the remote MCP server was sent (headers and body)
    internet.token_requests()  what the identity provider was asked

Inside the namespace (as root, with `nsenter --net`; nothing of it is in the
pod's containers):
- two global unicast addresses on its loopback, one for the remote's host
  and one for the identity provider's: the facade's SSRF guard refuses
  every block the IANA special-purpose registries do not mark globally
  reachable (loopback, private, documentation, benchmarking …), as it
  would in the cluster, so the stand-in internet must use ordinary public
  addresses. The namespace has no route out: nothing sent to them leaves it;
- the cluster DNS (tests/fixtures/dns_server.py) at 10.96.0.10, the usual
  kube-dns Service address, answering those two names; the kubelet's
  /etc/resolv.conf names it (Pod(dns=...));
- the remote MCP server: tests/fixtures/tracker_server.py (the official MCP
  Python SDK) behind tests/fixtures/tls_front.py on HOST:443, which records
  every request, so the test sees which credential reached it;
- the identity provider: tests/fixtures/token_endpoint.py on HOST:443 at the
  token URL's path (client credentials, token exchange), for the client id
  and audience the spec names and the client secret the test's Secret holds.
Both serve a certificate from a throwaway CA (tests/e2e/remote_helpers.make_ca)
that the sidecar image's stand-in trusts in its /etc/ssl/certs bundle, as a
real image trusts the public CAs.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DNS_IP = "10.96.0.10"
REMOTE_IP = "11.111.0.7"
IDP_IP = "11.111.0.8"
BACKEND_PORT = 8000  # the tracker server behind its TLS front, on the remote's address


def token_urls(remote: dict) -> list[str]:
    """Every token endpoint a spec.remote names (the facade's and the rules')."""
    auth = remote.get("auth", {})
    grants = [auth.get("facade", {})] + list(auth.get("rules", []))
    return [g[kind]["tokenUrl"] for g in grants for kind in ("clientCredentials", "tokenExchange") if kind in g]


def egress_hosts(remote: dict) -> set[str]:
    """The hosts a remote server's pod must reach: the remote's and its token endpoints'."""
    return {urlparse(remote["url"]).hostname} | {urlparse(u).hostname for u in token_urls(remote)}


class Internet:
    def __init__(self, work: Path, pki, remote: dict, secret_values: dict[tuple[str, str], str]):
        self.work = work
        self.pki = pki
        self.remote = remote
        self.secret_values = secret_values
        self.dns = DNS_IP
        self.procs: list[subprocess.Popen] = []
        self.front_log = work / "remote-requests.jsonl"
        self.idp_log = work / "idp-requests.jsonl"
        urls = token_urls(remote)
        idp_hosts = {urlparse(u).hostname for u in urls}
        assert len(idp_hosts) == 1, f"one identity provider expected: {idp_hosts}"
        self.remote_host = urlparse(remote["url"]).hostname
        self.idp_host = idp_hosts.pop()
        paths = {urlparse(u).path for u in urls}
        assert len(paths) == 1, paths
        self.token_path = paths.pop()

    def _grant(self, kind: str) -> dict:
        auth = self.remote["auth"]
        return next(g[kind] for g in [auth.get("facade", {}), *auth.get("rules", [])] if kind in g)

    def _spawn(self, pod, name: str, argv: list[str]) -> None:
        log = (self.work / f"internet-{name}.log").open("w")
        proc = subprocess.Popen(["nsenter", f"--net=/proc/{pod.holder.pid}/ns/net", "--", *argv],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs.append(proc)
        deadline = time.monotonic() + 30
        text = self.work / f"internet-{name}.log"
        while not re.search(r"listening on ", text.read_text()):
            assert proc.poll() is None, f"{name} exited:\n{text.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"{name} did not start:\n{text.read_text()[-3000:]}"
            time.sleep(0.05)

    def _wait_tcp(self, pod, ip: str, port: int) -> None:
        probe = (f"import socket,time\nfor _ in range(300):\n try:\n  socket.create_connection(('{ip}',{port}),1)"
                 f".close(); break\n except OSError: time.sleep(0.1)\nelse: raise SystemExit(1)")
        subprocess.run(["nsenter", f"--net=/proc/{pod.holder.pid}/ns/net", "--", sys.executable, "-c", probe],
                       check=True, timeout=60)

    def start(self, pod) -> None:
        net = ["nsenter", f"--net=/proc/{pod.holder.pid}/ns/net", "--"]
        for ip in (REMOTE_IP, IDP_IP, DNS_IP):
            subprocess.run([*net, "ip", "addr", "add", f"{ip}/32", "dev", "lo"], check=True)
        self.front_log.touch()
        self.idp_log.touch()
        self._spawn(pod, "dns", [sys.executable, str(FIXTURES / "dns_server.py"), "--listen", f"{DNS_IP}:53",
                                 "--answer", f"{self.remote_host}={REMOTE_IP}",
                                 "--answer", f"{self.idp_host}={IDP_IP}",
                                 "--log", str(self.work / "dns-queries.jsonl")])
        self._spawn(pod, "tracker", [sys.executable, str(FIXTURES / "tracker_server.py"),
                                     "--listen", f"{REMOTE_IP}:{BACKEND_PORT}"])
        self._wait_tcp(pod, REMOTE_IP, BACKEND_PORT)
        self._spawn(pod, "front", [sys.executable, str(FIXTURES / "tls_front.py"), "--listen", f"{REMOTE_IP}:443",
                                   "--cert", str(self.pki.cert), "--key", str(self.pki.key),
                                   "--backend", f"{REMOTE_IP}:{BACKEND_PORT}", "--log", str(self.front_log)])
        cc = self._grant("clientCredentials")
        ref = cc["clientSecretRef"]
        exchange = self._grant("tokenExchange") if any("tokenExchange" in r for r in
                                                       self.remote["auth"].get("rules", [])) else {}
        self._spawn(pod, "idp", [sys.executable, str(FIXTURES / "token_endpoint.py"), "--listen", f"{IDP_IP}:443",
                                 "--path", self.token_path, "--cert", str(self.pki.cert), "--key", str(self.pki.key),
                                 "--client-id", cc["clientId"],
                                 "--client-secret", self.secret_values[(ref["name"], ref["key"])],
                                 "--audience", exchange.get("audience", "-"), "--log", str(self.idp_log)])

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.front_log.read_text().splitlines() if line.strip()]

    def calls(self, tool: str) -> list[dict]:
        """The tools/call requests of `tool` the remote was sent."""
        out = []
        for r in self.requests():
            try:
                body = json.loads(r["body"]) if r["body"] else {}
            except json.JSONDecodeError:
                continue
            if body.get("method") == "tools/call" and body["params"]["name"] == tool:
                out.append(r)
        return out

    def token_requests(self) -> list[dict]:
        return [json.loads(line) for line in self.idp_log.read_text().splitlines() if line.strip()]

    def logs(self) -> str:
        return "\n".join(f"--- internet {p.name}\n{p.read_text()[-2000:]}"
                         for p in sorted(self.work.glob("internet-*.log")))

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
