//! Every API error is `{"error": {"field": ..., "message": ...}}` with a
//! status that says whose fault it is. Database failures are logged with
//! their detail and answered in fixed words.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::json;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    /// The status.
    pub status: StatusCode,
    /// The request field it is about (a JSON path such as
    /// `components.web.digest`), if one.
    pub field: Option<String>,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl ApiError {
    /// An error of `status` about `field`.
    pub fn new(status: StatusCode, field: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            status,
            field: field.map(Into::into),
            message: message.into(),
        }
    }

    /// 400: the request itself is malformed.
    pub fn bad(field: Option<&str>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, field, message)
    }

    /// 422: well-formed, but not something that can be done.
    pub fn invalid(field: Option<&str>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, field, message)
    }

    /// 404: no such object, or not one the caller may know of.
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, None, what)
    }

    /// 409: the name or number is taken.
    pub fn conflict(field: Option<&str>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, field, message)
    }

    /// 413: over a size quota.
    pub fn too_large(field: Option<&str>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, field, message)
    }

    /// 403: the caller's role may not do this (only where the object's
    /// existence is no secret from it, such as operator-only endpoints).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, None, message)
    }

    /// 500 with fixed words; the detail goes to the log.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "control API: internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "internal error; the operator's log has the detail",
        )
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        match e {
            crate::store::StoreError::Conflict => {
                Self::conflict(None, "it exists already (or was created at the same time)")
            }
            e => Self::internal(e),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (
            self.status,
            Json(json!({"error": {"field": self.field, "message": self.message}})),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
        }
        r
    }
}
