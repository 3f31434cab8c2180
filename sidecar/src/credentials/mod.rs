//! Upstream credentials: what the facade presents to an HTTP(S) upstream
//! for each request, chosen by the caller's identity after policy.
//!
//! Where it sits: the session forwards a request the policy let through
//! ([`crate::session`]'s `forward`), asks [`UpstreamCredentials::for_caller`]
//! and sends the request with that header. The caller's own `Authorization`
//! never goes upstream: HTTP links build every request from scratch.
//!
//! The policy's `upstreamAuth.rules`, first match wins (issuer, subjects,
//! roles; a rule without matchers is for everyone), each with one source:
//! - `tokenFile`: a static secret (per role or per subject);
//! - `clientCredentials`: the facade's own OAuth 2.0 identity ([`oauth`]);
//! - `tokenExchange`: the caller's token exchanged (RFC 8693) for one meant
//!   for the upstream, cached per caller token until it expires;
//! - `useFacade`: the facade's own credential; `none`: no credential.
//!
//! A caller no rule matches is refused. Nothing here prints a secret: token
//! values live in [`Credential`] and [`Secret`], whose `Debug` is redacted,
//! and errors name the endpoint and the OAuth error code, never a token.

pub mod oauth;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hyper::header::{HeaderName, AUTHORIZATION};
use mcp_warden_crds::{FacadeCredential, Role, UpstreamAuth, UpstreamCredentialRule};

use crate::auth::identity::Identity;
use crate::net::Client;
use crate::upstream::Credential;

/// A secret read from a file: never printed.
#[derive(Clone)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn read(path: &Path) -> Result<Secret, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?;
        let text = text.trim();
        if text.is_empty() {
            return Err(format!("the secret file {} is empty", path.display()));
        }
        Ok(Secret(text.into()))
    }

    pub fn new(value: &str) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// Why no credential could be had for a request.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("no upstream credential for this caller: no upstreamAuth rule matches {0}")]
    NoRule(String),
    #[error("no upstream credential for this caller: token exchange needs the caller's own JWT or service-account token")]
    NoSubjectToken,
    #[error("no upstream credential: {0}")]
    Endpoint(String),
}

/// The compiled `upstreamAuth` of one policy version (its caches go with it).
pub struct UpstreamCredentials {
    header: HeaderName,
    rules: Vec<Rule>,
    facade: Option<Source>,
}

struct Rule {
    issuer: Option<String>,
    subjects: Vec<String>,
    roles: Vec<Role>,
    source: Source,
}

enum Source {
    Static(Secret),
    ClientCredentials(Arc<oauth::ClientCredentialsGrant>),
    TokenExchange(Arc<oauth::TokenExchangeGrant>),
    Facade,
    None,
}

impl UpstreamCredentials {
    /// Compile `cfg`; files are read relative to `base`.
    pub fn compile(cfg: &UpstreamAuth, base: &Path) -> Result<UpstreamCredentials, String> {
        let header = match cfg.header.as_deref() {
            None => AUTHORIZATION,
            Some(h) => HeaderName::from_bytes(h.trim().as_bytes())
                .map_err(|_| format!("header `{h}` is not a header name"))?,
        };
        if FORBIDDEN_HEADERS.contains(&header.as_str()) {
            return Err(format!("header `{header}` is the facade's own to set"));
        }
        let mut rules = Vec::new();
        for (i, rule) in cfg.rules.iter().enumerate() {
            let source = rule_source(rule, base).map_err(|e| format!("rules[{i}]: {e}"))?;
            if matches!(source, Source::Facade) && cfg.facade.is_none() {
                return Err(format!("rules[{i}]: useFacade needs `facade`"));
            }
            rules.push(Rule {
                issuer: rule.issuer.clone(),
                subjects: rule.subjects.clone(),
                roles: rule.roles.clone(),
                source,
            });
        }
        let facade = match &cfg.facade {
            None => None,
            Some(f) => Some(facade_source(f, base).map_err(|e| format!("facade: {e}"))?),
        };
        Ok(UpstreamCredentials {
            header,
            rules,
            facade,
        })
    }

    /// The files `cfg` reads (watched like the policy file: a rotated
    /// Secret reloads the policy).
    pub fn referenced(cfg: &UpstreamAuth, base: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let mut cc =
            |c: &mcp_warden_crds::ClientCredentials| files.push(base.join(&c.client_secret_file));
        for rule in &cfg.rules {
            if let Some(c) = &rule.client_credentials {
                cc(c);
            }
        }
        if let Some(c) = cfg
            .facade
            .as_ref()
            .and_then(|f| f.client_credentials.as_ref())
        {
            cc(c);
        }
        for rule in &cfg.rules {
            if let Some(f) = &rule.token_file {
                files.push(base.join(f));
            }
            if let Some(f) = rule
                .token_exchange
                .as_ref()
                .and_then(|t| t.client_secret_file.as_ref())
            {
                files.push(base.join(f));
            }
        }
        if let Some(f) = cfg.facade.as_ref().and_then(|f| f.token_file.as_ref()) {
            files.push(base.join(f));
        }
        files
    }

    /// The credential for a request of `caller` (whose role is `role`).
    pub async fn for_caller(
        &self,
        caller: &Identity,
        role: Option<Role>,
        client: &Arc<Client>,
    ) -> Result<Option<Credential>, CredentialError> {
        let Some(rule) = self.rules.iter().find(|r| r.matches(caller, role)) else {
            return Err(CredentialError::NoRule(describe(caller, role)));
        };
        self.resolve(&rule.source, Some(caller), client).await
    }

    /// The credential of the facade's own requests.
    pub async fn for_facade(
        &self,
        client: &Arc<Client>,
    ) -> Result<Option<Credential>, CredentialError> {
        match &self.facade {
            Some(source) => self.resolve(source, None, client).await,
            None => Ok(None),
        }
    }

    async fn resolve(
        &self,
        source: &Source,
        caller: Option<&Identity>,
        client: &Arc<Client>,
    ) -> Result<Option<Credential>, CredentialError> {
        let token = match source {
            Source::None => return Ok(None),
            Source::Facade => {
                return match &self.facade {
                    Some(Source::Facade) | None => Ok(None),
                    Some(f) => Box::pin(self.resolve(f, None, client)).await,
                }
            }
            Source::Static(secret) => secret.clone(),
            Source::ClientCredentials(grant) => grant
                .token(client)
                .await
                .map_err(CredentialError::Endpoint)?,
            Source::TokenExchange(grant) => {
                let subject = caller
                    .and_then(|c| c.token.as_ref())
                    .ok_or(CredentialError::NoSubjectToken)?;
                grant
                    .token(subject.secret(), client)
                    .await
                    .map_err(CredentialError::Endpoint)?
            }
        };
        let credential = if self.header == AUTHORIZATION {
            Credential::bearer(token.expose())
        } else {
            Credential::new(self.header.clone(), token.expose())
        };
        credential.map(Some).map_err(CredentialError::Endpoint)
    }
}

/// Headers the facade sets itself: a credential may not take their place.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-type",
    "content-length",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
    "transfer-encoding",
    "connection",
];

impl Rule {
    fn matches(&self, caller: &Identity, role: Option<Role>) -> bool {
        if let Some(issuer) = &self.issuer {
            if caller.issuer.as_deref() != Some(issuer.as_str()) {
                return false;
            }
        }
        if !self.subjects.is_empty()
            && !caller
                .subject
                .as_ref()
                .is_some_and(|s| self.subjects.iter().any(|x| x == s))
        {
            return false;
        }
        if !self.roles.is_empty() && !role.is_some_and(|r| self.roles.contains(&r)) {
            return false;
        }
        true
    }
}

fn describe(caller: &Identity, role: Option<Role>) -> String {
    format!(
        "issuer {}, subject {}, role {}",
        caller.issuer.as_deref().unwrap_or("(anonymous)"),
        caller.subject.as_deref().unwrap_or("(anonymous)"),
        role.map_or("(none)".to_string(), |r| format!("{r:?}").to_lowercase())
    )
}

fn rule_source(rule: &UpstreamCredentialRule, base: &Path) -> Result<Source, String> {
    let given = [
        rule.token_file.is_some(),
        rule.client_credentials.is_some(),
        rule.token_exchange.is_some(),
        rule.use_facade,
        rule.none,
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(
            "give exactly one of tokenFile, clientCredentials, tokenExchange, useFacade, none"
                .into(),
        );
    }
    Ok(if let Some(f) = &rule.token_file {
        Source::Static(Secret::read(&base.join(f))?)
    } else if let Some(c) = &rule.client_credentials {
        Source::ClientCredentials(Arc::new(oauth::ClientCredentialsGrant::new(c, base)?))
    } else if let Some(t) = &rule.token_exchange {
        Source::TokenExchange(Arc::new(oauth::TokenExchangeGrant::new(t, base)?))
    } else if rule.use_facade {
        Source::Facade
    } else {
        Source::None
    })
}

fn facade_source(f: &FacadeCredential, base: &Path) -> Result<Source, String> {
    match (&f.token_file, &f.client_credentials) {
        (Some(file), None) => Ok(Source::Static(Secret::read(&base.join(file))?)),
        (None, Some(c)) => Ok(Source::ClientCredentials(Arc::new(
            oauth::ClientCredentialsGrant::new(c, base)?,
        ))),
        _ => Err("give exactly one of tokenFile, clientCredentials".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::identity::AuthMethod;

    fn caller(issuer: &str, subject: &str) -> Identity {
        Identity {
            issuer: Some(issuer.into()),
            subject: Some(subject.into()),
            groups: Vec::new(),
            service_account: None,
            method: AuthMethod::StaticToken,
            token: None,
            expires_at: None,
        }
    }

    fn client() -> Arc<Client> {
        Client::new(&crate::net::ClientConfig::default()).unwrap()
    }

    fn files(dir: &Path, entries: &[(&str, &str)]) {
        for (name, text) in entries {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }

    fn header_of(c: Option<Credential>) -> Option<String> {
        c.map(|c| {
            let (name, value) = c.header().expect("a header credential");
            format!("{name}: {}", value.to_str().unwrap())
        })
    }

    #[tokio::test]
    async fn first_matching_rule_wins_per_subject_then_role() {
        let tmp = tempdir();
        let dir = tmp.path();
        files(
            dir,
            &[
                ("alice", "tok-alice\n"),
                ("admins", "tok-admin"),
                ("users", "tok-user"),
            ],
        );
        let cfg: UpstreamAuth = serde_yaml_ng::from_str(
            "rules:\n\
             - {issuer: static, subjects: [alice], tokenFile: alice}\n\
             - {roles: [admin], tokenFile: admins}\n\
             - {roles: [user, viewer], tokenFile: users}\n\
             - {issuer: nobody-else, none: true}\n",
        )
        .unwrap();
        let creds = UpstreamCredentials::compile(&cfg, dir).unwrap();
        let c = client();
        let got = |who: Identity, role| {
            let creds = &creds;
            let c = &c;
            async move { creds.for_caller(&who, role, c).await.map(header_of) }
        };
        assert_eq!(
            got(caller("static", "alice"), Some(Role::Viewer))
                .await
                .unwrap()
                .as_deref(),
            Some("authorization: Bearer tok-alice")
        );
        assert_eq!(
            got(caller("static", "bob"), Some(Role::Admin))
                .await
                .unwrap()
                .as_deref(),
            Some("authorization: Bearer tok-admin")
        );
        assert_eq!(
            got(caller("https://idp", "alice"), Some(Role::User))
                .await
                .unwrap()
                .as_deref(),
            Some("authorization: Bearer tok-user"),
            "alice of another issuer is not alice"
        );
        let refused = got(caller("static", "carol"), None).await.unwrap_err();
        assert!(matches!(refused, CredentialError::NoRule(_)), "{refused}");
        assert_eq!(creds.for_facade(&c).await.unwrap().map(|_| ()), None);
    }

    #[test]
    fn rules_need_exactly_one_source_and_a_safe_header() {
        let tmp = tempdir();
        let dir = tmp.path();
        files(dir, &[("t", "x")]);
        for bad in [
            "rules: [{roles: [admin]}]",
            "rules: [{tokenFile: t, none: true}]",
            "rules: [{useFacade: true}]",
            "{header: Host, rules: [{none: true}]}",
            "{header: 'bad header', rules: [{none: true}]}",
            "rules: [{tokenFile: missing}]",
        ] {
            let cfg: UpstreamAuth = serde_yaml_ng::from_str(bad).unwrap();
            assert!(UpstreamCredentials::compile(&cfg, dir).is_err(), "{bad}");
        }
        let cfg: UpstreamAuth =
            serde_yaml_ng::from_str("{header: X-Api-Key, rules: [{tokenFile: t}]}").unwrap();
        assert!(UpstreamCredentials::compile(&cfg, dir).is_ok());
    }

    #[tokio::test]
    async fn another_header_carries_the_token_as_is_and_nothing_prints_it() {
        let tmp = tempdir();
        let dir = tmp.path();
        files(dir, &[("t", "s3cr3t-value")]);
        let cfg: UpstreamAuth =
            serde_yaml_ng::from_str("{header: X-Api-Key, rules: [{tokenFile: t}]}").unwrap();
        let creds = UpstreamCredentials::compile(&cfg, dir).unwrap();
        let c = creds
            .for_caller(&caller("static", "a"), None, &client())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            header_of(Some(c.clone())).unwrap(),
            "x-api-key: s3cr3t-value"
        );
        assert!(!format!("{c:?}").contains("s3cr3t"));
        assert!(!format!("{:?}", Secret::new("s3cr3t")).contains("s3cr3t"));
        assert_eq!(
            c.scrub("echo: s3cr3t-value!"),
            "echo: [REDACTED:upstream_credential]!"
        );
    }

    /// A scratch folder removed when the test ends (pass or fail).
    fn tempdir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("mcp-warden-cred-")
            .tempdir()
            .unwrap()
    }
}
