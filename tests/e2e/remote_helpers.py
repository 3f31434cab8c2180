"""Helpers for the remote-server (HTTPS upstream) tests.

    make_ca(dir, names) -> Pki            a test CA and a server certificate for names (DNS or IP)
    start_remote(start, pki, tmp, listen_host="127.0.0.1") -> Remote
        the dual-era fixture MCP server (tests/conformance/modern-fixture-server.mjs) behind
        tests/fixtures/tls_front.py: .url (https://localhost:PORT/mcp), .requests() (what it
        was sent), .drop() (close every connection), .restart_backend() (the server process
        restarts: sessions are gone), .redirect(url)
    start_token_endpoint(start, pki, tmp) -> TokenEndpoint   tests/fixtures/token_endpoint.py
    start_dns(start, tmp, answers) -> Dns  tests/fixtures/dns_server.py on a random 127.x
        address, port 53 (needs root: skips otherwise), .resolv_conf
"""
from __future__ import annotations

import datetime
import ipaddress
import json
import os
import random
import re
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from conftest import NODE22, TESTS_DIR, free_port, wait_port

FIXTURE_SERVER = TESTS_DIR / "conformance" / "modern-fixture-server.mjs"
TLS_FRONT = TESTS_DIR / "fixtures" / "tls_front.py"
TOKEN_ENDPOINT = TESTS_DIR / "fixtures" / "token_endpoint.py"
DNS_SERVER = TESTS_DIR / "fixtures" / "dns_server.py"


@dataclass
class Pki:
    ca: Path
    cert: Path
    key: Path


def make_ca(directory: Path, names: list[str]) -> Pki:
    """A self-signed CA and a server certificate it signs for `names`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcp-warden test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    alt = []
    for n in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            alt.append(x509.DNSName(n))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pki.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return pki


def _listening_port(mp, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"listening on [^\s:]+:(\d+)", mp.stderr_text()) or \
            re.search(r"listening on http://127\.0\.0\.1:(\d+)", mp.stderr_text())
        if m:
            return int(m.group(1))
        assert mp.alive(), f"{mp.cmd[1]} exited:\n{mp.stderr_text()[-3000:]}"
        time.sleep(0.05)
    raise AssertionError(f"{mp.cmd} did not say where it listens:\n{mp.stderr_text()[-3000:]}")


class Remote:
    def __init__(self, start, pki: Pki, tmp: Path, listen_host: str, host_name: str):
        self.start = start
        self.log = tmp / f"front-{random.randrange(1 << 30)}.jsonl"
        self.log.touch()
        self.backend_port = free_port()
        self.backend = self._start_backend()
        self.control_port = free_port()
        self.front = start([sys.executable, str(TLS_FRONT), "--listen", f"{listen_host}:0",
                            "--cert", str(pki.cert), "--key", str(pki.key),
                            "--backend", f"127.0.0.1:{self.backend_port}", "--log", str(self.log),
                            "--control", f"127.0.0.1:{self.control_port}"])
        self.port = _listening_port(self.front)
        self.url = f"https://{host_name}:{self.port}/mcp"

    def _start_backend(self):
        mp = self.start([str(NODE22), str(FIXTURE_SERVER), "--http", str(self.backend_port)])
        wait_port(self.backend_port, proc=mp)
        return mp

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def calls(self, tool: str | None = None) -> list[dict]:
        """The tools/call requests the server was sent (optionally of one tool)."""
        out = []
        for r in self.requests():
            try:
                body = json.loads(r["body"]) if r["body"] else {}
            except json.JSONDecodeError:
                continue
            if body.get("method") == "tools/call" and (tool is None or body["params"]["name"] == tool):
                out.append({**r, "json": body})
        return out

    def control(self, path: str) -> dict:
        return httpx.post(f"http://127.0.0.1:{self.control_port}{path}", timeout=5).json()

    def drop(self) -> int:
        return self.control("/drop")["dropped"]

    def redirect(self, to: str | None) -> None:
        self.control(f"/redirect?to={to}" if to else "/redirect")

    def restart_backend(self) -> None:
        """The server process dies and comes back on the same port (its sessions are gone)."""
        self.backend.stop(grace=2)
        self.drop()
        self.backend = self._start_backend()


def start_remote(start, pki: Pki, tmp: Path, listen_host: str = "127.0.0.1",
                 host_name: str = "localhost") -> Remote:
    return Remote(start, pki, tmp, listen_host, host_name)


class TokenEndpoint:
    def __init__(self, start, pki: Pki, tmp: Path, client_id: str, client_secret: str, audience: str):
        self.log = tmp / "token-endpoint.jsonl"
        self.log.touch()
        self.proc = start([sys.executable, str(TOKEN_ENDPOINT), "--listen", "127.0.0.1:0",
                           "--cert", str(pki.cert), "--key", str(pki.key), "--client-id", client_id,
                           "--client-secret", client_secret, "--audience", audience, "--log", str(self.log)])
        self.port = _listening_port(self.proc)
        self.url = f"https://127.0.0.1:{self.port}/token"

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


def start_token_endpoint(start, pki: Pki, tmp: Path, client_id: str = "warden",
                         client_secret: str = "cc-secret-value", audience: str = "remote-mcp") -> TokenEndpoint:
    return TokenEndpoint(start, pki, tmp, client_id, client_secret, audience)


class Dns:
    def __init__(self, start, tmp: Path, answers: dict[str, list[str]]):
        if os.geteuid() != 0:
            pytest.skip("the DNS fixture listens on port 53 of a loopback address, which needs root")
        self.ip = f"127.53.{random.randrange(1, 250)}.{random.randrange(1, 250)}"
        self.log = tmp / f"dns-{self.ip}.jsonl"
        self.log.touch()
        cmd = [sys.executable, str(DNS_SERVER), "--listen", f"{self.ip}:53", "--log", str(self.log)]
        for name, ips in answers.items():
            cmd += ["--answer", f"{name}={','.join(ips)}"]
        self.proc = start(cmd)
        _listening_port(self.proc)
        self.resolv_conf = tmp / f"resolv-{self.ip}.conf"
        self.resolv_conf.write_text(f"nameserver {self.ip}\noptions timeout:2 attempts:1\n")

    def queries(self, name: str, qtype: int = 1) -> list[dict]:
        return [q for q in (json.loads(line) for line in self.log.read_text().splitlines() if line.strip())
                if q["name"] == name and q["qtype"] == qtype]


def start_dns(start, tmp: Path, answers: dict[str, list[str]]) -> Dns:
    return Dns(start, tmp, answers)


def loopback_alias_usable(ip: str) -> bool:
    """Whether this machine can bind `ip` (any 127.x address on Linux)."""
    with socket.socket() as s:
        try:
            s.bind((ip, 0))
            return True
        except OSError:
            return False
