"""The identities of the auth end-to-end tests (test_auth.py; import:
``from auth_helpers import ...``): one OIDC issuer and one service-account
issuer with their key pairs and JWKS files, static tokens for each role, the
policy that binds them, and every good and bad token the tests present.

    ISSUER, AUDIENCE, SA_ISSUER, SA_AUDIENCE   the two issuers and their audiences
    VIC, UMA, ROOT, NOBODY                     static tokens: viewer, user (group devs), admin, no role
    Ids(dir)                                   keys, JWKS, token file and tokens under `dir`;
                                               .good / .bad / .more_bad / .jwt_nobody, .write_policy()
    hs256(claims, secret, kid)                 an HS256 JWT (the key-confusion attack)
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from pathlib import Path

import yaml

from warden_helpers import (Keys, b64url, kubelet_sa_claims, oidc_claims, policy_doc, tamper, token_entry,
                            unsigned_jwt)

ISSUER = "https://issuer.test"
AUDIENCE = "mcp"
SA_ISSUER = "https://kubernetes.default.svc"
SA_AUDIENCE = "mcpwarden.dev/team-a/files"

# Static tokens (from a token file next to the policy).
VIC = "vic-" + secrets.token_hex(20)       # viewer
UMA = "uma-" + secrets.token_hex(20)       # user (group devs)
ROOT = "root-" + secrets.token_hex(20)     # admin
NOBODY = "nobody-" + secrets.token_hex(20)  # authenticated, no role


class Ids:
    """Key pairs, JWKS files, a policy directory and every token the tests use."""

    def __init__(self, d: Path):
        self.dir = d
        self.oidc, self.sa = Keys(), Keys()
        self.oidc.write_jwks(d / "jwks.json")
        self.sa.write_jwks(d / "sa-jwks.json")
        (d / "tokens.yaml").write_text(yaml.safe_dump([
            token_entry(VIC, "vic"), token_entry(UMA, "uma", ["devs"]), token_entry(ROOT, "root"),
            token_entry(NOBODY, "nobody")]))
        claims = lambda sub, **kw: oidc_claims(ISSUER, AUDIENCE, sub, **kw)  # noqa: E731
        self.good = {
            "static": UMA,
            "jwt_rs256": self.oidc.mint(claims("rita", groups=["devs"]), "RS256"),
            "jwt_es256": self.oidc.mint(claims("eric", groups=["devs"]), "ES256"),
            "jwt_eddsa": self.oidc.mint(claims("edna", groups=["devs"]), "EdDSA"),
            "sa": self.sa.mint(kubelet_sa_claims(SA_ISSUER, "team-a", "agent", SA_AUDIENCE), "RS256"),
        }
        self.subject = {"static": "uma", "jwt_rs256": "rita", "jwt_es256": "eric", "jwt_eddsa": "edna",
                        "sa": "system:serviceaccount:team-a:agent"}
        self.method = {"static": "static_token", "jwt_rs256": "jwt", "jwt_es256": "jwt", "jwt_eddsa": "jwt",
                       "sa": "service_account"}
        now = int(time.time())
        self.bad = {
            "expired": self.oidc.mint({**claims("rita", groups=["devs"]), "iat": now - 3600,
                                       "nbf": now - 3600, "exp": now - 300}),
            "wrong_audience": self.oidc.mint(oidc_claims(ISSUER, "someone-else", "rita", groups=["devs"])),
            "wrong_issuer": self.oidc.mint(oidc_claims("https://evil.test", AUDIENCE, "rita", groups=["devs"])),
            "tampered": tamper(self.oidc.mint(claims("rita", groups=["devs"]))),
            "alg_none": unsigned_jwt(claims("rita", groups=["devs"])),
        }
        # More ways to get it wrong (rejected; their reasons need not be distinct).
        rsa_pub_pem = self.oidc.private["RS256"].public_key().public_bytes(
            encoding=__import__("cryptography.hazmat.primitives.serialization", fromlist=["x"]).Encoding.PEM,
            format=__import__("cryptography.hazmat.primitives.serialization", fromlist=["x"])
            .PublicFormat.SubjectPublicKeyInfo)
        self.more_bad = {
            "hs256_with_public_key": hs256(claims("rita", groups=["devs"]), rsa_pub_pem, "rsa-1"),
            "not_yet_valid": self.oidc.mint({**claims("rita"), "nbf": now + 3600, "exp": now + 7200}),
            "foreign_key": Keys().mint(claims("rita", groups=["devs"])),
            "no_exp": self.oidc.mint({k: v for k, v in claims("rita").items() if k != "exp"}),
            "sa_kube_api_audience": self.sa.mint(kubelet_sa_claims(SA_ISSUER, "team-a", "agent",
                                                                   "https://kubernetes.default.svc")),
            "sa_other_server": self.sa.mint(kubelet_sa_claims(SA_ISSUER, "team-a", "agent",
                                                              "mcpwarden.dev/team-a/other")),
            "sa_expired": self.sa.mint(kubelet_sa_claims(SA_ISSUER, "team-a", "agent", SA_AUDIENCE,
                                                         lifetime=-600)),
            "oidc_key_for_sa_issuer": self.oidc.mint(kubelet_sa_claims(SA_ISSUER, "team-a", "agent",
                                                                       SA_AUDIENCE)),
            "garbage": "not.a.jwt",
            "sa_subject_mismatch": self.sa.mint({**kubelet_sa_claims(SA_ISSUER, "team-a", "agent", SA_AUDIENCE),
                                                 "sub": "system:serviceaccount:kube-system:admin"}),
            "sa_without_k8s_claims": self.sa.mint({k: v for k, v in kubelet_sa_claims(
                SA_ISSUER, "team-a", "agent", SA_AUDIENCE).items() if k != "kubernetes.io"}),
        }
        self.jwt_nobody = self.oidc.mint(claims("stranger"))  # valid, but no role binding

    def all_tokens(self) -> list[str]:
        return [VIC, UMA, ROOT, NOBODY, *self.good.values(), *self.bad.values(), *self.more_bad.values(),
                self.jwt_nobody]

    def write_policy(self, name: str = "policy.yaml") -> Path:
        path = self.dir / name
        path.write_text(yaml.safe_dump(policy_doc(
            server={"namespace": "team-a", "name": "files"},
            auth={"staticTokens": {"file": "tokens.yaml"},
                  "jwt": [{"issuer": ISSUER, "audiences": [AUDIENCE], "jwksFile": "jwks.json",
                           "clockSkewSeconds": 30}],
                  "serviceAccountTokens": {"issuer": SA_ISSUER, "jwksFile": "sa-jwks.json"}},
            # Subjects and groups are the issuer's: `devs` from the token file
            # and `devs` from the OIDC issuer are two bindings.
            roles=[{"role": "viewer", "issuer": "static", "subjects": ["vic"]},
                   {"role": "user", "issuer": "static", "groups": ["devs"]},
                   {"role": "user", "issuer": ISSUER, "groups": ["devs"],
                    "serviceAccounts": ["team-a/agent"]},
                   {"role": "admin", "issuer": "static", "subjects": ["root"]}],
            tools=[{"name": "echo", "requiredRole": "viewer"},
                   {"name": "secret", "requiredRole": "user"},
                   {"name": "cancelled", "requiredRole": "admin"}],
        ), sort_keys=False))
        return path


def hs256(claims: dict, secret: bytes, kid: str) -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    payload = b64url(json.dumps(claims).encode())
    sig = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(sig)}"
