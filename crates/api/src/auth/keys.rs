//! Token keys from the settings.

use std::path::{Path, PathBuf};

use secrecy::ExposeSecret;

use chatlab_auth::{KeyError, KeyMaterial, TokenKeys};

use crate::config::{AuthSettings, JwtAlgorithm};

/// Why the token keys could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    /// A key file could not be read.
    #[error("could not read the key file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The keys themselves are refused.
    #[error("the token keys are unusable")]
    Keys(#[from] KeyError),
}

/// The server's token keys. With HS256 and no secret, a random one: the
/// server warns that its tokens will not survive a restart (nor verify on
/// another instance).
pub fn from_settings(a: &AuthSettings) -> Result<TokenKeys, AuthSetupError> {
    let material = match a.algorithm {
        JwtAlgorithm::Hs256 => match &a.secret {
            Some(secret) => KeyMaterial::Secret(secret.expose_secret().as_bytes().to_vec()),
            None => {
                tracing::warn!(
                    "CHATLAB_JWT_SECRET is not set: tokens are signed with a random secret made \
                     at startup, so they stop working when this process restarts and are not \
                     accepted by other instances; set a secret of at least 32 bytes \
                     (`openssl rand -hex 32`)"
                );
                return Ok(TokenKeys::generated(&a.issuer, a.token_ttl)?);
            }
        },
        JwtAlgorithm::EdDsa | JwtAlgorithm::Rs256 => {
            let public_pem = match &a.public_key_file {
                Some(path) => read(path)?,
                None => Vec::new(),
            };
            let private_pem = a.private_key_file.as_deref().map(read).transpose()?;
            if a.algorithm == JwtAlgorithm::EdDsa {
                KeyMaterial::Ed25519 {
                    public_pem,
                    private_pem,
                }
            } else {
                KeyMaterial::Rsa {
                    public_pem,
                    private_pem,
                }
            }
        }
    };
    Ok(TokenKeys::new(material, &a.issuer, a.token_ttl)?)
}

fn read(path: &Path) -> Result<Vec<u8>, AuthSetupError> {
    std::fs::read(path).map_err(|source| AuthSetupError::Read {
        path: path.to_owned(),
        source,
    })
}
