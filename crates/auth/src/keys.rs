//! Keys that issue and verify tokens.

use std::time::Duration;

use jsonwebtoken::{
    Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode, get_current_timestamp,
};
use uuid::Uuid;

use chatlab_domain::UserId;

use crate::claims::Claims;
use crate::rejection::TokenRejection;

/// The shortest HS256 secret accepted: 32 bytes, the hash's own size
/// (RFC 7518 §3.2 asks for at least that).
pub const MIN_SECRET_BYTES: usize = 32;

/// The key material of one algorithm.
pub enum KeyMaterial {
    /// HS256: one shared secret signs and verifies.
    Secret(Vec<u8>),
    /// EdDSA (Ed25519): a PEM public key verifies; a PEM private key, when
    /// given, lets this server issue tokens too.
    Ed25519 {
        /// SubjectPublicKeyInfo PEM.
        public_pem: Vec<u8>,
        /// PKCS#8 PEM.
        private_pem: Option<Vec<u8>>,
    },
    /// RS256: as EdDSA, with RSA keys.
    Rsa {
        /// PKCS#1 or SubjectPublicKeyInfo PEM.
        public_pem: Vec<u8>,
        /// PKCS#1 or PKCS#8 PEM.
        private_pem: Option<Vec<u8>>,
    },
}

impl std::fmt::Debug for KeyMaterial {
    // Never prints key bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Secret(_) => "KeyMaterial::Secret(..)",
            Self::Ed25519 { .. } => "KeyMaterial::Ed25519 { .. }",
            Self::Rsa { .. } => "KeyMaterial::Rsa { .. }",
        })
    }
}

/// Why keys could not be built.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// An HS256 secret shorter than [`MIN_SECRET_BYTES`].
    #[error("the secret is {0} bytes; HS256 needs at least {MIN_SECRET_BYTES}")]
    SecretTooShort(usize),
    /// A PEM file that is not a key of the algorithm.
    #[error("not a {algorithm} {which} key in PEM form: {source}")]
    Pem {
        /// `EdDSA` or `RS256`.
        algorithm: &'static str,
        /// `public` or `private`.
        which: &'static str,
        /// The parser's complaint.
        #[source]
        source: jsonwebtoken::errors::Error,
    },
    /// The secret is refused by the signing library.
    #[error("the secret is unusable: {0}")]
    Secret(#[source] jsonwebtoken::errors::Error),
    /// The operating system gave no random bytes for a generated secret.
    #[error("no random bytes for a generated secret: {0}")]
    Random(String),
}

/// Why a token could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// Verify-only keys (a public key without its private key).
    #[error("this server verifies tokens but holds no key to issue them")]
    NoSigningKey,
    /// Signing failed.
    #[error("could not sign the token: {0}")]
    Sign(#[source] jsonwebtoken::errors::Error),
}

/// A token just issued.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    /// The compact JWT.
    pub token: String,
    /// When it expires, seconds since the Unix epoch.
    pub expires_at: u64,
}

/// What [`TokenKeys::verify`] reads of a token's claims.
#[derive(serde::Deserialize)]
struct Subject {
    sub: Option<String>,
}

/// Issues and verifies one algorithm's tokens for one issuer.
pub struct TokenKeys {
    algorithm: Algorithm,
    encoding: Option<EncodingKey>,
    decoding: DecodingKey,
    validation: Validation,
    issuer: String,
    ttl: Duration,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKeys")
            .field("algorithm", &self.algorithm)
            .field("can_issue", &self.encoding.is_some())
            .field("issuer", &self.issuer)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl TokenKeys {
    /// Keys from `material`, for tokens of `issuer` that live `ttl`.
    pub fn new(material: KeyMaterial, issuer: &str, ttl: Duration) -> Result<Self, KeyError> {
        let pem = |algorithm, which| {
            move |source| KeyError::Pem {
                algorithm,
                which,
                source,
            }
        };
        let (algorithm, encoding, decoding) = match material {
            KeyMaterial::Secret(secret) => {
                if secret.len() < MIN_SECRET_BYTES {
                    return Err(KeyError::SecretTooShort(secret.len()));
                }
                (
                    Algorithm::HS256,
                    Some(EncodingKey::from_secret(&secret).map_err(KeyError::Secret)?),
                    DecodingKey::from_secret(&secret).map_err(KeyError::Secret)?,
                )
            }
            KeyMaterial::Ed25519 {
                public_pem,
                private_pem,
            } => (
                Algorithm::EdDSA,
                private_pem
                    .map(|p| EncodingKey::from_ed_pem(&p).map_err(pem("EdDSA", "private")))
                    .transpose()?,
                DecodingKey::from_ed_pem(&public_pem).map_err(pem("EdDSA", "public"))?,
            ),
            KeyMaterial::Rsa {
                public_pem,
                private_pem,
            } => (
                Algorithm::RS256,
                private_pem
                    .map(|p| EncodingKey::from_rsa_pem(&p).map_err(pem("RS256", "private")))
                    .transpose()?,
                DecodingKey::from_rsa_pem(&public_pem).map_err(pem("RS256", "public"))?,
            ),
        };
        // Exactly one algorithm: a token naming another (`none` included)
        // is refused before its signature is looked at.
        let mut validation = Validation::new(algorithm);
        validation.set_issuer(&[issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        validation.validate_exp = true;
        // `nbf` is optional, but when a token carries it, it is checked
        // with the same leeway as `exp` (an identity provider may issue
        // tokens that start later).
        validation.validate_nbf = true;
        Ok(Self {
            algorithm,
            encoding,
            decoding,
            validation,
            issuer: issuer.to_owned(),
            ttl,
        })
    }

    /// HS256 keys from a secret the operating system makes up: tokens then
    /// die with the process. The server warns when it does this.
    pub fn generated(issuer: &str, ttl: Duration) -> Result<Self, KeyError> {
        let mut secret = vec![0u8; MIN_SECRET_BYTES];
        getrandom::fill(&mut secret).map_err(|e| KeyError::Random(e.to_string()))?;
        Self::new(KeyMaterial::Secret(secret), issuer, ttl)
    }

    /// The one algorithm accepted (`HS256`, `EdDSA` or `RS256`).
    pub fn algorithm(&self) -> &'static str {
        match self.algorithm {
            Algorithm::EdDSA => "EdDSA",
            Algorithm::RS256 => "RS256",
            _ => "HS256",
        }
    }

    /// Whether these keys can issue tokens (HS256 always; the others with
    /// a private key).
    pub fn can_issue(&self) -> bool {
        self.encoding.is_some()
    }

    /// How long an issued token lives.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A token for `user`, valid from now for the configured lifetime.
    pub fn issue(&self, user: UserId) -> Result<IssuedToken, IssueError> {
        self.issue_at(user, get_current_timestamp(), self.ttl)
    }

    /// A token for `user` issued at `iat` (seconds since the epoch) that
    /// lives `ttl`: tests mint expired tokens with it.
    pub fn issue_at(
        &self,
        user: UserId,
        iat: u64,
        ttl: Duration,
    ) -> Result<IssuedToken, IssueError> {
        let key = self.encoding.as_ref().ok_or(IssueError::NoSigningKey)?;
        let claims = Claims {
            sub: user.as_uuid().to_string(),
            iss: self.issuer.clone(),
            iat,
            exp: iat.saturating_add(ttl.as_secs()),
        };
        let token = encode(&Header::new(self.algorithm), &claims, key).map_err(IssueError::Sign)?;
        Ok(IssuedToken {
            token,
            expires_at: claims.exp,
        })
    }

    /// The user a token speaks for, or why it is refused. Signature,
    /// algorithm, issuer, expiry and, when present, `nbf` (both with
    /// jsonwebtoken's 60 s leeway for clock skew) are checked; nothing is
    /// looked up.
    pub fn verify(&self, token: &str) -> Result<UserId, TokenRejection> {
        // Only `sub` is read into a struct, and as optional: the library
        // checks `exp` and `iss` itself and names a missing claim, where a
        // required field would have failed as malformed JSON first.
        let data = decode::<Subject>(token, &self.decoding, &self.validation)
            .map_err(|e| TokenRejection::from(&e))?;
        let sub = data.claims.sub.ok_or(TokenRejection::MissingClaim)?;
        Uuid::parse_str(&sub)
            .map(UserId::from_uuid)
            .map_err(|_| TokenRejection::BadSubject)
    }
}

#[cfg(test)]
mod tests;
