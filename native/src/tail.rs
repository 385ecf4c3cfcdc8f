//! One local archive's tail: the footer, the manifest and its section digests, and checked
//! byte ranges (FORMAT §1-§2, docs/format.md §1-§3), read with `pread` (no memory map, so no
//! `unsafe`: a point read touches a few ranges only).
//!
//! Every check of `format/manifest.py` is made. What this reader does not take — no footer,
//! the Rust tool's layout (no `__lookup__`/`__trie__`, or its writer's version in the
//! sub-index metadata), an IPC shape `ipc.rs` does not decode — is [`Stop::NotHere`]: the
//! Python reader answers it (and words its errors).

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::errors::{Error, Kind};
use crate::ipc::{self, Problem, Type};

/// Why the fast path stops: a failure to report, or a shape the Python reader must take.
#[derive(Debug)]
pub enum Stop {
    Fail(Error),
    NotHere(String),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Fail(e)
    }
}

pub type Out<T> = Result<T, Stop>;

pub const MAGIC: &[u8; 8] = b"ZNPYMIDX";
pub const LOOKUP: &str = "__lookup__";
pub const TRIE: &str = "__trie__";
pub const META: &str = "__meta__";
pub const SECTION_BLAKE3: &str = "znippy.section_blake3";
/// The Rust tool's writer version key (`read/foreign.py`): such an archive is not ours.
pub const RUST_VERSION_KEY: &str = "znippy_format_version";

/// One manifest row.
#[derive(Debug, Clone)]
pub struct Row {
    pub pkg_type: i8,
    pub repo: String,
    pub module: String,
    pub offset: u64,
    pub len: u64,
    pub count: u64,
    pub blake3: Option<[u8; 32]>,
}

impl Row {
    pub fn reserved(&self) -> bool {
        self.pkg_type == -1
    }
}

/// An open archive: its file, size, manifest rows and the start of its tail.
pub struct Tail {
    pub path: String,
    file: File,
    pub size: u64,
    pub rows: Vec<Row>,
    pub tail_offset: u64,
}

/// `problem` as a `FormatError` of `path`.
pub fn format_error(path: &str, problem: impl Into<String>) -> Stop {
    Stop::Fail(Error::new(Kind::Format, problem).at(path))
}

/// An IPC problem of section `what` as a stop.
pub fn ipc_stop(path: &str, what: &str, p: Problem) -> Stop {
    match p {
        Problem::Bad(m) => format_error(path, format!("{what}: {m}")),
        Problem::Unsupported(m) => Stop::NotHere(format!("{what}: {m}")),
    }
}

fn is_reserved(name: &str) -> bool {
    name.len() >= 4 && name.starts_with("__") && name.ends_with("__")
}

impl Tail {
    pub fn open(path: &str) -> Out<Tail> {
        let io = |e: std::io::Error| Stop::Fail(Error::new(Kind::Io, e.to_string()).at(path));
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(Stop::NotHere("not a regular file".into()));
        }
        let size = meta.len();
        let mut tail = Tail {
            path: path.to_string(),
            file,
            size,
            rows: Vec::new(),
            tail_offset: 0,
        };
        if size < 16 {
            return Err(Stop::NotHere("too short for a footer".into()));
        }
        let footer = tail.read(size - 16, 16, "footer")?;
        if &footer[..8] != MAGIC {
            return Err(Stop::NotHere("no ZNPYMIDX footer".into())); // unsealed, or not ours
        }
        let manifest_offset = u64::from_le_bytes(footer[8..16].try_into().unwrap_or([0; 8]));
        if manifest_offset >= size - 16 {
            return Err(format_error(
                path,
                format!("manifest offset {manifest_offset} is outside the file"),
            ));
        }
        tail.rows = tail.manifest(manifest_offset)?;
        tail.tail_offset = tail
            .rows
            .iter()
            .map(|r| r.offset)
            .min()
            .unwrap_or(manifest_offset);
        let (lookup, trie) = (tail.section(LOOKUP).is_some(), tail.section(TRIE).is_some());
        if !(lookup && trie) {
            return Err(Stop::NotHere(
                "no __lookup__ and __trie__ (the Rust layout)".into(),
            ));
        }
        if tail.rows.iter().any(|r| r.blake3.is_none()) && tail.rust_writer()? {
            return Err(Stop::NotHere("written by the Rust tool".into()));
        }
        Ok(tail)
    }

    /// `len` bytes at `offset`, checked against the file's size first.
    pub fn read(&self, offset: u64, len: u64, what: &str) -> Out<Vec<u8>> {
        if offset.checked_add(len).is_none_or(|e| e > self.size) {
            return Err(format_error(
                &self.path,
                format!("{what} [{offset}, +{len}) runs past the end of the file"),
            ));
        }
        let mut buf = vec![0u8; len as usize];
        self.file.read_exact_at(&mut buf, offset).map_err(|e| {
            Stop::Fail(Error::new(Kind::Io, format!("{what}: {e}")).at(self.path.clone()))
        })?;
        Ok(buf)
    }

    pub fn section(&self, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.reserved() && r.module == name)
    }

    /// A row's bytes, checked against the BLAKE3 the manifest records for them.
    pub fn range(&self, row: &Row, what: &str) -> Out<Vec<u8>> {
        let buf = self.read(row.offset, row.len, what)?;
        if let Some(want) = row.blake3 {
            if *blake3::hash(&buf).as_bytes() != want {
                return Err(format_error(
                    &self.path,
                    format!(
                        "{what}: its bytes do not match the BLAKE3 the manifest records (damaged)"
                    ),
                ));
            }
        }
        Ok(buf)
    }

    fn manifest(&self, offset: u64) -> Out<Vec<Row>> {
        let path = self.path.as_str();
        let buf = self.read(offset, self.size - 16 - offset, "manifest")?;
        let (schema, batches) = ipc::read_all(&buf).map_err(|p| ipc_stop(path, "manifest", p))?;
        let want = [
            (
                "pkg_type",
                Type::Int {
                    bits: 8,
                    signed: true,
                },
            ),
            ("repo", Type::Utf8),
            ("module_name", Type::Utf8),
            (
                "index_offset",
                Type::Int {
                    bits: 64,
                    signed: false,
                },
            ),
            (
                "index_len",
                Type::Int {
                    bits: 64,
                    signed: false,
                },
            ),
            (
                "row_count",
                Type::Int {
                    bits: 64,
                    signed: false,
                },
            ),
        ];
        let exact = schema.fields.len() == want.len()
            && schema
                .fields
                .iter()
                .zip(want)
                .all(|(f, (n, t))| f.name == n && f.ty == t && !f.nullable);
        if !exact {
            return Err(format_error(path, "manifest: not the manifest schema"));
        }
        let mut rows = Vec::new();
        for cols in &batches {
            for i in 0..cols[0].len {
                rows.push(Row {
                    pkg_type: cols[0].int8(i),
                    repo: cols[1].str(i).to_string(),
                    module: cols[2].str(i).to_string(),
                    offset: cols[3].uint(i),
                    len: cols[4].uint(i),
                    count: cols[5].uint(i),
                    blake3: None,
                });
            }
        }
        if let Some(text) = schema.meta(SECTION_BLAKE3) {
            let parts: Vec<&str> = if text.is_empty() {
                Vec::new()
            } else {
                text.split(',').collect()
            };
            let ok = parts.len() == rows.len()
                && parts
                    .iter()
                    .all(|p| p.len() == 64 && p.bytes().all(|b| b"0123456789abcdef".contains(&b)));
            if !ok {
                return Err(format_error(
                    path,
                    format!("manifest: {SECTION_BLAKE3} does not hold one BLAKE3 per row"),
                ));
            }
            for (row, hex) in rows.iter_mut().zip(parts) {
                let mut d = [0u8; 32];
                for (k, byte) in d.iter_mut().enumerate() {
                    *byte = u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).unwrap_or(0);
                }
                row.blake3 = Some(d);
            }
        }
        let mut order: Vec<&Row> = rows.iter().collect();
        order.sort_by_key(|r| r.offset);
        let mut prev_end: Option<u64> = None;
        let mut seen = std::collections::HashSet::new();
        for r in order {
            let what = "manifest row";
            if !seen.insert((r.pkg_type, r.repo.as_str(), r.module.as_str())) {
                return Err(format_error(path, format!("{what}: group listed twice")));
            }
            let end = r.offset.checked_add(r.len);
            if end.is_none_or(|e| e > offset) {
                return Err(format_error(
                    path,
                    format!("{what}: range ends past the manifest start"),
                ));
            }
            if prev_end.is_some_and(|p| r.offset < p) {
                return Err(format_error(
                    path,
                    format!("{what}: range overlaps the previous section"),
                ));
            }
            prev_end = end;
            let reserved = is_reserved(&r.module);
            if reserved != (r.pkg_type == -1)
                || (!reserved && r.pkg_type < 0)
                || (reserved && !r.repo.is_empty())
            {
                return Err(format_error(
                    path,
                    format!("{what}: pkg_type does not match its name"),
                ));
            }
        }
        Ok(rows)
    }

    /// The data groups in `GroupKey` order.
    pub fn groups(&self) -> Vec<&Row> {
        let mut g: Vec<&Row> = self.rows.iter().filter(|r| !r.reserved()).collect();
        g.sort_by(|a, b| {
            (a.pkg_type, a.repo.as_bytes(), a.module.as_bytes()).cmp(&(
                b.pkg_type,
                b.repo.as_bytes(),
                b.module.as_bytes(),
            ))
        });
        g
    }

    /// Whether the first data sub-index names the Rust writer's version (`foreign.writer`).
    fn rust_writer(&self) -> Out<bool> {
        let Some(first) = self.groups().into_iter().next() else {
            return Ok(false);
        };
        let buf = self.read(first.offset, first.len, "sub-index")?;
        match ipc::walk(&buf) {
            Ok(s) => Ok(s.schema.meta(RUST_VERSION_KEY).is_some()),
            Err(_) => Err(Stop::NotHere(
                "a sub-index this reader does not walk".into(),
            )),
        }
    }
}
