//! What a write's answer created: the `id` of a 201's JSON body.

use uuid::Uuid;

/// The id of what `sent` created: its 201 answer's body's `id`; `None`
/// when the request failed, another status came back, or the body names
/// no id. Reads the body, so the answer has fully arrived when it returns.
pub(crate) async fn created_id(sent: reqwest::Result<reqwest::Response>) -> Option<Uuid> {
    match sent {
        Ok(resp) if resp.status().as_u16() == 201 => resp
            .json::<serde_json::Value>()
            .await
            .ok()
            .and_then(|v| v["id"].as_str()?.parse().ok()),
        _ => None,
    }
}
