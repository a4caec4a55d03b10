//! Errors as the API answers them: `{"error": {"field": ..., "message": ...}}`
//! (the control API's shape), with the status and, for a conflict, the
//! current row beside the error.

use serde_json::{Value, json};

/// An error answer.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// The request field at fault, if one is.
    pub field: Option<String>,
    /// What went wrong, for a person.
    pub message: String,
    /// Extra members of the answer beside `error` (409's `current`).
    pub extra: Option<Box<(String, Value)>>,
    /// Seconds for `Retry-After` (429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with a status, an optional field and a message.
    pub fn new(status: u16, field: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            status,
            field: field.map(str::to_string),
            message: message.into(),
            extra: None,
            retry_after: None,
        }
    }

    /// 400 naming a field.
    pub fn bad(field: &str, message: impl Into<String>) -> Self {
        Self::new(400, Some(field), message)
    }

    /// 400 without a field.
    pub fn malformed(message: impl Into<String>) -> Self {
        Self::new(400, None, message)
    }

    /// 401.
    pub fn unauthenticated() -> Self {
        Self::new(401, None, "log in first")
    }

    /// 403.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, None, message)
    }

    /// 404.
    pub fn not_found(what: &str) -> Self {
        Self::new(404, None, format!("no such {what}"))
    }

    /// 422 naming a field.
    pub fn refused(field: &str, message: impl Into<String>) -> Self {
        Self::new(422, Some(field), message)
    }

    /// 500 in fixed words (the detail goes to the log).
    pub fn internal() -> Self {
        Self::new(500, None, "the database failed; try again")
    }

    /// Adds a member beside `error`.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extra = Some(Box::new((key.to_string(), value)));
        self
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        let mut v = json!({"error": {"field": self.field, "message": self.message}});
        if let Some(e) = &self.extra {
            let (k, x) = e.as_ref();
            v[k.as_str()] = x.clone();
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape() {
        let e = ApiError::bad("sort", "no column x");
        assert_eq!(e.status, 400);
        assert_eq!(
            e.body(),
            json!({"error": {"field": "sort", "message": "no column x"}})
        );
        let e = ApiError::new(409, Some("version"), "changed").with("current", json!({"id": 1}));
        assert_eq!(e.body()["current"]["id"], 1);
        assert_eq!(
            ApiError::unauthenticated().body()["error"]["field"],
            Value::Null
        );
    }
}
