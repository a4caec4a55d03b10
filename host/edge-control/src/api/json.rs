//! Request bodies as JSON, with errors that name the field: `versions[1].percent:
//! invalid type: string "50", expected u8`.

use super::ApiError;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

/// Largest JSON body the API reads.
pub const MAX_JSON_BYTES: usize = 1 << 20;

/// A JSON request body of type `T`.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        // Read to this cap, not the node's upload cap: a body that cannot
        // be JSON the API takes is refused at its first megabyte (the
        // login endpoint reads bodies before any credential is checked).
        let bytes = axum::body::to_bytes(req.into_body(), MAX_JSON_BYTES)
            .await
            .map_err(|e| {
                let detail = format!("{e:?}");
                read_failed(
                    "the body",
                    &detail,
                    detail.contains("LengthLimitError"),
                    &format!("JSON bodies are at most {MAX_JSON_BYTES} bytes"),
                )
            })?;
        parse(&bytes).map(JsonBody)
    }
}

/// Why `what` ("the upload") could not be read: too large (`too_large`,
/// said as `limit`), too slow, or cut off. `detail` is the read error's
/// debug form.
pub fn read_failed(what: &str, detail: &str, too_large: bool, limit: &str) -> ApiError {
    if too_large || detail.contains("HttpRequestBodySize") {
        ApiError::too_large(None, limit)
    } else if detail.contains("Timeout") {
        ApiError::new(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            None,
            format!("{what} came too slowly ([server] body_read_timeout_ms, min_body_rate)"),
        )
    } else {
        ApiError::bad(None, format!("reading {what}: {detail}"))
    }
}

/// Parses `bytes` as `T`, naming the field that fails.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = (path != ".").then_some(path);
        ApiError::bad(field.as_deref(), e.into_inner().to_string())
    })
}

/// Like [`parse`], and an empty body is `T`'s default (for bodies that
/// may be left out, such as a rollback's).
pub fn parse_or_default<T: DeserializeOwned + Default>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        Ok(T::default())
    } else {
        parse(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct W {
        versions: Vec<crate::model::Weighted>,
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse::<W>(br#"{"versions":[{"version":1,"percent":"50"}]}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("versions[0].percent"));
        assert!(e.message.contains("expected u8"), "{}", e.message);
        let e = parse::<W>(br#"{"versionz":[]}"#).unwrap_err();
        assert!(
            e.message.contains("unknown field `versionz`"),
            "{}",
            e.message
        );
    }
}
