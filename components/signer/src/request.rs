//! `POST /tokens` bodies, checked field by field.

use serde::Deserialize;
use signing::presets::User;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    room: Option<String>,
    user: Option<RawUser>,
    moderator: Option<bool>,
    can_publish: Option<bool>,
    can_subscribe: Option<bool>,
    ttl: Option<i64>,
    kid: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUser {
    id: Option<String>,
    name: Option<String>,
    email: Option<String>,
    avatar: Option<String>,
}

/// A checked token request.
pub struct TokenRequest {
    pub room: String,
    pub user: User,
    pub moderator: Option<bool>,
    pub can_publish: Option<bool>,
    pub can_subscribe: Option<bool>,
    pub ttl: Option<i64>,
    pub kid: Option<String>,
}

/// A refusal: the field and why.
pub type FieldError = (&'static str, String);

fn text(field: &'static str, v: Option<String>, max: usize) -> Result<String, FieldError> {
    let v = v.ok_or((field, format!("{field} is required")))?;
    if v.trim().is_empty() {
        return Err((field, format!("{field} is empty")));
    }
    if v.chars().count() > max {
        return Err((field, format!("{field} is longer than {max} characters")));
    }
    if v.chars().any(char::is_control) {
        return Err((field, format!("{field} contains control characters")));
    }
    Ok(v)
}

impl TokenRequest {
    /// Parses and checks a body; `max_ttl` bounds `ttl`.
    pub fn parse(body: &[u8], max_ttl: i64) -> Result<Self, FieldError> {
        let raw: Raw = serde_json::from_slice(body).map_err(|e| {
            (
                "body",
                format!("not a token request: {e} (fields: room, user {{id, name, email, avatar}}, moderator, can_publish, can_subscribe, ttl, kid)"),
            )
        })?;
        let room = text("room", raw.room, 128)?;
        if room != "*"
            && !room
                .chars()
                .all(|c| c.is_alphanumeric() || "-_.".contains(c))
        {
            return Err((
                "room",
                "room may hold letters, digits, '-', '_' and '.', or be \"*\" (every room)".into(),
            ));
        }
        let u = raw.user.ok_or(("user", "user is required".to_string()))?;
        let user = User {
            id: text("user.id", u.id, 128)?,
            name: text("user.name", u.name, 256)?,
            email: match u.email {
                None => None,
                Some(e) => {
                    let e = text("user.email", Some(e), 254)?;
                    if !e.contains('@') {
                        return Err(("user.email", "user.email is not an e-mail address".into()));
                    }
                    Some(e)
                }
            },
            avatar: match u.avatar {
                None => None,
                Some(a) => {
                    let a = text("user.avatar", Some(a), 2048)?;
                    if !a.starts_with("https://") {
                        return Err(("user.avatar", "user.avatar must be an https:// URL".into()));
                    }
                    Some(a)
                }
            },
        };
        if let Some(t) = raw.ttl
            && !(1..=max_ttl).contains(&t)
        {
            return Err((
                "ttl",
                format!("ttl is {t}; allowed: 1 to {max_ttl} seconds"),
            ));
        }
        Ok(Self {
            room,
            user,
            moderator: raw.moderator,
            can_publish: raw.can_publish,
            can_subscribe: raw.can_subscribe,
            ttl: raw.ttl,
            kid: raw.kid,
        })
    }
}
