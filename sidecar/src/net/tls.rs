//! TLS to HTTPS upstreams and token endpoints (rustls, no OpenSSL).
//!
//! Trust: the platform's roots (`/etc/ssl/certs`, or `SSL_CERT_FILE` /
//! `SSL_CERT_DIR`) plus an optional PEM bundle (`--upstream-ca-file`), for
//! a server whose certificate a private CA signed, or that bundle alone
//! (a gateway's `--backend-ca`). The server name (SNI, and
//! what the certificate must name) is the URL's host. ALPN offers HTTP/2
//! and HTTP/1.1; the server picks.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// The client configuration every TLS connection uses; with `ca_only`,
/// `ca_file` is the only trust.
pub fn client_config(
    ca_file: Option<&Path>,
    ca_only: bool,
    http2: bool,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let roots = roots(ca_file, ca_only, || {
        rustls_native_certs::load_native_certs().certs
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}

/// The trusted roots: the platform's (`native`, not even read with
/// `ca_only` and a bundle) and the bundle's.
fn roots(
    ca_file: Option<&Path>,
    ca_only: bool,
    native: impl FnOnce() -> Vec<CertificateDer<'static>>,
) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let added = if ca_only && ca_file.is_some() {
        0
    } else {
        roots.add_parsable_certificates(native()).0
    };
    let mut extra = 0;
    if let Some(path) = ca_file {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("cannot read the CA bundle {}: {e}", path.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("cannot read the CA bundle {}: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!(
                "the CA bundle {} holds no certificate",
                path.display()
            ));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("the CA bundle {}: {e}", path.display()))?;
            extra += 1;
        }
    }
    if added + extra == 0 {
        return Err(
            "no trusted root certificates: the platform has none (/etc/ssl/certs, SSL_CERT_FILE) and no --upstream-ca-file was given"
                .into(),
        );
    }
    Ok(roots)
}

/// A connection's byte stream: plain TCP (a loopback upstream in the pod)
/// or TLS over TCP.
pub enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Io {
    /// Whether the server chose HTTP/2 (ALPN).
    pub fn is_h2(&self) -> bool {
        match self {
            Io::Plain(_) => false,
            Io::Tls(tls) => tls.get_ref().1.alpn_protocol() == Some(b"h2"),
        }
    }
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca() -> rcgen::Certificate {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap()
    }

    /// `ca_only` (a gateway's `--backend-ca`): the bundle is the whole
    /// trust, a CA the platform trusts is not.
    #[test]
    fn with_ca_only_the_platforms_roots_are_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("ca.pem");
        std::fs::write(&bundle, ca().pem()).unwrap();
        let platform = ca().der().clone();
        let trusted = |ca_file: Option<&Path>, ca_only: bool| {
            roots(ca_file, ca_only, || vec![platform.clone()])
                .unwrap()
                .roots
                .len()
        };
        assert_eq!(
            trusted(Some(&bundle), false),
            2,
            "the bundle and the platform's"
        );
        assert_eq!(trusted(Some(&bundle), true), 1, "the bundle alone");
        assert_eq!(trusted(None, true), 1, "no bundle: the platform's");
    }
}
