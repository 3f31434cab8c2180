//! Tokens of issuers people log in at: bound to this facade's URLs
//! (`resourceAudience`) and carrying the scopes the issuer requires
//! (`requiredScopes`); service-account and static tokens beside them keep
//! working as before.

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use mcp_warden_crds::AuthConfig;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::auth::identity::AuthMethod;
use crate::auth::{AuthFailure, Authenticator};

const IDP: &str = "https://login.example.com";
const SA_ISSUER: &str = "https://kubernetes.default.svc";

struct Fixture {
    dir: tempfile::TempDir,
    key: EncodingKey,
}

/// An Ed25519 key, its JWKS in `jwks.json`, and the policy's `auth` (YAML)
/// loaded against that directory.
fn fixture(name: &str) -> Fixture {
    let dir = tempfile::Builder::new()
        .prefix(&format!("login-{name}-"))
        .tempdir()
        .unwrap();
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pair.public_key_raw());
    let jwks =
        json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "kid": "k1", "x": x}]});
    std::fs::write(dir.path().join("jwks.json"), jwks.to_string()).unwrap();
    let key = EncodingKey::from_ed_pem(pair.serialize_pem().as_bytes()).unwrap();
    Fixture { dir, key }
}

impl Fixture {
    fn auth(&self, yaml: &str) -> Result<Authenticator, String> {
        let cfg: AuthConfig = serde_yaml_ng::from_str(yaml).unwrap();
        Authenticator::from_config(&cfg, None, self.dir.path())
    }

    fn sign(&self, claims: Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some("k1".into());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut claims = claims;
        claims["iat"] = json!(now);
        claims["exp"] = json!(now + 300);
        jsonwebtoken::encode(&header, &claims, &self.key).unwrap()
    }
}

const BOUND: &str = "resourceUrls: ['https://git.mcp.example.com/mcp', 'http://git.team-a.svc.cluster.local:8080/mcp']\n\
jwt: [{issuer: 'https://login.example.com', jwksFile: jwks.json, resourceAudience: true, login: true, requiredScopes: [mcp]}]\n\
serviceAccountTokens: {issuer: 'https://kubernetes.default.svc', jwksFile: jwks.json, audience: mcpwarden.dev/team-a/git}\n\
staticTokens: {tokens: [{sha256: 'SHA', subject: ci-bot}]}\n";

#[test]
fn a_token_for_this_resource_is_accepted_and_one_for_another_refused() {
    let f = fixture("aud");
    let auth = f.auth(&BOUND.replace("SHA", &"0".repeat(64))).unwrap();
    let claims =
        |aud: Value| json!({"iss": IDP, "sub": "alice", "aud": aud, "scope": "openid mcp"});
    for aud in [
        json!("https://git.mcp.example.com/mcp"),
        json!("HTTPS://Git.MCP.example.com:443/mcp/"),
        json!([
            "https://other.example.com/mcp",
            "http://git.team-a.svc.cluster.local:8080/mcp"
        ]),
    ] {
        let who = auth
            .authenticate(Some(&f.sign(claims(aud.clone()))))
            .expect("bound to us");
        assert_eq!(who.subject.as_deref(), Some("alice"), "{aud}");
        assert_eq!(who.method, AuthMethod::Jwt);
    }
    for aud in [
        json!("https://other.example.com/mcp"),
        json!("https://git.mcp.example.com/other"),
        json!("https://git.mcp.example.com.evil.example/mcp"),
        // A shared audience names no resource: under resourceAudience it
        // could be a token for any server of the issuer.
        json!("mcp"),
        json!([]),
    ] {
        assert_eq!(
            auth.authenticate(Some(&f.sign(claims(aud.clone()))))
                .unwrap_err(),
            AuthFailure::Invalid("wrong_audience"),
            "{aud}"
        );
    }
    let no_aud = json!({"iss": IDP, "sub": "alice", "scope": "mcp"});
    assert!(matches!(
        auth.authenticate(Some(&f.sign(no_aud))),
        Err(AuthFailure::Invalid("missing_claim"))
    ));
}

#[test]
fn a_token_without_the_required_scopes_is_insufficient() {
    let f = fixture("scope");
    let auth = f.auth(&BOUND.replace("SHA", &"0".repeat(64))).unwrap();
    let with = |scope: Value| {
        let mut c = json!({"iss": IDP, "sub": "alice", "aud": "https://git.mcp.example.com/mcp"});
        if !scope.is_null() {
            c.as_object_mut()
                .unwrap()
                .extend(scope.as_object().unwrap().clone());
        }
        f.sign(c)
    };
    for ok in [
        json!({"scope": "mcp"}),
        json!({"scope": "openid  mcp profile"}),
        json!({"scp": ["mcp", "other"]}),
        json!({"scp": "mcp"}),
    ] {
        assert!(auth.authenticate(Some(&with(ok.clone()))).is_ok(), "{ok}");
    }
    for short in [
        Value::Null,
        json!({"scope": "openid"}),
        json!({"scope": "mcp:read"}),
        json!({"scp": ["MCP"]}),
    ] {
        assert_eq!(
            auth.authenticate(Some(&with(short.clone()))).unwrap_err(),
            AuthFailure::InsufficientScope("mcp".into()),
            "{short}"
        );
    }
    // Scopes are checked only on an otherwise valid token: one for another
    // resource is invalid first (401, not 403).
    let elsewhere = json!({"iss": IDP, "sub": "alice", "aud": "https://other/mcp"});
    assert_eq!(
        auth.authenticate(Some(&f.sign(elsewhere))).unwrap_err(),
        AuthFailure::Invalid("wrong_audience")
    );
}

#[test]
fn service_account_and_static_tokens_keep_working_beside_a_bound_issuer() {
    let f = fixture("others");
    let token = "a-static-token-of-ci-bot";
    let hash = hex::encode(Sha256::digest(token.as_bytes()));
    let auth = f.auth(&BOUND.replace("SHA", &hash)).unwrap();
    assert_eq!(
        auth.authenticate(Some(token)).unwrap().subject.as_deref(),
        Some("ci-bot")
    );
    let sa = f.sign(json!({
        "iss": SA_ISSUER,
        "sub": "system:serviceaccount:team-a:agent",
        "aud": ["mcpwarden.dev/team-a/git"],
        "kubernetes.io": {"namespace": "team-a", "serviceaccount": {"name": "agent"}},
    }));
    let who = auth
        .authenticate(Some(&sa))
        .expect("no scope or resource asked of it");
    assert_eq!(who.method, AuthMethod::ServiceAccount);
}

#[test]
fn an_issuer_without_binding_keeps_its_audiences() {
    let f = fixture("unbound");
    let auth = f
        .auth(
            "jwt: [{issuer: 'https://login.example.com', audiences: [mcp], jwksFile: jwks.json}]\n",
        )
        .unwrap();
    let shared = json!({"iss": IDP, "sub": "alice", "aud": "mcp"});
    assert!(auth.authenticate(Some(&f.sign(shared))).is_ok());
    let resource = json!({"iss": IDP, "sub": "alice", "aud": "https://git.mcp.example.com/mcp"});
    assert_eq!(
        auth.authenticate(Some(&f.sign(resource))).unwrap_err(),
        AuthFailure::Invalid("wrong_audience")
    );
    // Binding needs the URLs to bind to.
    let err = f
        .auth("jwt: [{issuer: 'https://login.example.com', jwksFile: jwks.json, resourceAudience: true}]\n")
        .err()
        .unwrap();
    assert!(err.contains("resourceUrls"), "{err}");
}
