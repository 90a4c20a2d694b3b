//! Issuing and verifying, and every way a token is refused.

use std::time::Duration;

use jsonwebtoken::get_current_timestamp;
use proptest::prelude::*;
use uuid::Uuid;

use chatlab_domain::UserId;

use super::{IssueError, KeyError, KeyMaterial, TokenKeys};
use crate::TokenRejection;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
const HOUR: Duration = Duration::from_secs(3600);

fn hs256(secret: &[u8]) -> TokenKeys {
    match TokenKeys::new(KeyMaterial::Secret(secret.to_vec()), "chatlab", HOUR) {
        Ok(keys) => keys,
        Err(e) => panic!("test keys: {e}"),
    }
}

fn user() -> UserId {
    UserId::from_uuid(Uuid::now_v7())
}

fn token(keys: &TokenKeys, user: UserId) -> String {
    match keys.issue(user) {
        Ok(t) => t.token,
        Err(e) => panic!("issue: {e}"),
    }
}

/// `header.payload.` with the given JSON parts and no signature.
fn unsigned(header: &str, payload: &str) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("{}.{}.", b64.encode(header), b64.encode(payload))
}

#[test]
fn an_issued_token_names_its_user() {
    let keys = hs256(SECRET);
    let alice = user();
    assert_eq!(keys.verify(&token(&keys, alice)), Ok(alice));
}

#[test]
fn short_secrets_are_refused() {
    let err = TokenKeys::new(KeyMaterial::Secret(b"short".to_vec()), "chatlab", HOUR);
    assert!(matches!(err, Err(KeyError::SecretTooShort(5))));
}

#[test]
fn another_secret_does_not_verify() {
    let theirs = hs256(b"another secret, also 32 bytes long!");
    assert_eq!(
        hs256(SECRET).verify(&token(&theirs, user())),
        Err(TokenRejection::BadSignature)
    );
}

#[test]
fn expired_tokens_are_refused_past_the_leeway() {
    let keys = hs256(SECRET);
    let two_hours_ago = get_current_timestamp() - 7200;
    let old = match keys.issue_at(user(), two_hours_ago, HOUR) {
        Ok(t) => t.token,
        Err(e) => panic!("issue: {e}"),
    };
    assert_eq!(keys.verify(&old), Err(TokenRejection::Expired));
}

#[test]
fn another_issuer_is_refused() {
    let theirs = match TokenKeys::new(KeyMaterial::Secret(SECRET.to_vec()), "someone-else", HOUR) {
        Ok(k) => k,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        hs256(SECRET).verify(&token(&theirs, user())),
        Err(TokenRejection::WrongIssuer)
    );
}

#[test]
fn alg_none_is_refused() {
    let exp = get_current_timestamp() + 600;
    let forged = unsigned(
        r#"{"alg":"none","typ":"JWT"}"#,
        &format!(
            r#"{{"sub":"{}","iss":"chatlab","iat":0,"exp":{exp}}}"#,
            Uuid::now_v7()
        ),
    );
    let refused = hs256(SECRET).verify(&forged);
    assert!(
        matches!(
            refused,
            Err(TokenRejection::WrongAlgorithm | TokenRejection::Malformed)
        ),
        "{refused:?}"
    );
}

#[test]
fn a_token_of_another_algorithm_is_refused() {
    // EdDSA-signed, presented to an HS256 server.
    let ed = ed25519(true);
    assert_eq!(
        hs256(SECRET).verify(&token(&ed, user())),
        Err(TokenRejection::WrongAlgorithm)
    );
}

#[test]
fn a_subject_that_is_no_user_id_is_refused() {
    // Signed correctly, but `sub` is not a UUID.
    let keys = hs256(SECRET);
    let claims = crate::Claims {
        sub: "admin".to_owned(),
        iss: "chatlab".to_owned(),
        iat: get_current_timestamp(),
        exp: get_current_timestamp() + 600,
    };
    let signed = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET).unwrap(),
    );
    let signed = match signed {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(keys.verify(&signed), Err(TokenRejection::BadSubject));
}

/// A token signed with [`SECRET`] carrying `nbf` (seconds from now, may
/// be negative).
fn starting_in(secs: i64) -> String {
    let now = get_current_timestamp();
    let claims = serde_json::json!({
        "sub": Uuid::now_v7().to_string(),
        "iss": "chatlab",
        "iat": now,
        "exp": now + 2 * 86_400,
        "nbf": now.saturating_add_signed(secs),
    });
    let signed = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET).unwrap(),
    );
    match signed {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_token_not_valid_yet_is_refused_past_the_leeway() {
    let keys = hs256(SECRET);
    assert_eq!(
        keys.verify(&starting_in(86_400)),
        Err(TokenRejection::NotYetValid),
        "valid from tomorrow"
    );
    assert_eq!(
        keys.verify(&starting_in(120)),
        Err(TokenRejection::NotYetValid),
        "two minutes ahead is past the 60 s leeway"
    );
    assert!(keys.verify(&starting_in(30)).is_ok(), "within the leeway");
    assert!(
        keys.verify(&starting_in(-3600)).is_ok(),
        "started an hour ago"
    );
}

#[test]
fn missing_claims_are_refused() {
    let keys = hs256(SECRET);
    let no_exp = serde_json::json!({"sub": Uuid::now_v7().to_string(), "iss": "chatlab"});
    let signed = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &no_exp,
        &jsonwebtoken::EncodingKey::from_secret(SECRET).unwrap(),
    );
    let signed = match signed {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(keys.verify(&signed), Err(TokenRejection::MissingClaim));
}

fn ed25519(with_private: bool) -> TokenKeys {
    let material = KeyMaterial::Ed25519 {
        public_pem: include_bytes!("../../testdata/ed25519-public.pem").to_vec(),
        private_pem: with_private
            .then(|| include_bytes!("../../testdata/ed25519-private.pem").to_vec()),
    };
    match TokenKeys::new(material, "chatlab", HOUR) {
        Ok(k) => k,
        Err(e) => panic!("ed25519 keys: {e}"),
    }
}

#[test]
fn eddsa_keys_issue_and_verify_and_a_public_key_alone_only_verifies() {
    let signer = ed25519(true);
    let verifier = ed25519(false);
    let bob = user();
    assert_eq!(verifier.verify(&token(&signer, bob)), Ok(bob));
    assert!(matches!(verifier.issue(bob), Err(IssueError::NoSigningKey)));
    assert!(!verifier.can_issue());

    let impostor = match TokenKeys::new(
        KeyMaterial::Ed25519 {
            public_pem: include_bytes!("../../testdata/ed25519-public.pem").to_vec(),
            private_pem: Some(include_bytes!("../../testdata/other-ed25519-private.pem").to_vec()),
        },
        "chatlab",
        HOUR,
    ) {
        Ok(k) => k,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        verifier.verify(&token(&impostor, bob)),
        Err(TokenRejection::BadSignature)
    );
}

#[test]
fn rs256_keys_issue_and_verify() {
    let keys = TokenKeys::new(
        KeyMaterial::Rsa {
            public_pem: include_bytes!("../../testdata/rsa-public.pem").to_vec(),
            private_pem: Some(include_bytes!("../../testdata/rsa-private.pem").to_vec()),
        },
        "chatlab",
        HOUR,
    );
    let keys = match keys {
        Ok(k) => k,
        Err(e) => panic!("{e}"),
    };
    let carol = user();
    assert_eq!(keys.algorithm(), "RS256");
    assert_eq!(keys.verify(&token(&keys, carol)), Ok(carol));
}

#[test]
fn a_public_key_file_that_is_not_one_is_refused() {
    let err = TokenKeys::new(
        KeyMaterial::Ed25519 {
            public_pem: b"-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n"
                .to_vec(),
            private_pem: None,
        },
        "chatlab",
        HOUR,
    );
    assert!(matches!(
        err,
        Err(KeyError::Pem {
            which: "public",
            ..
        })
    ));
}

#[test]
fn generated_secrets_differ() {
    let (a, b) = match (
        TokenKeys::generated("chatlab", HOUR),
        TokenKeys::generated("chatlab", HOUR),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        _ => panic!("no random secret"),
    };
    assert_eq!(
        b.verify(&token(&a, user())),
        Err(TokenRejection::BadSignature)
    );
}

proptest! {
    /// Whatever a client sends as a token, verifying answers (never
    /// panics) and never accepts it.
    #[test]
    fn arbitrary_strings_never_verify(s in ".{0,300}") {
        prop_assert!(hs256(SECRET).verify(&s).is_err());
    }

    /// A valid token with any one character changed never verifies as
    /// another user.
    #[test]
    fn a_tampered_token_never_names_someone_else(pos in 0usize..400, c in "[A-Za-z0-9_.-]") {
        let keys = hs256(SECRET);
        let alice = user();
        let mut t = token(&keys, alice).into_bytes();
        let pos = pos % t.len();
        t[pos] = c.as_bytes()[0];
        let t = String::from_utf8_lossy(&t).into_owned();
        if let Ok(who) = keys.verify(&t) {
            prop_assert_eq!(who, alice);
        }
    }
}
