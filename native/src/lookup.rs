//! A file's chunks: `__trie__` gives its first `__lookup__` row, the lookup (or the record
//! batches of it that hold the file) gives its rows, checked as `read/reader.py` checks them
//! (`Archive._file_at`, `_Batches.file_at`, `validate.rows_problem`/`lookup_problem`).

use crate::ipc::{self, Column, Stream, Type};
use crate::tail::{format_error, ipc_stop, Out, Stop, Tail, LOOKUP, TRIE};
use crate::trie;

/// A compressed chunk may declare at most this (`validate.MAX_CHUNK_BYTES`).
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;
const MAX_TOTAL: u64 = 1 << 62;
/// The base columns, then `inner_offset` in an archive with packed blobs (FORMAT §3).
pub const BASE: [(&str, Type); 8] = [
    ("relative_path", Type::Utf8),
    (
        "chunk_seq",
        Type::Int {
            bits: 32,
            signed: false,
        },
    ),
    (
        "fdata_offset",
        Type::Int {
            bits: 64,
            signed: false,
        },
    ),
    ("compressed", Type::Bool),
    (
        "uncompressed_size",
        Type::Int {
            bits: 64,
            signed: false,
        },
    ),
    (
        "blob_offset",
        Type::Int {
            bits: 64,
            signed: false,
        },
    ),
    (
        "blob_size",
        Type::Int {
            bits: 64,
            signed: false,
        },
    ),
    ("checksum", Type::FixedSizeBinary(32)),
];
pub const INNER: (&str, Type) = (
    "inner_offset",
    Type::Int {
        bits: 64,
        signed: false,
    },
);
/// `Some(packed)` when `fields` are the lookup's (the base columns, then `inner_offset` in an
/// archive with packed blobs; none nullable), else None.
pub fn lookup_fields(fields: &[ipc::Field]) -> Option<bool> {
    let packed = fields.len() == 9;
    let exact = (fields.len() == 8 || packed)
        && fields
            .iter()
            .zip(BASE.iter().chain([&INNER]))
            .all(|(f, (n, t))| f.name == *n && f.ty == *t && !f.nullable);
    exact.then_some(packed)
}

/// Whether `schema` is `__meta__`'s: `relative_path`, `key`, `value`, all utf8.
pub fn meta_schema(schema: &ipc::Schema) -> bool {
    let names = ["relative_path", "key", "value"];
    schema.fields.len() == 3
        && schema
            .fields
            .iter()
            .zip(names)
            .all(|(f, n)| f.name == n && f.ty == Type::Utf8)
}

/// `reader._Batches.SPAN`: a file whose rows run over more batches reads the whole lookup.
const SPAN: usize = 4;
/// `reader._Batches.PROMOTE`: after this many batch decodes the whole lookup is read.
const PROMOTE: usize = 16;

/// One lookup row: a chunk of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub seq: u32,
    pub fdata_offset: u64,
    pub compressed: bool,
    pub size: u64,
    pub blob_offset: u64,
    pub blob_size: u64,
    pub checksum: [u8; 32],
    pub inner: u64,
}

/// Decoded lookup rows `[base, base + n)`: consecutive record batches.
pub struct Rows {
    base: usize,
    parts: Vec<Vec<Column>>,
    /// first row (relative to base) of each part
    starts: Vec<usize>,
    pub n: usize,
}

impl Rows {
    pub fn new(base: usize, parts: Vec<Vec<Column>>) -> Rows {
        let mut starts = Vec::with_capacity(parts.len());
        let mut n = 0;
        for p in &parts {
            starts.push(n);
            n += p[0].len;
        }
        Rows {
            base,
            parts,
            starts,
            n,
        }
    }

    /// (columns, index inside them) of relative row `i`
    fn at(&self, i: usize) -> (&[Column], usize) {
        let k = self.starts.partition_point(|s| *s <= i) - 1;
        (&self.parts[k], i - self.starts[k])
    }

    pub fn path(&self, i: usize) -> &[u8] {
        let (c, j) = self.at(i);
        c[0].bytes(j)
    }

    fn seq(&self, i: usize) -> u64 {
        let (c, j) = self.at(i);
        c[1].uint(j)
    }

    pub fn chunk(&self, i: usize) -> Chunk {
        let (c, j) = self.at(i);
        let mut checksum = [0u8; 32];
        checksum.copy_from_slice(c[7].bytes(j));
        Chunk {
            seq: c[1].uint(j) as u32,
            fdata_offset: c[2].uint(j),
            compressed: c[3].bool(j),
            size: c[4].uint(j),
            blob_offset: c[5].uint(j),
            blob_size: c[6].uint(j),
            checksum,
            inner: c.get(8).map_or(0, |col| col.uint(j)),
        }
    }

    /// The next row after `i` that starts a file (chunk_seq 0), or `n`.
    fn run_end(&self, i: usize) -> usize {
        (i + 1..self.n)
            .find(|r| self.seq(*r) == 0)
            .unwrap_or(self.n)
    }
}

/// `validate.rows_problem` of one batch's columns.
pub fn rows_problem(c: &[Column], tail: u64) -> Option<String> {
    let (mut usz_sum, mut size_sum) = (0u128, 0u128);
    for i in 0..c[0].len {
        let (fdo, comp, usz) = (c[2].uint(i), c[3].bool(i), c[4].uint(i));
        let (off, size) = (c[5].uint(i), c[6].uint(i));
        if size > tail || off > tail - size.min(tail) {
            return Some(format!(
                "has a blob that runs past the blob region into the index tail at {tail}"
            ));
        }
        if comp && usz > MAX_CHUNK_BYTES {
            return Some("has a compressed chunk whose size exceeds the chunk limit".into());
        }
        if !comp && usz != size {
            return Some("has a raw chunk whose blob_size is not its uncompressed_size".into());
        }
        if let Some(inner) = c.get(8).map(|col| col.uint(i)) {
            if inner > 0 && !comp {
                return Some("has a raw chunk with a non-zero inner_offset".into());
            }
            if inner > MAX_CHUNK_BYTES || inner + usz > MAX_CHUNK_BYTES {
                return Some("has a slice past the limit of a decoded blob".into());
            }
        }
        if fdo >= MAX_TOTAL {
            return Some("has sizes or offsets too large to add up".into());
        }
        usz_sum += usz as u128;
        size_sum += size as u128;
    }
    if usz_sum >= MAX_TOTAL as u128 || size_sum >= MAX_TOTAL as u128 {
        return Some("has sizes or offsets too large to add up".into());
    }
    None
}

/// `validate.lookup_problem` of the whole lookup.
pub fn lookup_problem(r: &Rows) -> Option<String> {
    for i in 0..r.n {
        let c = r.chunk(i);
        let same = i > 0 && r.path(i - 1) == r.path(i);
        if i > 0 && !same && r.path(i - 1) > r.path(i) {
            return Some("is not sorted by path".into());
        }
        if same {
            let p = r.chunk(i - 1);
            if c.seq as u64 != p.seq as u64 + 1 || c.fdata_offset != p.fdata_offset + p.size {
                return Some("holds a file whose chunks are not contiguous".into());
            }
            if c.size == 0 || p.size == 0 {
                return Some("has an empty chunk in a file of several chunks".into());
            }
        } else if c.seq != 0 || c.fdata_offset != 0 {
            return Some("holds a file whose first chunk is not chunk 0 at 0".into());
        }
    }
    None
}

/// Python's `repr()` of a path (paths hold no control characters nor backslashes: §8).
pub fn py_repr(s: &str) -> String {
    if s.contains('\'') && !s.contains('"') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\'', "\\'"))
    }
}

/// The trie and the lookup of one archive, read once for every path asked.
pub struct Finder<'t> {
    tail: &'t Tail,
    trie: Vec<u8>,
    bytes: Vec<u8>,
    stream: Stream,
    starts: Vec<usize>,
    whole: Option<Rows>,
    /// batches decoded for point reads so far
    decoded: std::cell::Cell<usize>,
    /// whether the lookup has `inner_offset` (packed blobs)
    pub packed: bool,
}

impl<'t> Finder<'t> {
    pub fn new(tail: &'t Tail) -> Out<Finder<'t>> {
        let path = tail.path.as_str();
        let (Some(trie_row), Some(lookup_row)) = (tail.section(TRIE), tail.section(LOOKUP)) else {
            return Err(Stop::NotHere("no trie and lookup".into()));
        };
        let trie = tail.range(trie_row, TRIE)?;
        if let Some(p) = trie::fst_problem(&trie) {
            return Err(format_error(path, format!("{TRIE} {p}")));
        }
        let bytes = tail.range(lookup_row, LOOKUP)?;
        let stream = ipc::walk(&bytes).map_err(|p| ipc_stop(path, LOOKUP, p))?;
        let Some(packed) = lookup_fields(&stream.schema.fields) else {
            return Err(Stop::NotHere(format!("{LOOKUP} of another schema")));
        };
        if stream.rows() != lookup_row.count {
            return Err(format_error(
                path,
                format!("{LOOKUP}'s batches do not hold the rows the manifest says"),
            ));
        }
        let mut starts = Vec::with_capacity(stream.batches.len());
        let mut n = 0usize;
        for b in &stream.batches {
            starts.push(n);
            n += b.rows as usize;
        }
        Ok(Finder {
            tail,
            trie,
            bytes,
            stream,
            starts,
            whole: None,
            decoded: std::cell::Cell::new(0),
            packed,
        })
    }

    fn decode(&self, b: usize) -> Out<Vec<Column>> {
        self.decoded.set(self.decoded.get() + 1);
        let path = self.tail.path.as_str();
        let cols = ipc::decode(&self.bytes, &self.stream.schema, &self.stream.batches[b])
            .map_err(|p| ipc_stop(path, LOOKUP, p))?;
        if let Some(p) = rows_problem(&cols, self.tail.tail_offset) {
            return Err(format_error(path, format!("{LOOKUP} {p}")));
        }
        Ok(cols)
    }

    fn whole(&mut self) -> Out<&Rows> {
        if self.whole.is_none() {
            let parts = (0..self.stream.batches.len())
                .map(|b| self.decode(b))
                .collect::<Out<Vec<_>>>()?;
            let rows = Rows::new(0, parts);
            if let Some(p) = lookup_problem(&rows) {
                return Err(format_error(&self.tail.path, format!("{LOOKUP} {p}")));
            }
            self.whole = Some(rows);
        }
        Ok(self.whole.as_ref().expect("set above"))
    }

    /// The chunks of `name`, or None when the archive has no such file.
    pub fn find(&mut self, name: &str) -> Out<Option<Vec<Chunk>>> {
        let path = self.tail.path.clone();
        let key = name.as_bytes();
        let row =
            trie::get(&self.trie, key).map_err(|p| format_error(&path, format!("{TRIE} {p}")))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let row = usize::try_from(row).unwrap_or(usize::MAX);
        let batches = self.stream.batches.len();
        if batches > 1 && self.whole.is_none() && self.decoded.get() < PROMOTE {
            let b = self.starts.partition_point(|s| *s <= row).saturating_sub(1);
            if row < self.starts[b] + self.stream.batches[b].rows as usize {
                let lo = if row == self.starts[b] && b > 0 {
                    b - 1
                } else {
                    b
                };
                let mut parts = vec![self.decode(lo)?];
                let mut hi = lo;
                while hi < b {
                    hi += 1;
                    parts.push(self.decode(hi)?);
                }
                loop {
                    let rows = Rows::new(self.starts[lo], parts);
                    if rows.run_end(row - rows.base) < rows.n || hi + 1 == batches {
                        return file_at(&rows, &path, name, row).map(Some);
                    }
                    if hi - lo + 1 >= SPAN {
                        break;
                    }
                    hi += 1;
                    parts = rows.parts;
                    parts.push(self.decode(hi)?);
                }
            }
        }
        let rows = self.whole()?;
        file_at(rows, &path, name, row).map(Some)
    }
}

/// `Archive._file_at`: the chunks of `name` from lookup row `row` on, each checked.
fn file_at(c: &Rows, archive: &str, name: &str, row: usize) -> Out<Vec<Chunk>> {
    let key = name.as_bytes();
    let quoted = py_repr(name);
    let r = row.wrapping_sub(c.base);
    if row < c.base || r >= c.n {
        return Err(format_error(
            archive,
            format!("{TRIE} points {quoted} at row {row}, past the lookup"),
        ));
    }
    if c.seq(r) != 0 {
        return Err(format_error(
            archive,
            format!("{TRIE} points {quoted} at row {r}, not a first chunk"),
        ));
    }
    if r > 0 && c.path(r - 1) == key {
        return Err(format_error(
            archive,
            format!("{quoted}: lookup row {} before its first chunk belongs to it too (chunks out of order)", r - 1),
        ));
    }
    let mut end = c.run_end(r);
    while end < c.n && c.path(end) == key {
        end = c.run_end(end);
    }
    if (r..end).any(|i| c.path(i) != key) {
        return Err(format_error(
            archive,
            format!("{TRIE} points {quoted} at rows of another file"),
        ));
    }
    let mut chunks = Vec::with_capacity(end - r);
    let mut offset = 0u64;
    for i in r..end {
        let ch = c.chunk(i);
        if ch.seq as usize != i - r || ch.fdata_offset != offset {
            return Err(format_error(
                archive,
                format!(
                    "{quoted}: chunk {} at {}, expected chunk {} at {offset}",
                    ch.seq,
                    ch.fdata_offset,
                    i - r
                ),
            ));
        }
        if ch.size == 0 && end - r > 1 {
            return Err(format_error(
                archive,
                format!("{quoted}: chunk {} of {} is empty", ch.seq, end - r),
            ));
        }
        offset += ch.size;
        chunks.push(ch);
    }
    Ok(chunks)
}
