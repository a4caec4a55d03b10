//! The hint engine: real-time, typo-tolerant suggestions for addresses
//! ([`address`]) and person names ([`names`]).
//!
//! Indexes are built ahead of time by `edge hints build` from JSON Lines and
//! read in place from one byte blob ([`blob`]): the `hints` component embeds
//! the blobs in its data segment, so every instance shares the same
//! copy-on-write pages and opening an index costs microseconds.
//!
//! Pure Rust, no WASI types: the same code runs natively in the builder, in
//! tests and in the component.

pub mod address;
pub mod blob;
mod fstnode;
pub mod fuzzy;
pub mod json;
pub mod layout;
pub mod levenshtein;
pub mod names;
pub mod recent;
pub mod restrict;
pub mod slips;
pub mod text;
mod topk;
pub mod translit;

/// Why an index could not be built or opened.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The builder's input is wrong (the message names the line).
    #[error("{0}")]
    Input(String),
    /// The blob is not a usable index.
    #[error("corrupt index: {0}")]
    Format(String),
}

/// The records of a JSON Lines input with their line numbers, blank lines
/// skipped; an unreadable or malformed line is an error naming it.
pub(crate) fn json_lines<T: serde::de::DeserializeOwned>(
    input: impl std::io::BufRead,
) -> impl Iterator<Item = Result<(usize, T), IndexError>> {
    input.lines().enumerate().filter_map(|(n, line)| {
        let line_no = n + 1;
        let parsed = line
            .map_err(|e| e.to_string())
            .and_then(|l| match l.trim() {
                "" => Ok(None),
                text => serde_json::from_str(text)
                    .map(Some)
                    .map_err(|e| e.to_string()),
            });
        match parsed {
            Ok(None) => None,
            Ok(Some(record)) => Some(Ok((line_no, record))),
            Err(e) => Some(Err(IndexError::Input(format!("line {line_no}: {e}")))),
        }
    })
}
