//! Claim sets for real conferencing servers.
//!
//! - [`jitsi`]: Jitsi Meet's token authentication (`prosody` `token`
//!   module): `iss` is the app id, `aud` the app (usually `"jitsi"`), `sub`
//!   the tenant or XMPP domain, `room` the room name (or `"*"`), and
//!   `context.user` the display data; `moderator` grants moderation.
//! - [`livekit`]: a LiveKit access token: `iss` is the API key, `sub` the
//!   participant identity, and the `video` grant names the room and what
//!   the participant may do.

use crate::jwt::Claims;
use serde_json::{Value, json};

/// Who joins, as the conferencing UI shows them.
#[derive(Clone, Debug, Default)]
pub struct User {
    /// Stable user id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// E-mail, if any.
    pub email: Option<String>,
    /// Avatar URL, if any.
    pub avatar: Option<String>,
}

/// A Jitsi Meet join token's claims.
///
/// ```
/// let user = signing::presets::User { id: "u1".into(), name: "Ada".into(), ..Default::default() };
/// let c = signing::presets::jitsi("my-app", "meet.example.com", "standup", &user, true, 1000, 3600);
/// assert_eq!(c["context"]["user"]["name"], "Ada");
/// assert_eq!(c["exp"], 4600);
/// ```
pub fn jitsi(
    app_id: &str,
    domain: &str,
    room: &str,
    user: &User,
    moderator: bool,
    now: i64,
    ttl: i64,
) -> Claims {
    let mut u = serde_json::Map::new();
    u.insert("id".into(), user.id.clone().into());
    u.insert("name".into(), user.name.clone().into());
    if let Some(e) = &user.email {
        u.insert("email".into(), e.clone().into());
    }
    if let Some(a) = &user.avatar {
        u.insert("avatar".into(), a.clone().into());
    }
    object(json!({
        "iss": app_id,
        "aud": "jitsi",
        "sub": domain,
        "room": room,
        "moderator": moderator,
        "context": { "user": Value::Object(u) },
        "iat": now,
        "nbf": now,
        "exp": now + ttl,
    }))
}

/// What a LiveKit participant may do in its room.
#[derive(Clone, Copy, Debug)]
pub struct Grants {
    /// Publish audio/video.
    pub can_publish: bool,
    /// Subscribe to others.
    pub can_subscribe: bool,
}

/// A LiveKit access token's claims.
///
/// ```
/// let g = signing::presets::Grants { can_publish: true, can_subscribe: true };
/// let c = signing::presets::livekit("APIkey", "alice", "Alice", "standup", g, 1000, 600);
/// assert_eq!(c["video"]["roomJoin"], true);
/// assert_eq!(c["sub"], "alice");
/// ```
pub fn livekit(
    api_key: &str,
    identity: &str,
    name: &str,
    room: &str,
    grants: Grants,
    now: i64,
    ttl: i64,
) -> Claims {
    object(json!({
        "iss": api_key,
        "sub": identity,
        "name": name,
        "video": {
            "roomJoin": true,
            "room": room,
            "canPublish": grants.can_publish,
            "canSubscribe": grants.can_subscribe,
        },
        "nbf": now,
        "exp": now + ttl,
    }))
}

fn object(v: Value) -> Claims {
    match v {
        Value::Object(m) => m,
        _ => unreachable!("json! of an object literal"),
    }
}
