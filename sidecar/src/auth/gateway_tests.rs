//! A gateway's assertions, minted by the gateway link's signer and checked
//! by a backend's authenticator (`auth.gateways`): who they name, and every
//! way one is refused.

use std::path::Path;
use std::time::Duration;

use mcp_warden_crds::{AuthConfig, TrustedGateway};

use crate::auth::identity::AuthMethod;
use crate::auth::{AuthFailure, Authenticator};
use crate::upstream::gateway::assertion::{Principal, Signer};

struct Keys {
    private: String,
    public: String,
}

fn keys(alg: &'static rcgen::SignatureAlgorithm) -> Keys {
    let pair = rcgen::KeyPair::generate_for(alg).unwrap();
    Keys {
        private: pair.serialize_pem(),
        public: pair.public_key_pem(),
    }
}

/// A backend named `audience` trusting gateway `gw` (its public key) to
/// vouch for static-token callers.
fn backend(dir: &Path, public: &str, audience: &str) -> Authenticator {
    std::fs::write(dir.join("gw.pub"), public).unwrap();
    let cfg = AuthConfig {
        gateways: vec![TrustedGateway {
            issuer: "gw".into(),
            public_key_file: "gw.pub".into(),
            audience: audience.into(),
            caller_issuers: vec!["static".into()],
            clock_skew_seconds: Some(0),
        }],
        ..Default::default()
    };
    Authenticator::from_config(&cfg, None, dir).unwrap()
}

fn alice(issuer: &str) -> Principal {
    Principal {
        issuer: issuer.into(),
        subject: "alice".into(),
        groups: vec!["devs".into()],
    }
}

fn token(signer: &Signer, who: &Principal, audience: &str) -> String {
    let credential = signer.mint(who, audience, None).unwrap();
    let (_, value) = credential.header().unwrap();
    value
        .to_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap()
        .to_string()
}

/// A scratch directory of its own, removed when the test ends.
fn dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("gw-assert-{name}-"))
        .tempdir()
        .unwrap()
}

#[test]
fn a_backend_hears_the_caller_the_gateway_names() {
    for (name, alg) in [
        ("ed", &rcgen::PKCS_ED25519),
        ("ec", &rcgen::PKCS_ECDSA_P256_SHA256),
    ] {
        let k = keys(alg);
        let scratch = dir(name);
        let dir = scratch.path();
        let signer =
            Signer::from_pem("gw", k.private.as_bytes(), Duration::from_secs(120)).unwrap();
        let everything = backend(dir, &k.public, "everything");
        let who = everything
            .authenticate(Some(&token(&signer, &alice("static"), "everything")))
            .unwrap();
        assert_eq!(who.issuer.as_deref(), Some("static"), "{name}");
        assert_eq!(who.subject.as_deref(), Some("alice"));
        assert_eq!(who.groups, vec!["devs".to_string()]);
        assert_eq!(who.method, AuthMethod::Gateway);
    }
}

#[test]
fn a_vouched_caller_expires_with_its_assertion() {
    let k = keys(&rcgen::PKCS_ED25519);
    let scratch = dir("exp");
    let dir = scratch.path();
    let signer = Signer::from_pem("gw", k.private.as_bytes(), Duration::from_secs(120)).unwrap();
    let everything = backend(dir, &k.public, "everything");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let token = token(&signer, &alice("static"), "everything");
    for _ in 0..2 {
        // The second time from the verified tokens: the same expiry.
        let who = everything.authenticate(Some(&token)).unwrap();
        let exp = who.expires_at.expect("an assertion expires");
        assert!((now + 119..=now + 121).contains(&exp), "{exp} vs {now}");
        let left = who.credential_left().unwrap();
        assert!(left > Duration::from_secs(100) && left <= Duration::from_secs(121));
    }
}

#[test]
fn one_backends_assertion_is_refused_by_another() {
    let k = keys(&rcgen::PKCS_ED25519);
    let scratch = dir("aud");
    let dir = scratch.path();
    let signer = Signer::from_pem("gw", k.private.as_bytes(), Duration::from_secs(120)).unwrap();
    let git = backend(dir, &k.public, "git");
    let for_everything = token(&signer, &alice("static"), "everything");
    assert_eq!(
        git.authenticate(Some(&for_everything)),
        Err(AuthFailure::Invalid("wrong_audience"))
    );
}

#[test]
fn expired_other_key_unsigned_and_unvouched_assertions_are_refused() {
    let k = keys(&rcgen::PKCS_ED25519);
    let scratch = dir("bad");
    let dir = scratch.path();
    let everything = backend(dir, &k.public, "everything");
    let signer = Signer::from_pem("gw", k.private.as_bytes(), Duration::from_secs(1)).unwrap();
    let short = token(&signer, &alice("static"), "everything");
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(
        everything.authenticate(Some(&short)),
        Err(AuthFailure::Invalid("token_expired"))
    );

    // Signed by a key the backend was not given.
    let other = keys(&rcgen::PKCS_ED25519);
    let impostor =
        Signer::from_pem("gw", other.private.as_bytes(), Duration::from_secs(120)).unwrap();
    assert_eq!(
        everything.authenticate(Some(&token(&impostor, &alice("static"), "everything"))),
        Err(AuthFailure::Invalid("bad_signature"))
    );

    // The same claims, unsigned.
    let real = token(
        &Signer::from_pem("gw", k.private.as_bytes(), Duration::from_secs(120)).unwrap(),
        &alice("static"),
        "everything",
    );
    let mut parts = real.split('.');
    let (_, payload) = (parts.next(), parts.next().unwrap());
    use base64::Engine;
    let none =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    assert!(everything
        .authenticate(Some(&format!("{none}.{payload}.")))
        .is_err());

    // A caller of an issuer this backend does not let the gateway vouch for.
    let signer = Signer::from_pem("gw", k.private.as_bytes(), Duration::from_secs(120)).unwrap();
    assert_eq!(
        everything.authenticate(Some(&token(
            &signer,
            &alice("https://elsewhere"),
            "everything"
        ))),
        Err(AuthFailure::Invalid("caller_issuer_not_vouched"))
    );
}

#[test]
fn a_gateway_needs_the_issuers_it_vouches_for() {
    let k = keys(&rcgen::PKCS_ED25519);
    let scratch = dir("cfg");
    let dir = scratch.path();
    std::fs::write(dir.join("gw.pub"), &k.public).unwrap();
    let cfg = AuthConfig {
        gateways: vec![TrustedGateway {
            issuer: "gw".into(),
            public_key_file: "gw.pub".into(),
            audience: "everything".into(),
            caller_issuers: vec![],
            clock_skew_seconds: None,
        }],
        ..Default::default()
    };
    let err = Authenticator::from_config(&cfg, None, dir).err().unwrap();
    assert!(err.contains("callerIssuers"), "{err}");
}

#[test]
fn an_assertion_accepted_before_is_refused_once_expired() {
    // The backend remembers assertions it accepted (so it does not verify
    // the same one on every call): that must not outlive the assertion.
    let k = keys(&rcgen::PKCS_ED25519);
    let scratch = dir("again");
    let dir = scratch.path();
    let everything = backend(dir, &k.public, "everything");
    let signer = Signer::from_pem("gw", k.private.as_bytes(), Duration::from_secs(1)).unwrap();
    let short = token(&signer, &alice("static"), "everything");
    for _ in 0..2 {
        let who = everything.authenticate(Some(&short)).unwrap();
        assert_eq!(who.subject.as_deref(), Some("alice"));
    }
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(
        everything.authenticate(Some(&short)),
        Err(AuthFailure::Invalid("token_expired"))
    );
    // Another backend never takes it for having been accepted here.
    let git = backend(dir, &k.public, "git");
    let fresh = token(
        &Signer::from_pem("gw", k.private.as_bytes(), Duration::from_secs(120)).unwrap(),
        &alice("static"),
        "everything",
    );
    everything.authenticate(Some(&fresh)).unwrap();
    assert_eq!(
        git.authenticate(Some(&fresh)),
        Err(AuthFailure::Invalid("wrong_audience"))
    );
}

#[test]
fn the_gateway_itself_is_known_by_its_issuer_and_own_subject_only() {
    let k = keys(&rcgen::PKCS_ED25519);
    let scratch = dir("itself");
    let dir = scratch.path();
    let everything = backend(dir, &k.public, "everything");
    let signer = Signer::from_pem("gw", k.private.as_bytes(), Duration::from_secs(120)).unwrap();
    let who = everything
        .authenticate(Some(&token(&signer, &signer.itself(), "everything")))
        .unwrap();
    assert_eq!(
        (who.issuer.as_deref(), who.subject.as_deref(), who.method),
        (
            Some("gw"),
            Some("mcpwarden.dev/gateway:gw"),
            AuthMethod::GatewayItself
        )
    );
    assert!(who.groups.is_empty());
    // Claims the signer would never make (another subject under the
    // gateway's issuer), signed with the gateway's key all the same.
    #[derive(serde::Serialize)]
    struct Forged<'a> {
        iss: &'a str,
        aud: &'a str,
        sub: &'a str,
        caller_iss: &'a str,
        exp: u64,
        nbf: u64,
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let key = jsonwebtoken::EncodingKey::from_ed_pem(k.private.as_bytes()).unwrap();
    let forged = |sub: &str| {
        let claims = Forged {
            iss: "gw",
            aud: "everything",
            sub,
            caller_iss: "gw",
            exp: now + 60,
            nbf: now,
        };
        let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
        jsonwebtoken::encode(&header, &claims, &key).unwrap()
    };
    for sub in ["alice", "mcpwarden.dev/gateway:other"] {
        assert_eq!(
            everything.authenticate(Some(&forged(sub))),
            Err(AuthFailure::Invalid("caller_issuer_not_vouched")),
            "{sub}"
        );
    }
}

#[test]
fn a_gateway_never_vouches_for_callers_of_its_own_issuer() {
    let k = keys(&rcgen::PKCS_ED25519);
    let scratch = dir("own-iss");
    let dir = scratch.path();
    std::fs::write(dir.join("gw.pub"), &k.public).unwrap();
    let cfg = AuthConfig {
        gateways: vec![TrustedGateway {
            issuer: "gw".into(),
            public_key_file: "gw.pub".into(),
            audience: "everything".into(),
            caller_issuers: vec!["static".into(), "gw".into()],
            clock_skew_seconds: None,
        }],
        ..Default::default()
    };
    let err = Authenticator::from_config(&cfg, None, dir).err().unwrap();
    assert!(err.contains("the gateway itself"), "{err}");
}

#[test]
fn a_vouched_service_account_is_one_only_under_the_backends_own_service_account_issuer() {
    const SA_ISSUER: &str = "https://kubernetes.default.svc";
    let k = keys(&rcgen::PKCS_ED25519);
    let scratch = dir("sa");
    let dir = scratch.path();
    std::fs::write(dir.join("gw.pub"), &k.public).unwrap();
    std::fs::write(dir.join("sa-jwks.json"), r#"{"keys":[]}"#).unwrap();
    let cfg = AuthConfig {
        service_account_tokens: Some(mcp_warden_crds::ServiceAccountTokens {
            issuer: SA_ISSUER.into(),
            jwks_file: "sa-jwks.json".into(),
            audience: Some("mcpwarden.dev/team-a/files".into()),
        }),
        gateways: vec![TrustedGateway {
            issuer: "gw".into(),
            public_key_file: "gw.pub".into(),
            audience: "files".into(),
            caller_issuers: vec![SA_ISSUER.into(), "https://login.example".into()],
            clock_skew_seconds: Some(0),
        }],
        ..Default::default()
    };
    let files = Authenticator::from_config(&cfg, None, dir).unwrap();
    let signer = Signer::from_pem("gw", k.private.as_bytes(), Duration::from_secs(120)).unwrap();
    let agent = |issuer: &str| Principal {
        issuer: issuer.into(),
        subject: "system:serviceaccount:team-a:coding-agent".into(),
        groups: vec!["system:serviceaccounts".into()],
    };
    // The cluster's issuer: a service account, so `serviceAccounts` bindings match it.
    let who = files
        .authenticate(Some(&token(&signer, &agent(SA_ISSUER), "files")))
        .unwrap();
    assert_eq!(who.service_account.as_deref(), Some("team-a/coding-agent"));
    assert_eq!(who.method, AuthMethod::Gateway);
    // Another issuer spelling its subject the same way names no service account.
    let who = files
        .authenticate(Some(&token(
            &signer,
            &agent("https://login.example"),
            "files",
        )))
        .unwrap();
    assert_eq!(who.service_account, None);
}

#[test]
fn gateways_only_lets_in_the_gateways_assertions_alone() {
    use mcp_warden_crds::{AnonymousAccess, Role, StaticToken, StaticTokens};
    use sha2::{Digest, Sha256};
    let k = keys(&rcgen::PKCS_ED25519);
    let scratch = dir("only");
    let dir = scratch.path();
    std::fs::write(dir.join("gw.pub"), &k.public).unwrap();
    let own = "alice-own-token-0123456789";
    let open = AuthConfig {
        static_tokens: Some(StaticTokens {
            tokens: vec![StaticToken {
                sha256: hex::encode(Sha256::digest(own)),
                subject: "alice".into(),
                groups: vec![],
            }],
            ..Default::default()
        }),
        anonymous: Some(AnonymousAccess { role: Role::Viewer }),
        gateways: vec![TrustedGateway {
            issuer: "gw".into(),
            public_key_file: "gw.pub".into(),
            audience: "everything".into(),
            caller_issuers: vec!["static".into()],
            clock_skew_seconds: Some(0),
        }],
        ..Default::default()
    };
    let signer = Signer::from_pem("gw", k.private.as_bytes(), Duration::from_secs(120)).unwrap();
    let vouched = token(&signer, &alice("static"), "everything");
    // Without the flag: the backend's own token and nobody get in too.
    let before = Authenticator::from_config(&open, None, dir).unwrap();
    assert!(before.authenticate(Some(own)).is_ok());
    assert!(before.authenticate(None).is_ok());
    let only = Authenticator::from_config(
        &AuthConfig {
            gateways_only: true,
            ..open.clone()
        },
        None,
        dir,
    )
    .unwrap();
    // Its own token is no token of the gateway's: refused, as nobody is.
    assert!(matches!(
        only.authenticate(Some(own)),
        Err(AuthFailure::Invalid(_))
    ));
    assert_eq!(only.authenticate(None), Err(AuthFailure::Missing));
    let who = only.authenticate(Some(&vouched)).unwrap();
    assert_eq!(who.method, AuthMethod::Gateway);
}
