"""Helpers for the policy, audit/metrics and auth end-to-end tests
(import: ``from warden_helpers import ...``).

    filesystem_stdio(root), git_stdio(repo), policy_fixture_stdio()   upstream commands
    policy_doc(**fields) -> dict            a FacadePolicy document (apiVersion/kind set)
    token_entry(token, subject, groups)     a staticTokens entry (sha256 of the token)
    AuthedMcp(url, token)                   RawMcp that sends `Authorization: Bearer`
    rpc_error(response) -> dict             the `error` of a JSON-RPC response (asserted)
    sdk_client(url, token=None, **kw)       the official SDK client, with a bearer token
    sdk_error(coro) -> MCPError             await a call that must fail with an MCPError
    Audit(path)                             the facade's audit file: .lines(), .wait(pred)
    check_audit_record(r), check_egress_record(r)   a facade / egress proxy audit line against its schema
    Keys                                    RS256 / ES256 / EdDSA key pairs, a JWKS, JWT minting
    HeldStreamAuth(tmp_path, static)        rita by short-lived JWTs, sam by a static token: the
                                            policy for tests of streams their credential ends
"""
from __future__ import annotations

import base64
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

import httpx

from conftest import NODE_MODULES, REPO_ROOT, TESTS_DIR, system_node
from helpers import RawMcp

FILESYSTEM_JS = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
POLICY_FIXTURE = TESTS_DIR / "fixtures" / "policy_fixture.py"
API = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "FacadePolicy"}
READ_TIMEOUT = 20


def filesystem_stdio(root: Path | str) -> list[str]:
    return [system_node(), str(FILESYSTEM_JS), str(root)]


def git_stdio(repo: Path | str) -> list[str]:
    exe = Path(sys.executable).parent / "mcp-server-git"
    return [str(exe), "--repository", str(repo)]


def policy_fixture_stdio() -> list[str]:
    return [sys.executable, str(POLICY_FIXTURE)]

def fixture_facade(facade, tmp_path, policy: dict, **kw):
    """A facade in front of the policy fixture, with its drift state file and raw log."""
    state, log = tmp_path / "drift.state", tmp_path / "upstream.log"
    fa = facade(upstream=policy_fixture_stdio(), policy=policy,
                env={"FIXTURE_STATE": str(state), "FIXTURE_LOG": str(log)}, **kw)
    fa.state, fa.log = state, log
    return fa


async def listed(client) -> dict:
    """The tools a client lists, by name."""
    return {t.name: t for t in (await client.list_tools()).tools}


def policy_doc(**fields: Any) -> dict:
    return {**API, **fields}


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def token_entry(token: str, subject: str, groups: list[str] | None = None) -> dict:
    entry = {"sha256": sha256_hex(token), "subject": subject}
    if groups:
        entry["groups"] = groups
    return entry


class AuthedMcp(RawMcp):
    """RawMcp whose every request carries `Authorization: Bearer <token>` (if given)."""

    def __init__(self, url: str, token: str | None = None, **kw):
        super().__init__(url, **kw)
        if token is not None:
            self.http.headers["Authorization"] = f"Bearer {token}"


def rpc_error(response: dict) -> dict:
    assert "error" in response, f"expected a JSON-RPC error, got {response}"
    return response["error"]


# ---------------------------------------------------------------------------
# The official SDK client
# ---------------------------------------------------------------------------
def sdk_client(url: str, token: str | None = None, **kw):
    """`mcp.Client` over Streamable HTTP, sending a bearer token when given.

    The SDK takes headers through a pre-configured httpx2 client."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else None
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    kw.setdefault("read_timeout_seconds", READ_TIMEOUT)
    kw.setdefault("mode", "legacy")
    return Client(transport, **kw)


async def sdk_error(awaitable):
    """Await a client call that must fail with a JSON-RPC error; return the MCPError."""
    from mcp.shared.exceptions import MCPError
    try:
        result = await awaitable
    except MCPError as e:
        return e
    raise AssertionError(f"expected a JSON-RPC error, got {result!r}")


def text_of_result(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


# ---------------------------------------------------------------------------
# Audit
# ---------------------------------------------------------------------------
AUDIT_SCHEMA_PATH = REPO_ROOT / "docs" / "audit-record.v1.schema.json"
EGRESS_AUDIT_SCHEMA_PATH = REPO_ROOT / "docs" / "egress-audit-record.v1.schema.json"
_validators: dict[Path, Any] = {}


def _check_against(schema_path: Path, what: str, record: dict) -> dict:
    """Fail unless `record` is valid against the published schema at
    `schema_path`, naming every field that is not; the schema itself is
    checked once, when first used."""
    validator = _validators.get(schema_path)
    if validator is None:
        import jsonschema
        schema = json.loads(schema_path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = _validators[schema_path] = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(record), key=lambda e: list(e.path))
    assert not errors, f"{what} does not match {schema_path.name}: " + "; ".join(
        f"{'/'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in errors) + f"\n{record}"
    return record


def check_audit_record(record: dict) -> dict:
    """Fail unless `record` is valid against the published audit schema
    (docs/audit-record.v1.schema.json): every audit line an e2e test reads
    through `Audit` passes here."""
    return _check_against(AUDIT_SCHEMA_PATH, "audit record", record)


def check_egress_record(record: dict) -> dict:
    """Fail unless `record`, one line of the egress proxy's audit trail, is
    valid against its published schema (docs/egress-audit-record.v1.schema.json)."""
    return _check_against(EGRESS_AUDIT_SCHEMA_PATH, "egress audit record", record)


class Audit:
    def __init__(self, path: Path):
        self.path = path
        self._checked = 0

    @property
    def arg(self) -> str:
        return f"file:{self.path}"

    def text(self) -> str:
        return self.path.read_text() if self.path.exists() else ""

    def lines(self) -> list[dict]:
        """Every record so far, each checked against the audit schema."""
        records = [json.loads(line) for line in self.text().splitlines() if line.strip()]
        for record in records[self._checked:]:
            check_audit_record(record)
        self._checked = max(self._checked, len(records))
        return records

    def settle(self, quiet: float = 0.2, timeout: float = 3) -> int:
        """Wait until no new line has arrived for `quiet` seconds (lines are
        written asynchronously); return the number of lines."""
        deadline = time.monotonic() + timeout
        count, since = len(self.lines()), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.03)
            now = len(self.lines())
            if now != count:
                count, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
        return count

    def wait(self, pred: Callable[[dict], bool], timeout: float = 5, what: str = "audit line") -> dict:
        """The first audit line matching pred, waiting up to `timeout` for it."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines():
                if pred(line):
                    return line
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} after {timeout}s in:\n{self.text()[-6000:]}")
            time.sleep(0.05)

    def wait_count(self, pred: Callable[[dict], bool], n: int, timeout: float = 5) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            got = [line for line in self.lines() if pred(line)]
            if len(got) >= n or time.monotonic() > deadline:
                return got
            time.sleep(0.05)


def with_approvers(policy: dict, approvers: dict[str, str]) -> dict:
    """`policy` plus a static token per approver (subject -> token), bound to
    the admin role: the role `approval.approverRoles` names by default."""
    auth = dict(policy.get("auth", {}))
    static = dict(auth.get("staticTokens", {}))
    static["tokens"] = [*static.get("tokens", []), *(token_entry(t, s) for s, t in approvers.items())]
    auth["staticTokens"] = static
    return {**policy, "auth": auth, "roles": [*policy.get("roles", []),
                                              {"role": "admin", "subjects": list(approvers)}]}


def decide_approval(admin_url: str, call_id: str, decision: str, token: str) -> httpx.Response:
    """POST a decision on the admin port as the person whose bearer token is `token`."""
    return httpx.post(f"{admin_url}/approvals/{call_id}", json={"decision": decision},
                      headers={"Authorization": f"Bearer {token}"}, timeout=5)


def tools_admin(fa) -> dict[str, dict]:
    """The facade's /tools admin view, by upstream name (read with its admin token)."""
    r = httpx.get(f"{fa.admin_url}/tools", headers=fa.admin_headers(), timeout=5)
    assert r.status_code == 200, r.text
    return {t["name"]: t for t in r.json()["tools"]}


def wait_for(pred: Callable[[], Any], timeout: float = 10, what: str = "condition", step: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


# ---------------------------------------------------------------------------
# JWT: test key pairs, JWKS, minting
# ---------------------------------------------------------------------------
def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Keys:
    """An RS256, an ES256 and an EdDSA key pair (kids rsa-1, ec-1, ed-1)."""

    def __init__(self):
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
        self.private = {
            "RS256": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "ES256": ec.generate_private_key(ec.SECP256R1()),
            "EdDSA": ed25519.Ed25519PrivateKey.generate(),
        }
        self.kid = {"RS256": "rsa-1", "ES256": "ec-1", "EdDSA": "ed-1"}

    def jwks(self) -> dict:
        from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
        to_jwk = {"RS256": RSAAlgorithm.to_jwk, "ES256": ECAlgorithm.to_jwk, "EdDSA": OKPAlgorithm.to_jwk}
        keys = []
        for alg, key in self.private.items():
            jwk = json.loads(to_jwk[alg](key.public_key()))
            jwk.update({"kid": self.kid[alg], "alg": alg, "use": "sig"})
            keys.append(jwk)
        return {"keys": keys}

    def write_jwks(self, path: Path) -> Path:
        path.write_text(json.dumps(self.jwks()))
        return path

    def mint(self, claims: dict, alg: str = "RS256", kid: str | None = None) -> str:
        import jwt
        return jwt.encode(claims, self.private[alg], algorithm=alg,
                          headers={"kid": kid or self.kid[alg], "typ": "JWT"})


def oidc_claims(issuer: str, audience: str, sub: str, groups: list[str] | None = None,
                lifetime: int = 600, **extra) -> dict:
    now = int(time.time())
    claims = {"iss": issuer, "aud": audience, "sub": sub, "iat": now, "nbf": now - 5, "exp": now + lifetime}
    if groups is not None:
        claims["groups"] = groups
    claims.update(extra)
    return claims


class HeldStreamAuth:
    """Two callers of role `user` for the tests of held streams: rita by a JWT
    (`.jwt(lifetime)`, no clock skew, so a short lifetime ends on time) and
    sam by the static token `static` (no expiry). `.policy(**fields)` writes
    the policy and its files into `tmp_path` and returns its path."""

    ISSUER = "https://issuer.test"
    AUDIENCE = "mcp"

    def __init__(self, tmp_path: Path, static: str):
        self.dir, self.static = tmp_path, static
        self.keys = Keys()

    def policy(self, **fields: Any) -> Path:
        import yaml
        self.keys.write_jwks(self.dir / "jwks.json")
        (self.dir / "tokens.yaml").write_text(yaml.safe_dump([token_entry(self.static, "sam")]))
        path = self.dir / "policy.yaml"
        path.write_text(yaml.safe_dump(policy_doc(
            auth={"staticTokens": {"file": "tokens.yaml"},
                  "jwt": [{"issuer": self.ISSUER, "audiences": [self.AUDIENCE], "jwksFile": "jwks.json",
                           "clockSkewSeconds": 0}]},
            roles=[{"role": "user", "issuer": self.ISSUER, "subjects": ["rita"]},
                   {"role": "user", "issuer": "static", "subjects": ["sam"]}],
            **fields,
        )))
        return path

    def jwt(self, lifetime: int) -> tuple[str, float]:
        """A token of rita's good for `lifetime` seconds, and its expiry (epoch seconds)."""
        claims = oidc_claims(self.ISSUER, self.AUDIENCE, "rita", lifetime=lifetime)
        return self.keys.mint(claims), float(claims["exp"])


def kubelet_sa_claims(issuer: str, namespace: str, name: str, audience: str, lifetime: int = 3600) -> dict:
    """Claims as the kubelet's projected service-account token volume mints them."""
    now = int(time.time())
    return {
        "aud": [audience],
        "exp": now + lifetime,
        "iat": now,
        "iss": issuer,
        "jti": "5f0c6e5e-8c0a-4a0e-9d0b-7a1f7b8f1c11",
        "kubernetes.io": {
            "namespace": namespace,
            "node": {"name": "kind-worker", "uid": "0b8a3d12-0f5c-4d11-9b7e-7d5d1d0f6a01"},
            "pod": {"name": f"{name}-7d4b9c6f5-x2x9q", "uid": "8a6c0d9e-3b1f-4f77-a1c2-5e4d3c2b1a00"},
            "serviceaccount": {"name": name, "uid": "c1b7e0a2-6f3d-4e8b-9a51-2d7f0e4c3b22"},
            "warnafter": now + lifetime - 600,
        },
        "nbf": now,
        "sub": f"system:serviceaccount:{namespace}:{name}",
    }


def unsigned_jwt(claims: dict) -> str:
    """An `alg: none` token (header.payload. with an empty signature)."""
    header = b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{header}.{b64url(json.dumps(claims).encode())}."


def tamper(token: str) -> str:
    """The same header and signature over a changed payload (sub → mallory)."""
    header, payload, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "mallory"
    return f"{header}.{b64url(json.dumps(claims).encode())}.{sig}"
