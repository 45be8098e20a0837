//! TLS for the API and the dashboard: a certificate chain and its private key from PEM files,
//! served with rustls on the ring provider (no C crypto library; one provider in the process,
//! shared with the store's PostgreSQL connections and the CLI's client).
//!
//! Every problem names the file: unreadable, not PEM, no certificate, no key, or a key that
//! does not belong to the certificate.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::ServerError;

/// The PEM files `weir serve --tls-cert FILE --tls-key FILE` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate, then any intermediates (PEM).
    pub cert: PathBuf,
    /// The certificate's private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC), PEM.
    pub key: PathBuf,
}

impl TlsFiles {
    /// Reads both files and checks that the key is the certificate's, as a start would.
    pub fn check(&self) -> Result<(), ServerError> {
        server_config(self).map(|_| ())
    }
}

/// Makes ring the process's rustls provider, unless one is installed already. Everything TLS in
/// weir (this server, sqlx's PostgreSQL connections, the CLI's reqwest) then uses ring.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may win the race; either way ring is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The rustls configuration for `files`, HTTP/1.1 only (the server speaks HTTP/1.1).
pub(crate) fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    let certs = read_certs(&files.cert)?;
    let key = read_key(&files.key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls("certificate", &files.cert, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            tls(
                "key",
                &files.key,
                format!("cannot be used with the certificate in {}: {e}", files.cert.display()),
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn tls(what: &'static str, path: &Path, problem: String) -> ServerError {
    ServerError::Tls { what, path: path.to_path_buf(), problem }
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, ServerError> {
    std::fs::read(path).map_err(|e| tls(what, path, format!("cannot be read: {e}")))
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, ServerError> {
    let pem = read("certificate", path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls("certificate", path, format!("is not a valid PEM file: {e}")))?;
    if certs.is_empty() {
        return Err(tls("certificate", path, "holds no certificate (no `BEGIN CERTIFICATE` block)".into()));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, ServerError> {
    let pem = read("key", path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => tls(
            "key",
            path,
            "holds no private key (expected a `BEGIN PRIVATE KEY`, `BEGIN RSA PRIVATE KEY` or \
             `BEGIN EC PRIVATE KEY` block)"
                .into(),
        ),
        e => tls("key", path, format!("is not a valid PEM file: {e}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_name_the_file() {
        let dir = std::env::temp_dir().join(format!("weir-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let missing = TlsFiles { cert: dir.join("nope.crt"), key: dir.join("nope.key") };
        let e = server_config(&missing).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("nope.crt") && e.contains("cannot be read"), "{e}");
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "hello\n").expect("write");
        let files = TlsFiles { cert: junk.clone(), key: junk.clone() };
        let e = server_config(&files).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("junk.pem") && e.contains("no certificate"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
