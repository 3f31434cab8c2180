"""TLS on the facade's MCP listener (`--tls-cert-file`/`--tls-key-file`, a
mounted kubernetes.io/tls Secret in a pod): clients reach `/mcp` over HTTPS
only, a renewed certificate is served without a restart, and replicas relay
a session's requests to its owner over TLS, trusting only the certificate
they serve themselves (they hold the same Secret). Real certificates from
the `cryptography` package; real facades in front of server-everything."""
from __future__ import annotations

import datetime
import ipaddress
import json
import os
import socket
import ssl
import time
from pathlib import Path

import httpx
import pytest

from conftest import free_port, sidecar_path, wait_http_ok
from helpers import everything_stdio, metric

ACCEPT = "application/json, text/event-stream"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


class Authority:
    """A CA and the serving certificates it signs (as cert-manager would)."""

    def __init__(self):
        from cryptography import x509
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.name = name
        self.cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, _sha256()))

    def pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, directory: Path) -> bytes:
        """Write tls.crt and tls.key for localhost/127.0.0.1 into `directory`; the DER of the certificate."""
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "facade")]))
                .issuer_name(self.name).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(hours=1))
                .add_extension(x509.SubjectAlternativeName([
                    x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                .sign(self.key, _sha256()))
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tls.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cert.public_bytes(serialization.Encoding.DER)


def _sha256():
    from cryptography.hazmat.primitives import hashes
    return hashes.SHA256()


def served_certificate(port: int, ca: Path) -> bytes:
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.getpeercert(binary_form=True)


def start_replica(start_process, tls_dir: Path, key: Path | None = None, port: int | None = None,
                  extra: tuple = ()):
    port, admin = port or free_port(), free_port()
    cmd = [str(sidecar_path()), "run", "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
           "--tls-cert-file", str(tls_dir / "tls.crt"), "--tls-key-file", str(tls_dir / "tls.key"), *extra]
    if key is not None:
        cmd += ["--peer-key-file", str(key), "--advertise-addr", f"127.0.0.1:{port}"]
    proc = start_process([*cmd, "--", *everything_stdio()])
    wait_http_ok(f"http://127.0.0.1:{admin}/readyz", proc=proc)
    return {"port": port, "admin": f"http://127.0.0.1:{admin}", "proc": proc}


@pytest.fixture
def authority(tmp_path):
    if not sidecar_path().exists():
        pytest.skip(f"facade binary {sidecar_path()} does not exist")
    ca = Authority()
    (tmp_path / "ca.crt").write_bytes(ca.pem())
    return ca


def test_https_only_and_a_renewed_certificate_is_served_without_restart(start_process, tmp_path, authority):
    tls_dir = tmp_path / "tls"
    first = authority.issue(tls_dir)
    r = start_replica(start_process, tls_dir)
    ca = tmp_path / "ca.crt"
    with httpx.Client(verify=ssl.create_default_context(cafile=str(ca)), timeout=10) as client:
        resp = client.post(f"https://localhost:{r['port']}/mcp", json=INIT,
                           headers={"Accept": ACCEPT, "Content-Type": "application/json"})
        assert resp.status_code == 200, resp.text
    with pytest.raises(httpx.HTTPError):  # no plain HTTP on the TLS port
        httpx.post(f"http://127.0.0.1:{r['port']}/mcp", json=INIT, timeout=5,
                   headers={"Accept": ACCEPT, "Content-Type": "application/json"})
    assert served_certificate(r["port"], ca) == first

    # cert-manager renews: new files in place (the kubelet swaps them atomically).
    renewed = authority.issue(tmp_path / "next")
    for name in ("tls.key", "tls.crt"):
        os.replace(tmp_path / "next" / name, tls_dir / name)
    deadline = time.monotonic() + 25
    while served_certificate(r["port"], ca) != renewed:
        assert time.monotonic() < deadline, "the renewed certificate was never served"
        time.sleep(0.5)
    assert r["proc"].alive(), "reloaded without a restart"


def test_replicas_relay_over_tls_to_peers_with_the_same_certificate(start_process, tmp_path, authority):
    tls_dir = tmp_path / "tls"
    authority.issue(tls_dir)
    key = tmp_path / "peer.key"
    key.write_bytes(os.urandom(32))
    a = start_replica(start_process, tls_dir, key)
    b = start_replica(start_process, tls_dir, key)
    stranger_dir = tmp_path / "stranger"
    authority.issue(stranger_dir)  # same CA, another certificate: not a peer
    c = start_replica(start_process, stranger_dir, key)
    ca = tmp_path / "ca.crt"
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    with httpx.Client(verify=ssl.create_default_context(cafile=str(ca)), timeout=20) as client:
        init = client.post(f"https://localhost:{a['port']}/mcp", json=INIT, headers=headers)
        assert init.status_code == 200, init.text
        session = init.headers["mcp-session-id"]
        headers["Mcp-Session-Id"] = session
        headers["Mcp-Protocol-Version"] = "2025-11-25"
        client.post(f"https://localhost:{a['port']}/mcp", headers=headers,
                    json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = client.post(f"https://localhost:{b['port']}/mcp", headers=headers,
                             json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert listed.status_code == 200, listed.text
        assert "echo" in listed.text
        assert metric(b["admin"], "mcpwarden_forwarded_requests_total") >= 1
        # A replica serving another certificate is not trusted as a peer.
        refused = client.post(f"https://localhost:{c['port']}/mcp", headers=headers,
                              json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        assert refused.status_code == 404, refused.text


def call_result(resp: httpx.Response) -> dict:
    """The JSON-RPC answer in a plain JSON or SSE response."""
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        for line in resp.text.splitlines():
            if line.startswith("data:") and '"id"' in line:
                return json.loads(line[5:])
    return resp.json()


def test_an_identity_budget_is_asked_of_its_owner_over_tls(start_process, tmp_path, authority):
    """With TLS on the listener, replicas ask an identity's owner over TLS
    (trusting only their own certificate): four calls of 4/min succeed
    across two replicas, the rest are refused."""
    from warden_helpers import policy_doc, token_entry
    tls_dir = tmp_path / "tls"
    authority.issue(tls_dir)
    key = tmp_path / "peer.key"
    key.write_bytes(os.urandom(32))
    token = "carol-" + os.urandom(8).hex()
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(policy_doc(
        auth={"staticTokens": {"tokens": [token_entry(token, "carol")]}},
        roles=[{"role": "user", "subjects": ["carol"]}], defaultAction="allow",
        limits={"maxCallsPerIdentity": {"calls": 4, "per": "minute"}})))
    ports = [free_port(), free_port()]
    peers = [arg for p in ports for arg in ("--peer", f"127.0.0.1:{p}")]
    replicas = [start_replica(start_process, tls_dir, key, port=p, extra=("--policy", str(policy), *peers))
                for p in ports]
    left = 60 - time.time() % 60
    if left < 15:
        time.sleep(left + 0.5)  # one window holds every call
    base = {"Accept": ACCEPT, "Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    outcomes = []
    with httpx.Client(verify=ssl.create_default_context(cafile=str(tmp_path / "ca.crt")), timeout=20) as client:
        sessions = []
        for r in replicas:
            url = f"https://localhost:{r['port']}/mcp"
            init = client.post(url, json=INIT, headers=base)
            assert init.status_code == 200, init.text
            headers = {**base, "Mcp-Session-Id": init.headers["mcp-session-id"],
                       "Mcp-Protocol-Version": "2025-11-25"}
            client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            sessions.append((url, headers))
        for n in range(6):
            url, headers = sessions[n % 2]
            answer = call_result(client.post(url, headers=headers, json={
                "jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": f"m{n}"}}}))
            outcomes.append(answer["result"]["content"][0]["text"] if "result" in answer
                            else (answer["error"]["code"], answer["error"]["data"]["reason"]))
    assert outcomes[:4] == [f"Echo: m{n}" for n in range(4)], outcomes
    assert outcomes[4:] == [(-32005, "calls_per_identity_exceeded")] * 2, outcomes
    asks = sum(metric(r["admin"], "mcpwarden_identity_budget_asks_total") for r in replicas)
    assert asks == 3, asks  # the calls on the replica that does not own carol
