//! Config errors that point at the file, line, column and key at fault.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A config problem, located as precisely as the input allows.
///
/// Displayed as `FILE:LINE:COL: KEY: MESSAGE` (the position and key are left
/// out when unknown), the form editors and CI logs link to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file at fault.
    pub file: PathBuf,
    /// 1-based line and column, when the fault has a position.
    pub position: Option<(usize, usize)>,
    /// The dotted key path, when the fault is in a value.
    pub key: Option<String>,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl std::error::Error for ConfigError {}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// One loaded TOML file: its path and text, for turning byte spans into
/// line/column positions.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Where the text came from.
    pub path: PathBuf,
    /// The text.
    pub text: String,
}

impl SourceFile {
    /// Reads a file, naming it in the error when it cannot be read.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            position: None,
            key: None,
            message: format!("cannot read file: {e}"),
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            text,
        })
    }

    /// An error at a byte span of this file.
    pub fn error(
        &self,
        span: Option<Range<usize>>,
        key: impl Into<Option<String>>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: self.path.clone(),
            position: span.map(|s| self.line_col(s.start)),
            key: key.into(),
            message: message.into(),
        }
    }

    /// Converts a TOML parse or schema error into a located error.
    pub fn toml_error(&self, err: &toml::de::Error) -> ConfigError {
        // toml's message can span lines (it quotes the source); the first
        // line is the reason, the position is carried separately.
        let message = err.message().trim().to_string();
        self.error(err.span(), None, message)
    }

    fn line_col(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        let file = SourceFile {
            path: "x.toml".into(),
            text: "a = 1\nbb = 2\n".into(),
        };
        let err = file.error(Some(6..8), Some("bb".to_string()), "bad");
        assert_eq!(err.to_string(), "x.toml:2:1: bb: bad");
    }
}
