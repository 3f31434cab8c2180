"""Helpers for the login end-to-end tests (import: ``from login_helpers import ...``).

    Idp                                     a running `oidc-provider` (tests/fixtures/oidc_provider.mjs):
                                            .issuer, .jwks_path, .register(redirect_uri) -> client_id
    follow_login(url, redirect_uri, user)   drive an authorization request to the redirect, as a
                                            browser would (cookies, redirects, the provider's
                                            auto-approving interaction): -> {code, state, iss}
    login(idp, resource, user, scope)       a whole authorization-code flow with PKCE for `resource`,
                                            by hand: -> the access token
    SdkLogin(idp, server_url, user)         the official Python SDK's OAuthClientProvider, its
                                            browser steps done by follow_login
    claims_of(jwt) -> dict                  a JWT's claims, unverified (to show what was issued)
    check_rfc9728(doc)                      RFC 9728 §2/§3.3's rules for a metadata document
    login_auth(idp) -> dict                 a policy's `auth` taking the provider's tokens: for
                                            this facade only (`resourceAudience`), with `mcp`
    initialize(url, token) -> Response      a raw `initialize` POST with that bearer token
    challenge(response) -> dict             the parameters of its `WWW-Authenticate: Bearer`
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urljoin, urlparse

import httpx

from conftest import NODE22, TESTS_DIR, free_port, wait_http_ok

PROVIDER_JS = TESTS_DIR / "fixtures" / "oidc_provider.mjs"
CALLBACK = "http://127.0.0.1:1/callback"  # never contacted: the code is read from the redirect


@dataclass
class Idp:
    issuer: str
    jwks_path: Path

    @classmethod
    def start(cls, start_process, directory: Path, accounts: dict[str, list[str]]) -> "Idp":
        port = free_port()
        jwks = directory / "idp-jwks.json"
        mp = start_process([str(NODE22), str(PROVIDER_JS), str(port), str(jwks), json.dumps(accounts)])
        issuer = f"http://127.0.0.1:{port}"
        wait_http_ok(f"{issuer}/.well-known/openid-configuration", 30, proc=mp)
        return cls(issuer, jwks)

    def register(self, redirect_uri: str = CALLBACK) -> str:
        r = httpx.post(f"{self.issuer}/reg", json={
            "redirect_uris": [redirect_uri], "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code"], "response_types": ["code"]}, timeout=10)
        assert r.status_code == 201, r.text
        return r.json()["client_id"]


def follow_login(url: str, redirect_uri: str, user: str) -> dict:
    """Follow an authorization request's redirects with a cookie jar until the
    provider sends the browser back to `redirect_uri`; the account is named
    with `login_hint`, which the test provider logs in without a form."""
    sep = "&" if "?" in url else "?"
    url = f"{url}{sep}{urlencode({'login_hint': user})}"
    with httpx.Client(follow_redirects=False, timeout=10) as browser:
        for _ in range(12):
            r = browser.get(url)
            assert r.status_code in (302, 303), f"{url}: {r.status_code} {r.text[:500]}"
            url = urljoin(url, r.headers["location"])
            if url.startswith(redirect_uri):
                query = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
                assert "code" in query, f"the provider refused: {query}"
                return query
    raise AssertionError("the authorization never came back to the redirect URI")


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def login(idp: Idp, resource: str, user: str, scope: str = "mcp") -> str:
    """An authorization-code flow with PKCE for `resource` (RFC 8707), done
    by hand, for the tokens the SDK is not asked to get (another resource's,
    a scope-less one)."""
    client_id = idp.register()
    verifier, challenge = pkce()
    state = secrets.token_urlsafe(16)
    query = urlencode({"response_type": "code", "client_id": client_id, "redirect_uri": CALLBACK,
                       "scope": scope, "state": state, "code_challenge": challenge,
                       "code_challenge_method": "S256", "resource": resource})
    result = follow_login(f"{idp.issuer}/auth?{query}", CALLBACK, user)
    assert result["state"] == state
    r = httpx.post(f"{idp.issuer}/token", data={
        "grant_type": "authorization_code", "code": result["code"], "redirect_uri": CALLBACK,
        "client_id": client_id, "code_verifier": verifier, "resource": resource}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["access_token"]


def claims_of(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


class SdkLogin:
    """The SDK's OAuth client provider for `server_url`, logging in as `user`:
    its redirect handler is the browser (follow_login), its callback handler
    hands back what the browser was redirected with. Records every URL the
    SDK's own HTTP client asked for, to show the discovery it did."""

    def __init__(self, server_url: str, user: str):
        from mcp.client.auth import OAuthClientProvider
        from mcp.shared.auth import OAuthClientMetadata

        self.user = user
        self.authorization_urls: list[str] = []
        self._result: dict | None = None
        self.tokens = None
        self.client_info = None
        outer = self

        class Memory:
            async def get_tokens(self):
                return outer.tokens

            async def set_tokens(self, tokens):
                outer.tokens = tokens

            async def get_client_info(self):
                return outer.client_info

            async def set_client_info(self, info):
                outer.client_info = info

        self.provider = OAuthClientProvider(
            server_url=server_url,
            client_metadata=OAuthClientMetadata(
                client_name="mcp-warden e2e", redirect_uris=[CALLBACK],
                grant_types=["authorization_code"], response_types=["code"],
                token_endpoint_auth_method="none"),
            storage=Memory(),
            redirect_handler=self._redirect,
            callback_handler=self._callback,
        )

    async def _redirect(self, url: str) -> None:
        self.authorization_urls.append(url)
        import anyio
        self._result = await anyio.to_thread.run_sync(follow_login, url, CALLBACK, self.user)

    async def _callback(self):
        from mcp.shared.auth import AuthorizationCodeResult
        r, self._result = self._result, None
        return AuthorizationCodeResult(code=r["code"], state=r.get("state"), iss=r.get("iss"))

    def client(self, url: str, **kw):
        """`mcp.Client` over Streamable HTTP with this provider as its auth."""
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        transport = streamable_http_client(url, http_client=create_mcp_http_client(auth=self.provider))
        kw.setdefault("read_timeout_seconds", 30)
        kw.setdefault("mode", "legacy")
        return Client(transport, **kw)


def check_rfc9728(doc: dict, resource: str) -> None:
    """A protected-resource metadata document as RFC 9728 has it: `resource`
    required and identical to the URL the client used (§3.3), an absolute
    https/http URL without fragment; the optional members of the right
    types; `bearer_methods_supported` from RFC 6750's methods."""
    assert isinstance(doc, dict), doc
    assert doc.get("resource") == resource, (doc.get("resource"), resource)
    parsed = urlparse(doc["resource"])
    assert parsed.scheme in ("https", "http") and parsed.netloc and not parsed.fragment, doc["resource"]
    for member in ("authorization_servers", "scopes_supported", "bearer_methods_supported"):
        if member in doc:
            assert isinstance(doc[member], list) and doc[member], (member, doc[member])
            assert all(isinstance(v, str) and v for v in doc[member]), (member, doc[member])
    for server in doc.get("authorization_servers", []):
        assert urlparse(server).scheme in ("https", "http"), server
    assert set(doc.get("bearer_methods_supported", [])) <= {"header", "body", "query"}, doc
    for member in ("resource_name",):
        if member in doc:
            assert isinstance(doc[member], str), doc


def login_auth(idp: Idp) -> dict:
    """The facade's auth: the provider's tokens, for this facade only, with `mcp`."""
    return {"jwt": [{"issuer": idp.issuer, "jwksFile": str(idp.jwks_path), "login": True,
                     "resourceAudience": True, "requiredScopes": ["mcp"]}]}


def challenge(resp: httpx.Response) -> dict[str, str]:
    value = resp.headers.get("www-authenticate", "")
    assert value.startswith("Bearer "), value
    return dict(re.findall(r'(\w+)="([^"]*)"', value))


def initialize(url: str, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}
    return httpx.post(url, json=body, headers=headers, timeout=20)
