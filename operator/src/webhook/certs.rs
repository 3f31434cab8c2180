//! The webhook's serving certificate.
//!
//! ```text
//! --webhook-cert-dir has tls.crt + tls.key ─▶ use them (e.g. cert-manager); caBundle is the chart's job
//! otherwise ─▶ Secret --webhook-cert-secret (operator namespace)
//!                ├─ exists: use it (every replica serves the same certificate)
//!                └─ absent: generate (rcgen, self-signed for <svc>.<ns>.svc) and create it
//!            ─▶ write its certificate into the caBundle of every webhook in the
//!               Validating/MutatingWebhookConfiguration --webhook-config-name
//! ```

use std::{collections::BTreeMap, path::Path, sync::Arc};

use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        core::v1::Secret,
    },
    ByteString,
};
use kube::{
    api::{ObjectMeta, Patch, PatchParams, PostParams},
    Api, Client,
};
use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};

/// A PEM certificate (chain) and its PEM private key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertPair {
    /// `tls.crt`.
    pub cert_pem: String,
    /// `tls.key`.
    pub key_pem: String,
}

/// Why there is no usable certificate.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file in the certificate directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The PEM does not hold a certificate and a key rustls accepts.
    #[error("invalid certificate or key: {0}")]
    Invalid(String),
    /// Generating a certificate failed.
    #[error("cannot generate a certificate: {0}")]
    Generate(String),
    /// Reading or writing the Secret or a webhook configuration failed.
    #[error("{what}: {source}")]
    Api {
        /// The object.
        what: String,
        /// The API error.
        source: kube::Error,
    },
}

/// `tls.crt` and `tls.key` from `dir`, if both exist.
pub fn load_dir(dir: &Path) -> Result<Option<CertPair>, CertError> {
    let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    if !crt.exists() || !key.exists() {
        return Ok(None);
    }
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|source| CertError::Read {
            path: p.display().to_string(),
            source,
        })
    };
    Ok(Some(CertPair {
        cert_pem: read(&crt)?,
        key_pem: read(&key)?,
    }))
}

/// The DNS names the API server may use for the webhook Service.
pub fn service_dns_names(service: &str, namespace: &str, cluster_domain: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.{cluster_domain}"),
        format!("{service}.{namespace}"),
        service.to_string(),
    ]
}

/// A new self-signed certificate for `names`.
pub fn generate(names: Vec<String>) -> Result<CertPair, CertError> {
    let certified = rcgen::generate_simple_self_signed(names)
        .map_err(|e| CertError::Generate(e.to_string()))?;
    Ok(CertPair {
        cert_pem: certified.cert.pem(),
        key_pem: certified.signing_key.serialize_pem(),
    })
}

/// A rustls server configuration for `pair` (HTTP/1.1 and HTTP/2).
pub fn server_config(pair: &CertPair) -> Result<Arc<rustls::ServerConfig>, CertError> {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| CertError::Invalid(format!("tls.crt: {e}")))?;
    if certs.is_empty() {
        return Err(CertError::Invalid("tls.crt holds no certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes())
        .map_err(|e| CertError::Invalid(format!("tls.key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CertError::Invalid(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| CertError::Invalid(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificate in Secret `name`, created with a generated one if absent.
pub async fn ensure_secret(
    client: &Client,
    namespace: &str,
    name: &str,
    dns_names: Vec<String>,
) -> Result<CertPair, CertError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let err = |source| CertError::Api {
        what: format!("Secret {namespace}/{name}"),
        source,
    };
    let from_secret = |s: &Secret| -> Option<CertPair> {
        let data = s.data.as_ref()?;
        let text = |k: &str| String::from_utf8(data.get(k)?.0.clone()).ok();
        Some(CertPair {
            cert_pem: text("tls.crt")?,
            key_pem: text("tls.key")?,
        })
    };
    if let Some(pair) = api
        .get_opt(name)
        .await
        .map_err(err)?
        .as_ref()
        .and_then(from_secret)
    {
        return Ok(pair);
    }
    let pair = generate(dns_names)?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                "mcp-warden-operator".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(BTreeMap::from([
            (
                "tls.crt".to_string(),
                ByteString(pair.cert_pem.clone().into_bytes()),
            ),
            (
                "tls.key".to_string(),
                ByteString(pair.key_pem.clone().into_bytes()),
            ),
        ])),
        ..Secret::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(pair),
        // Another replica won the race: use its certificate.
        Err(kube::Error::Api(e)) if e.code == 409 => ensure_existing(&api, name).await,
        Err(e) => Err(err(e)),
    }
}

async fn ensure_existing(api: &Api<Secret>, name: &str) -> Result<CertPair, CertError> {
    let s = api.get(name).await.map_err(|source| CertError::Api {
        what: format!("Secret {name}"),
        source,
    })?;
    let data = s.data.unwrap_or_default();
    let text = |k: &str| {
        data.get(k)
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
            .ok_or_else(|| CertError::Invalid(format!("Secret {name} has no {k}")))
    };
    Ok(CertPair {
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
    })
}

/// Write `ca_pem` into the `caBundle` of every webhook of the Validating- and
/// MutatingWebhookConfiguration `config_name` (strategic merge by webhook
/// name, field manager `mcp-warden-operator`; a missing configuration, or one
/// whose every caBundle is already right, is skipped). Returns how many were
/// patched.
pub async fn patch_ca_bundles(
    client: &Client,
    config_name: &str,
    ca_pem: &str,
) -> Result<usize, CertError> {
    let bundle = serde_json::to_value(ByteString(ca_pem.as_bytes().to_vec()))
        .expect("bytes serialize as base64");
    let validating = patch_one(
        Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        "ValidatingWebhookConfiguration",
        config_name,
        &bundle,
        |c| {
            c.webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| (w.name, w.client_config.ca_bundle))
                .collect()
        },
    );
    let mutating = patch_one(
        Api::<MutatingWebhookConfiguration>::all(client.clone()),
        "MutatingWebhookConfiguration",
        config_name,
        &bundle,
        |c| {
            c.webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| (w.name, w.client_config.ca_bundle))
                .collect()
        },
    );
    Ok(usize::from(validating.await?) + usize::from(mutating.await?))
}

/// Patch the `caBundle` of every webhook of one configuration, if it exists
/// and has webhooks. Returns whether it was patched.
async fn patch_one<K>(
    api: Api<K>,
    kind: &str,
    config_name: &str,
    bundle: &serde_json::Value,
    webhooks: impl FnOnce(K) -> Vec<(String, Option<ByteString>)>,
) -> Result<bool, CertError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let err = |source| CertError::Api {
        what: format!("{kind} {config_name}"),
        source,
    };
    let Some(live) = api.get_opt(config_name).await.map_err(err)? else {
        return Ok(false);
    };
    let webhooks = webhooks(live);
    let current = |b: &Option<ByteString>| b.as_ref().and_then(|b| serde_json::to_value(b).ok());
    if webhooks
        .iter()
        .all(|(_, b)| current(b).as_ref() == Some(bundle))
    {
        return Ok(false); // nothing to do (or no webhooks): no write
    }
    let names: Vec<String> = webhooks.into_iter().map(|(n, _)| n).collect();
    let patch = bundle_patch(&names, bundle);
    // Named, so `managedFields` says who owns caBundle (not "unknown").
    let params = PatchParams {
        field_manager: Some(crate::config::FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch(config_name, &params, &Patch::Strategic(patch))
        .await
        .map_err(err)?;
    Ok(true)
}

fn bundle_patch(names: &[String], bundle: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "webhooks": names
            .iter()
            .map(|n| serde_json::json!({"name": n, "clientConfig": {"caBundle": bundle}}))
            .collect::<Vec<_>>()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificates_load_into_rustls() {
        let pair = generate(service_dns_names(
            "mcp-warden-webhook",
            "mcp-warden-system",
            "cluster.local",
        ))
        .unwrap();
        assert!(pair.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        server_config(&pair).unwrap();
        let broken = CertPair {
            key_pem: "nope".into(),
            ..pair
        };
        assert!(matches!(server_config(&broken), Err(CertError::Invalid(_))));
    }

    #[test]
    fn a_directory_without_files_means_generate() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        assert_eq!(load_dir(dir).unwrap(), None);
        let pair = generate(vec!["x.y.svc".into()]).unwrap();
        std::fs::write(dir.join("tls.crt"), &pair.cert_pem).unwrap();
        std::fs::write(dir.join("tls.key"), &pair.key_pem).unwrap();
        assert_eq!(load_dir(dir).unwrap(), Some(pair));
    }

    #[test]
    fn the_ca_bundle_patch_names_every_webhook() {
        let patch = bundle_patch(&["a".into(), "b".into()], &serde_json::json!("Q0E="));
        assert_eq!(
            patch,
            serde_json::json!({"webhooks": [
                {"name": "a", "clientConfig": {"caBundle": "Q0E="}},
                {"name": "b", "clientConfig": {"caBundle": "Q0E="}}
            ]})
        );
    }
}
