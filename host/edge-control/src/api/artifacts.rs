//! Uploaded components: checked (size within quota, a component exporting
//! an HTTP handler), compiled in the node's bounded worker, then stored by
//! digest and recorded for the tenant; all of it or none of it, for one
//! upload or for every component of a Spin app.

use super::{ApiError, Caller, Control};
use crate::blobs::Staged;
use crate::inspect;
use crate::store::TenantRow;
use axum::Json;
use axum::extract::{Path, State};
use bytes::Bytes;
use http::StatusCode;
use serde::Serialize;
use std::sync::Arc;

#[derive(Serialize)]
pub struct Artifact {
    digest: String,
    size: u64,
    imports: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    created_at: Option<i64>,
}

/// An upload that passed the cheap checks.
pub struct Checked {
    /// `sha256:HEX`.
    pub digest: String,
    /// What the component imports.
    pub imports: Vec<String>,
    /// The bytes.
    pub bytes: Bytes,
}

/// A checked upload and how messages name it.
pub struct Upload {
    /// The request field it came from, if any.
    pub field: Option<String>,
    /// "the component", "component \"api\" (target/api.wasm)".
    pub what: String,
    /// The upload.
    pub checked: Checked,
}

/// Size within the tenant's per-component quota, and a component that
/// serves HTTP. `what` names it in messages ("the component", "component
/// \"api\" (target/api.wasm)").
pub fn check(
    t: &TenantRow,
    bytes: Bytes,
    field: Option<&str>,
    what: &str,
) -> Result<Checked, ApiError> {
    let quota = &t.tenant.quota;
    if bytes.len() as u64 > quota.max_artifact_bytes {
        return Err(ApiError::too_large(
            field,
            format!(
                "{what} is {} bytes; this tenant's quota allows {} per component (max_artifact_bytes)",
                bytes.len(),
                quota.max_artifact_bytes
            ),
        ));
    }
    let inspected = inspect::inspect(&bytes).map_err(|e| {
        if what == "the component" {
            ApiError::invalid(field, e)
        } else {
            ApiError::invalid(field, format!("{what}: {e}"))
        }
    })?;
    Ok(Checked {
        digest: crate::blobs::digest(&bytes),
        imports: inspected.imports,
        bytes,
    })
}

/// Compiles and stores `items` for the tenant, if together with `files`
/// (a Spin app's) they fit its total quota; nothing is stored unless all
/// compile. The files are stored after the components.
pub async fn store(
    c: &Control,
    t: &TenantRow,
    items: &[Upload],
    files: &[super::archive::FileUpload],
) -> Result<(), ApiError> {
    let mut new_bytes = 0u64;
    let mut new: Vec<&Upload> = Vec::new();
    for item in items {
        let digest = &item.checked.digest;
        if new.iter().any(|n| n.checked.digest == *digest) {
            continue;
        }
        if c.db.artifact_imports(&t.id, digest).await?.is_none() {
            new_bytes += item.checked.bytes.len() as u64;
            new.push(item);
        }
    }
    let stored = {
        let digests: Vec<&str> = files.iter().map(|f| f.digest.as_str()).collect();
        c.db.file_sizes(&t.id, &digests).await?
    };
    let mut new_files = Vec::new();
    for f in files {
        if !stored.contains_key(&f.digest) {
            new_bytes += f.bytes.len() as u64;
            new_files.push(f);
        }
    }
    let quota = &t.tenant.quota;
    let used = c.db.artifact_bytes(&t.id).await?.max(0) as u64;
    if new_bytes > 0 && used + new_bytes > quota.max_total_artifact_bytes {
        return Err(ApiError::too_large(
            None,
            format!(
                "this tenant's components and files take {used} bytes; {new_bytes} more would pass its quota of {} (max_total_artifact_bytes)",
                quota.max_total_artifact_bytes
            ),
        ));
    }
    // Compile before storing: a component that does not compile is
    // refused and leaves nothing behind.
    let mut staged: Vec<(Staged, &Checked)> = Vec::new();
    for u in new {
        let s = c
            .blobs
            .stage(&u.checked.bytes)
            .map_err(ApiError::internal)?;
        c.node.compile(s.path()).await.map_err(|e| {
            ApiError::invalid(u.field.as_deref(), format!("compiling {}: {e}", u.what))
        })?;
        staged.push((s, &u.checked));
    }
    // Shared before it is stored: a component other nodes cannot pull is
    // not accepted.
    if let Some(registry) = &c.registry {
        for (_, item) in &staged {
            registry.push(&item.digest, &item.bytes).await.map_err(|e| {
                tracing::error!(error = %e, "control API: registry push failed");
                ApiError::new(StatusCode::BAD_GATEWAY, None, "the artifact registry did not take the component; nothing was stored (the operator's log has the detail)")
            })?;
        }
    }
    for (s, item) in staged {
        s.commit(&item.digest).map_err(ApiError::internal)?;
        c.db.add_artifact(&t.id, &item.digest, item.bytes.len() as i64, &item.imports)
            .await?;
    }
    let store = c.blobs.files();
    for f in new_files {
        if let Some(registry) = &c.registry {
            registry
                .push_file(&f.digest, &f.bytes)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "control API: registry push failed");
                    ApiError::new(StatusCode::BAD_GATEWAY, None, "the artifact registry did not take the app's files; the version was not made (the operator's log has the detail)")
                })?;
        }
        store.put(&f.bytes).map_err(ApiError::internal)?;
        c.db.add_file(&t.id, &f.digest, f.bytes.len() as i64)
            .await?;
    }
    Ok(())
}

pub async fn upload(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(tenant): Path<String>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<(StatusCode, Json<Artifact>), ApiError> {
    let mut tenant_id = None;
    let mut target = String::from("upload");
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let bytes = body.map_err(|e| read_failed(&e, c.max_upload_bytes))?;
        let upload = Upload {
            field: None,
            what: "the component".into(),
            checked: check(&t, bytes, None, "the component")?,
        };
        target = upload.checked.digest.clone();
        store(&c, &t, std::slice::from_ref(&upload), &[]).await?;
        let checked = upload.checked;
        Ok((
            StatusCode::CREATED,
            Json(Artifact {
                digest: checked.digest,
                size: checked.bytes.len() as u64,
                imports: checked.imports,
                created_at: None,
            }),
        ))
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "artifact.upload",
        &target,
        &result,
    )
    .await;
    result
}

/// Why an upload's body could not be read: too large, too slow, or cut.
pub fn read_failed(e: &axum::extract::rejection::BytesRejection, max: usize) -> ApiError {
    super::json::read_failed(
        "the upload",
        &format!("{e:?}"),
        e.status() == StatusCode::PAYLOAD_TOO_LARGE,
        &format!(
            "the upload is larger than this node accepts ({max} bytes, [control] max_upload_bytes)"
        ),
    )
}

pub async fn list(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> Result<Json<Vec<Artifact>>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let list = c.db.artifacts(&t.id).await?;
    Ok(Json(
        list.into_iter()
            .map(|(digest, size, imports, created_at)| Artifact {
                digest,
                size: size.max(0) as u64,
                imports,
                created_at: Some(created_at),
            })
            .collect(),
    ))
}
