//! The index container: named sections in one byte blob, read in place.
//!
//! The blob is what the component embeds in its data segment. Reading it
//! never copies: sections are borrowed slices, integer arrays are read with
//! `from_le_bytes` (so the blob needs no alignment), and the FSTs are built
//! over borrowed bytes. Layout:
//!
//! ```text
//! magic (8 bytes) | section count (u32) | count × (tag [4], offset u32, length u32) | sections…
//! ```

use crate::IndexError;

/// Collects sections and writes the blob.
#[derive(Default)]
pub struct BlobWriter {
    sections: Vec<([u8; 4], Vec<u8>)>,
}

impl BlobWriter {
    /// Adds a raw section.
    pub fn add(&mut self, tag: &[u8; 4], bytes: Vec<u8>) {
        self.sections.push((*tag, bytes));
    }

    /// Adds an array of `u32`s (little-endian).
    pub fn add_u32s(&mut self, tag: &[u8; 4], values: &[u32]) {
        let mut bytes = Vec::with_capacity(values.len() * 4);
        for v in values {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        self.add(tag, bytes);
    }

    /// Adds an array of `f32`s (little-endian).
    pub fn add_f32s(&mut self, tag: &[u8; 4], values: &[f32]) {
        let bits: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
        self.add_u32s(tag, &bits);
    }

    /// Adds a string table (see [`Strs`]).
    pub fn add_strs(&mut self, tag: &[u8; 4], table: &StrTableBuilder) {
        self.add_u32s(&[tag[0], tag[1], tag[2], b'o'], &table.offsets);
        self.add(&[tag[0], tag[1], tag[2], b'b'], table.bytes.clone());
    }

    /// The finished blob.
    pub fn finish(self, magic: &[u8; 8]) -> Vec<u8> {
        let header = 8 + 4 + self.sections.len() * 12;
        let mut offset = align8(header);
        let mut dir = Vec::new();
        for (tag, bytes) in &self.sections {
            dir.push((*tag, offset as u32, bytes.len() as u32));
            offset = align8(offset + bytes.len());
        }
        let mut out = Vec::with_capacity(offset);
        out.extend_from_slice(magic);
        out.extend_from_slice(&(self.sections.len() as u32).to_le_bytes());
        for (tag, off, len) in &dir {
            out.extend_from_slice(tag);
            out.extend_from_slice(&off.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
        }
        for ((_, bytes), (_, off, _)) in self.sections.iter().zip(&dir) {
            out.resize(*off as usize, 0);
            out.extend_from_slice(bytes);
        }
        out
    }
}

fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// A parsed blob: the directory of sections over borrowed bytes.
pub struct Blob<'a> {
    data: &'a [u8],
    dir: Vec<([u8; 4], usize, usize)>,
}

impl<'a> Blob<'a> {
    /// Checks the magic and the directory; every section must lie inside.
    pub fn parse(data: &'a [u8], magic: &[u8; 8]) -> Result<Self, IndexError> {
        if data.len() < 12 || &data[..8] != magic {
            return Err(IndexError::Format(format!(
                "not a {} index (magic {:?} expected)",
                String::from_utf8_lossy(&magic[..]),
                String::from_utf8_lossy(magic)
            )));
        }
        let count = read_u32(data, 8) as usize;
        let mut dir = Vec::with_capacity(count);
        for i in 0..count {
            let at = 12 + i * 12;
            if at + 12 > data.len() {
                return Err(IndexError::Format("section directory truncated".into()));
            }
            let tag: [u8; 4] = data[at..at + 4].try_into().expect("4 bytes");
            let off = read_u32(data, at + 4) as usize;
            let len = read_u32(data, at + 8) as usize;
            if off.checked_add(len).is_none_or(|end| end > data.len()) {
                return Err(IndexError::Format(format!(
                    "section {} lies outside the blob",
                    String::from_utf8_lossy(&tag)
                )));
            }
            dir.push((tag, off, len));
        }
        Ok(Self { data, dir })
    }

    /// A raw section.
    pub fn section(&self, tag: &[u8; 4]) -> Result<&'a [u8], IndexError> {
        self.dir
            .iter()
            .find(|(t, _, _)| t == tag)
            .map(|&(_, off, len)| &self.data[off..off + len])
            .ok_or_else(|| {
                IndexError::Format(format!("section {} missing", String::from_utf8_lossy(tag)))
            })
    }

    /// A `u32` array section.
    pub fn u32s(&self, tag: &[u8; 4]) -> Result<U32s<'a>, IndexError> {
        let bytes = self.section(tag)?;
        if bytes.len() % 4 != 0 {
            return Err(IndexError::Format(format!(
                "section {} is not an array of u32",
                String::from_utf8_lossy(tag)
            )));
        }
        Ok(U32s(bytes))
    }

    /// A string table written by [`BlobWriter::add_strs`].
    pub fn strs(&self, tag: &[u8; 4]) -> Result<Strs<'a>, IndexError> {
        let offsets = self.u32s(&[tag[0], tag[1], tag[2], b'o'])?;
        let bytes = self.section(&[tag[0], tag[1], tag[2], b'b'])?;
        if offsets.is_empty() || offsets.get(offsets.len() - 1) as usize != bytes.len() {
            return Err(IndexError::Format(format!(
                "string table {} is inconsistent",
                String::from_utf8_lossy(&tag[..3])
            )));
        }
        // Strings are checked when read, not here: opening must not touch
        // every page of a blob that instances share copy-on-write.
        Ok(Strs { offsets, bytes })
    }
}

fn read_u32(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"))
}

/// A borrowed little-endian `u32` array.
#[derive(Clone, Copy)]
pub struct U32s<'a>(&'a [u8]);

impl<'a> U32s<'a> {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.0.len() / 4
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `i`-th value; panics past the end like a slice.
    #[inline]
    pub fn get(&self, i: usize) -> u32 {
        read_u32(self.0, i * 4)
    }

    /// The `i`-th value as `f32`.
    #[inline]
    pub fn f32(&self, i: usize) -> f32 {
        f32::from_bits(self.get(i))
    }

    /// Values `start..end`.
    pub fn range(&self, start: usize, end: usize) -> impl Iterator<Item = u32> + 'a {
        let bytes = self.0;
        (start..end).map(move |i| read_u32(bytes, i * 4))
    }
}

/// A string table: `offsets[i]..offsets[i + 1]` of one UTF-8 byte run.
#[derive(Clone, Copy)]
pub struct Strs<'a> {
    offsets: U32s<'a>,
    bytes: &'a [u8],
}

impl<'a> Strs<'a> {
    /// The `i`-th string; one that is not UTF-8 or out of range (only in a
    /// corrupt blob) reads as "".
    pub fn get(&self, i: u32) -> &'a str {
        std::str::from_utf8(self.bytes(i)).unwrap_or("")
    }

    /// The `i`-th string's bytes, unchecked (for matching, where a
    /// corrupt blob can only mismatch); empty if out of range.
    #[inline]
    pub fn bytes(&self, i: u32) -> &'a [u8] {
        if i as usize >= self.len() {
            return b"";
        }
        let (start, end) = (
            self.offsets.get(i as usize) as usize,
            self.offsets.get(i as usize + 1) as usize,
        );
        self.bytes.get(start..end).unwrap_or(b"")
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Builds a string table, interning repeated strings.
pub struct StrTableBuilder {
    offsets: Vec<u32>,
    bytes: Vec<u8>,
    ids: std::collections::HashMap<String, u32>,
}

impl Default for StrTableBuilder {
    fn default() -> Self {
        let mut t = Self {
            offsets: vec![0],
            bytes: Vec::new(),
            ids: Default::default(),
        };
        t.intern(""); // id 0 is the empty string: "absent"
        t
    }
}

impl StrTableBuilder {
    /// The id of `s`, adding it the first time.
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = (self.offsets.len() - 1) as u32;
        self.bytes.extend_from_slice(s.as_bytes());
        self.offsets.push(self.bytes.len() as u32);
        self.ids.insert(s.to_owned(), id);
        id
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there are none (never: "" is always there).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut w = BlobWriter::default();
        w.add_u32s(b"nums", &[1, 2, 0xdead_beef]);
        w.add_f32s(b"flts", &[1.5, -2.0]);
        let mut t = StrTableBuilder::default();
        let a = t.intern("москва");
        let b = t.intern("riga");
        assert_eq!(t.intern("москва"), a);
        w.add_strs(b"nam_", &t);
        let bytes = w.finish(b"TESTBLOB");
        let blob = Blob::parse(&bytes, b"TESTBLOB").unwrap();
        let nums = blob.u32s(b"nums").unwrap();
        assert_eq!(
            nums.range(0, 3).collect::<Vec<_>>(),
            vec![1, 2, 0xdead_beef]
        );
        assert_eq!(blob.u32s(b"flts").unwrap().f32(1), -2.0);
        let strs = blob.strs(b"nam_").unwrap();
        assert_eq!(
            (strs.get(a), strs.get(b), strs.get(0)),
            ("москва", "riga", "")
        );
        assert!(Blob::parse(&bytes, b"OTHERBLB").is_err());
        assert!(blob.section(b"none").is_err());
    }

    #[test]
    fn truncated_blob_is_refused() {
        let mut w = BlobWriter::default();
        w.add_u32s(b"nums", &[1, 2, 3]);
        let bytes = w.finish(b"TESTBLOB");
        assert!(Blob::parse(&bytes[..bytes.len() - 4], b"TESTBLOB").is_err());
    }
}
