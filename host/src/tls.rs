//! One TLS crypto provider for the whole process (kube-rs and reqwest both use rustls).

/// Installs ring as rustls' process-wide provider; harmless when one is installed already.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
