//! Claim sets for real conferencing servers.
//!
//! - [`jitsi`]: Jitsi Meet's token authentication (`prosody` `token`
//!   module): `iss` is the app id, `aud` the app (usually `"jitsi"`), `sub`
//!   the tenant or XMPP domain, `room` the room name (or `"*"`), and
//!   `context.user` the display data; `moderator` grants moderation.
//! - [`livekit`]: a LiveKit access token: `iss` is the API key, `sub` the
//!   participant identity, and the `video` grant names the room and what
//!   the participant may do.

use serde::Serialize;

/// Who joins, as the conferencing UI shows them: Jitsi's `context.user`
/// claim as it is (fields in key order, see below).
#[derive(Clone, Debug, Default, Serialize)]
pub struct User {
    /// Avatar URL, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
    /// E-mail, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Stable user id.
    pub id: String,
    /// Display name.
    pub name: String,
}

// The claim sets are typed and borrow their strings, so a token's claims
// are written straight to JSON with no map or copies in between (in wasm
// that was a tenth of a token's cost outside the signature). Fields are in
// key order, as serde_json's maps wrote them: tokens stay byte-identical.

/// A Jitsi Meet join token's claims ([`jitsi`]).
#[derive(Clone, Debug, Serialize)]
pub struct Jitsi<'a> {
    /// The app (usually `"jitsi"`).
    pub aud: &'a str,
    /// Display data.
    pub context: JitsiContext<'a>,
    /// Expiry, Unix seconds.
    pub exp: i64,
    /// Issued at.
    pub iat: i64,
    /// The app id.
    pub iss: &'a str,
    /// Whether the user moderates the room.
    pub moderator: bool,
    /// Not before.
    pub nbf: i64,
    /// The room name, or `"*"`.
    pub room: &'a str,
    /// The tenant or XMPP domain.
    pub sub: &'a str,
}

/// Jitsi's `context` claim.
#[derive(Clone, Debug, Serialize)]
pub struct JitsiContext<'a> {
    /// The user as the UI shows them.
    pub user: &'a User,
}

/// A Jitsi Meet join token's claims.
///
/// ```
/// let user = signing::presets::User { id: "u1".into(), name: "Ada".into(), ..Default::default() };
/// let c = signing::presets::jitsi("my-app", "meet.example.com", "standup", &user, true, 1000, 3600);
/// assert_eq!(c.context.user.name, "Ada");
/// assert_eq!(c.exp, 4600);
/// ```
pub fn jitsi<'a>(
    app_id: &'a str,
    domain: &'a str,
    room: &'a str,
    user: &'a User,
    moderator: bool,
    now: i64,
    ttl: i64,
) -> Jitsi<'a> {
    Jitsi {
        aud: "jitsi",
        context: JitsiContext { user },
        exp: now + ttl,
        iat: now,
        iss: app_id,
        moderator,
        nbf: now,
        room,
        sub: domain,
    }
}

/// What a LiveKit participant may do in its room.
#[derive(Clone, Copy, Debug)]
pub struct Grants {
    /// Publish audio/video.
    pub can_publish: bool,
    /// Subscribe to others.
    pub can_subscribe: bool,
}

/// A LiveKit access token's claims ([`livekit`]).
#[derive(Clone, Debug, Serialize)]
pub struct LiveKit<'a> {
    /// The audience, if any: LiveKit does not check it, verifiers here do
    /// (the signer sets it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aud: Option<&'a str>,
    /// Expiry, Unix seconds.
    pub exp: i64,
    /// The API key.
    pub iss: &'a str,
    /// Display name.
    pub name: &'a str,
    /// Not before.
    pub nbf: i64,
    /// The participant identity.
    pub sub: &'a str,
    /// The room grant.
    pub video: VideoGrant<'a>,
}

/// LiveKit's `video` grant.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VideoGrant<'a> {
    /// Publish audio/video.
    pub can_publish: bool,
    /// Subscribe to others.
    pub can_subscribe: bool,
    /// The room.
    pub room: &'a str,
    /// Moderates the room (`roomAdmin`); left out when false, so tokens
    /// without it are as before.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub room_admin: bool,
    /// Always true: the token admits to the room.
    pub room_join: bool,
}

/// A LiveKit access token's claims.
///
/// ```
/// let g = signing::presets::Grants { can_publish: true, can_subscribe: true };
/// let c = signing::presets::livekit("APIkey", "alice", "Alice", "standup", g, 1000, 600);
/// assert!(c.video.room_join);
/// assert_eq!(c.sub, "alice");
/// ```
pub fn livekit<'a>(
    api_key: &'a str,
    identity: &'a str,
    name: &'a str,
    room: &'a str,
    grants: Grants,
    now: i64,
    ttl: i64,
) -> LiveKit<'a> {
    LiveKit {
        aud: None,
        exp: now + ttl,
        iss: api_key,
        name,
        nbf: now,
        sub: identity,
        video: VideoGrant {
            can_publish: grants.can_publish,
            can_subscribe: grants.can_subscribe,
            room,
            room_admin: false,
            room_join: true,
        },
    }
}
