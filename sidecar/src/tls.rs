//! TLS on the MCP listener, from a certificate and key file pair (a mounted
//! `kubernetes.io/tls` Secret, e.g. cert-manager's).
//!
//! ```text
//! tls.crt + tls.key ──load──▶ CertifiedKey ──▶ Certificates (ArcSwap) ──resolve──▶ every handshake
//!        ▲ polled every RELOAD_EVERY; a changed, valid pair is swapped in (no restart, no dropped session)
//! ```
//!
//! Replicas relay a session's requests to the replica that owns it
//! (`downstream::forward`) over the same listener, so relays speak TLS too.
//! Peers are addressed by pod IP, which no certificate names; what makes a
//! peer trustworthy is that it holds the same Secret, so a relay accepts
//! exactly the certificate this facade serves ([`PinnedToOwn`]). During a
//! rotation a relay may meet the other certificate and fail: the client sees
//! 404 and opens a new session, as when an owner goes away.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, SignatureScheme};

/// How often the files are looked at for a new certificate.
pub const RELOAD_EVERY: Duration = Duration::from_secs(10);

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The served certificate, replaced when its files change.
#[derive(Debug)]
pub struct Certificates {
    cert: PathBuf,
    key: PathBuf,
    current: ArcSwap<(Vec<u8>, Arc<CertifiedKey>)>,
}

impl Certificates {
    /// Load the pair; an unreadable or invalid pair is an error (the facade
    /// does not start without the TLS it was asked for).
    pub fn load(cert: &Path, key: &Path) -> Result<Arc<Certificates>, String> {
        let (raw, certified) = read_pair(cert, key)?;
        Ok(Arc::new(Certificates {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current: ArcSwap::from_pointee((raw, certified)),
        }))
    }

    /// Look at the files again; swap in a changed pair if it is valid (an
    /// invalid one is logged and the served certificate kept). Returns
    /// whether the certificate changed.
    pub fn reload(&self) -> bool {
        match read_pair(&self.cert, &self.key) {
            Ok((raw, certified)) if raw != self.current.load().0 => {
                self.current.store(Arc::new((raw, certified)));
                tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded");
                true
            }
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(error = %e, "new TLS certificate unusable; keeping the served one");
                false
            }
        }
    }

    /// Reload every [`RELOAD_EVERY`], for as long as the process runs.
    pub fn watch(self: Arc<Self>) {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(RELOAD_EVERY).await;
                self.reload();
            }
        });
    }

    /// The end-entity certificate served now.
    fn leaf(&self) -> CertificateDer<'static> {
        self.current.load().1.cert[0].clone()
    }

    /// The server configuration for the MCP listener (HTTP/1.1 only, as the
    /// listener serves).
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<rustls::ServerConfig>, String> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// The client configuration for relays to peer replicas.
    pub fn peer_client_config(self: &Arc<Self>) -> Result<Arc<rustls::ClientConfig>, String> {
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedToOwn(self.clone())))
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load().1.clone())
    }
}

/// The files' bytes (to notice a change) and the parsed pair.
fn read_pair(cert: &Path, key: &Path) -> Result<(Vec<u8>, Arc<CertifiedKey>), String> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()));
    let (cert_pem, key_pem) = (read(cert)?, read(key)?);
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("{} holds no certificate", cert.display()));
    }
    let private =
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| format!("{}: {e}", key.display()))?;
    let certified = CertifiedKey::from_der(chain, private, &provider())
        .map_err(|e| format!("{} and {}: {e}", cert.display(), key.display()))?;
    let mut raw = cert_pem;
    raw.extend_from_slice(&key_pem);
    Ok((raw, Arc::new(certified)))
}

/// Accepts a server exactly when it presents the certificate this facade
/// serves (a peer replica holding the same Secret); signatures are checked
/// as usual, so the peer must also hold the key.
#[derive(Debug)]
struct PinnedToOwn(Arc<Certificates>);

impl ServerCertVerifier for PinnedToOwn {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.0.leaf().as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "the peer does not serve this facade's certificate".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
