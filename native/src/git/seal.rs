//! The tail of a sealed git archive (FORMAT §1–§4, docs/git-sections.md), written by the
//! core so that `git import` runs without pyarrow and numpy: the data sub-index of the
//! packs (`objects.pack.<ordinal>`, stored whole), `__lookup__` (the same rows in path
//! order), `__trie__`, the three git sections, the sections the caller gives (already
//! encoded, in tail order: `__gunnar_refs__`, `__meta__`, …), the manifest and the footer.
//! Each sub-index and section starts on a multiple of 64, zero padding between; the
//! manifest records each one's BLAKE3. Plain (uncompressed) Arrow IPC streams, as
//! `write/tail.py` writes them by default (`ipcw.rs`).

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::index::{Fail, Indexed};
use super::layout::{self, Sections};
use super::pack::OID;
use super::signals::Ticker;
use crate::errors::{Error, Kind};
use crate::ipcw::{self, Column, Field, Kind as K, I64, I8, U32, U64};
use crate::tail::{LOOKUP, MAGIC, SECTION_BLAKE3, TRIE};

pub const GIT_OID: &str = "__gunnar_oid__";
pub const GIT_GRAPH: &str = "__gunnar_graph__";
pub const GIT_REACH: &str = "__gunnar_reach__";
const ALIGN: u64 = 64;
const RESERVED: i8 = -1;
const PACK_PREFIX: &str = "objects.pack.";
/// `git/sections.py` `ABSENT_KEY`: ids the commits and trees name that the archive lacks
const ABSENT_KEY: &str = "znippy.git.absent_objects";
const OID_MAGIC: &[u8; 8] = b"ZNGITOID";
const OID_VERSION: u32 = 2;
const FID: K = K::FixedSizeBinary(OID as i32);

/// One live pack of the blob region: its ordinal, extent and BLAKE3.
pub struct Live {
    pub ordinal: u32,
    pub offset: u64,
    pub size: u64,
    pub digest: [u8; 32],
}

/// A section the caller encoded: name, bytes, row count (0: raw).
pub type Given = (String, Vec<u8>, u64);

/// What the tail holds.
pub struct Sealed {
    pub file_size: u64,
    pub objects: u64,
    pub commits: u64,
}

fn field(name: &'static str, kind: K, nullable: bool) -> Field {
    Field {
        name,
        kind,
        nullable,
    }
}

fn le<T: Copy, const N: usize>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

/// The base columns (FORMAT §3) of the packs' rows, in the order of `rows`.
fn pack_rows(live: &[Live], rows: &[usize]) -> Vec<u8> {
    let fields = [
        field("relative_path", K::Utf8, false),
        field("chunk_seq", U32, false),
        field("fdata_offset", U64, false),
        field("compressed", K::Bool, false),
        field("uncompressed_size", U64, false),
        field("blob_offset", U64, false),
        field("blob_size", U64, false),
        field("checksum", K::FixedSizeBinary(32), false),
    ];
    let paths: Vec<String> = rows.iter().map(|&r| path_of(&live[r])).collect();
    let n = rows.len();
    let sizes = le(
        &rows.iter().map(|&r| live[r].size).collect::<Vec<_>>(),
        u64::to_le_bytes,
    );
    let at = le(
        &rows.iter().map(|&r| live[r].offset).collect::<Vec<_>>(),
        u64::to_le_bytes,
    );
    let sums: Vec<u8> = rows.iter().flat_map(|&r| live[r].digest).collect();
    let cols = [
        Column::strings(&paths),
        Column::fixed(vec![0u8; 4 * n], 4),
        Column::fixed(vec![0u8; 8 * n], 8),
        Column::bools(&vec![false; n]),
        Column::fixed(sizes.clone(), 8),
        Column::fixed(at, 8),
        Column::fixed(sizes, 8),
        Column::fixed(sums, 32),
    ];
    ipcw::stream(&fields, &[], &cols)
}

fn path_of(p: &Live) -> String {
    format!("{PACK_PREFIX}{}", p.ordinal)
}

/// `__gunnar_oid__` version 2 (`format/gitindex.py`): header, fanout, offsets, pack rows,
/// order, ids, types; the ids checked strictly ascending.
fn oid_section(s: &Sections) -> Result<Vec<u8>, String> {
    let n = s.types.len();
    let ids = &s.ids;
    for i in 1..n {
        if ids[OID * (i - 1)..OID * i] >= ids[OID * i..OID * (i + 1)] {
            return Err("object ids are not strictly ascending".into());
        }
    }
    if let Some(t) = s.types.iter().find(|t| !(1..=4).contains(*t)) {
        return Err(format!("unknown git object type {t}"));
    }
    let mut fanout = [0u32; 256];
    for i in 0..n {
        fanout[ids[OID * i] as usize] += 1;
    }
    let mut out = Vec::with_capacity(1056 + n * (17 + OID));
    out.extend_from_slice(OID_MAGIC);
    out.extend_from_slice(&OID_VERSION.to_le_bytes());
    out.extend_from_slice(&(OID as u32).to_le_bytes());
    out.extend_from_slice(&(n as u64).to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    let mut sum = 0u32;
    for f in fanout {
        sum += f;
        out.extend_from_slice(&sum.to_le_bytes());
    }
    out.extend(s.offsets.iter().flat_map(|v| v.to_le_bytes()));
    out.extend(s.pack_rows.iter().flat_map(|v| v.to_le_bytes()));
    out.extend(s.order.iter().flat_map(|v| v.to_le_bytes()));
    out.extend_from_slice(ids);
    out.extend_from_slice(&s.types);
    Ok(out)
}

/// `__gunnar_graph__`: one row per commit (`git/sections.py` read it as `GRAPH_SCHEMA`).
fn graph_section(s: &Sections) -> Vec<u8> {
    let fields = [
        field("oid", FID, false),
        field("parents", K::ListOfFixed(OID as i32), false),
        field("tree", FID, false),
        field("generation", U32, false),
        field("commit_time", I64, false),
        field("corrected_date", I64, false),
        field("position", U32, false),
        field("block", U32, false),
    ];
    let absent = s.absent.to_string();
    let cols = [
        Column::fixed(&s.commit_ids[..], OID),
        Column::list(
            le(&s.parent_offsets, i32::to_le_bytes),
            Column::fixed(&s.parent_ids[..], OID),
        ),
        Column::fixed(&s.tree_of[..], OID),
        Column::fixed(le(&s.generation, u32::to_le_bytes), 4),
        Column::fixed(le(&s.times, i64::to_le_bytes), 8),
        Column::fixed(le(&s.corrected, i64::to_le_bytes), 8),
        Column::fixed(le(&s.position, u32::to_le_bytes), 4),
        Column::fixed(le(&s.block, u32::to_le_bytes), 4),
    ];
    ipcw::stream(&fields, &[(ABSENT_KEY, &absent)], &cols)
}

/// `__gunnar_reach__`: one Roaring bitmap per stored commit.
fn reach_section(s: &Sections) -> Vec<u8> {
    let fields = [field("oid", FID, false), field("bitmap", K::Binary, false)];
    let cols = [
        Column::fixed(&s.reach_ids[..], OID),
        Column::var(le(&s.reach_offsets, i32::to_le_bytes), &s.reach_data[..]),
    ];
    ipcw::stream(&fields, &[], &cols)
}

/// `__gunnar_refs__` (`git/refs.py` `REFS_SCHEMA`), rows as given (`git/refs.py` orders
/// them: by name, then the shallow boundary's).
pub fn refs_stream(
    names: &[String],
    targets: &[Option<Vec<u8>>],
    peeled: &[Option<Vec<u8>>],
    symbolic: &[Option<String>],
) -> Result<Vec<u8>, String> {
    let n = names.len();
    if targets.len() != n || peeled.len() != n || symbolic.len() != n {
        return Err("the refs' columns do not line up".into());
    }
    let fields = [
        field("name", K::Utf8, false),
        field("target", FID, true),
        field("peeled", FID, true),
        field("symbolic", K::Utf8, true),
    ];
    let cols = [
        Column::strings(names),
        ids(targets)?,
        ids(peeled)?,
        texts(symbolic),
    ];
    Ok(ipcw::stream(&fields, &[], &cols))
}

/// Object ids or nulls as a nullable FixedSizeBinary(20) column.
fn ids(v: &[Option<Vec<u8>>]) -> Result<Column<'static>, String> {
    let mut raw = Vec::with_capacity(OID * v.len());
    for id in v {
        match id {
            None => raw.extend_from_slice(&[0; OID]),
            Some(b) if b.len() == OID => raw.extend_from_slice(b),
            Some(b) => return Err(format!("a ref names an id of {} bytes", b.len())),
        }
    }
    let valid: Vec<bool> = v.iter().map(Option::is_some).collect();
    Ok(Column::fixed(raw, OID).with_validity(&valid))
}

/// Strings or nulls as a nullable UTF-8 column.
fn texts(v: &[Option<String>]) -> Column<'static> {
    let valid: Vec<bool> = v.iter().map(Option::is_some).collect();
    let text: Vec<&str> = v.iter().map(|s| s.as_deref().unwrap_or("")).collect();
    Column::strings(&text).with_validity(&valid)
}

/// `__meta__` (`format/schema.py` `META_SCHEMA`), rows as given.
pub fn meta_stream(paths: &[Option<String>], keys: &[String], values: &[String]) -> Vec<u8> {
    let fields = [
        field("relative_path", K::Utf8, true),
        field("key", K::Utf8, false),
        field("value", K::Utf8, false),
    ];
    let cols = [texts(paths), Column::strings(keys), Column::strings(values)];
    ipcw::stream(&fields, &[], &cols)
}

/// The tail in memory, from the blob end on: each part at the next multiple of 64.
struct Out {
    start: u64,
    buf: Vec<u8>,
    rows: Vec<(i8, String, u64, u64, u64, [u8; 32])>,
}

impl Out {
    fn at(&self) -> u64 {
        self.start + self.buf.len() as u64
    }

    fn pad(&mut self) -> u64 {
        let at = self.at().div_ceil(ALIGN) * ALIGN;
        self.buf.resize((at - self.start) as usize, 0);
        at
    }

    fn put(&mut self, pkg_type: i8, name: &str, data: &[u8], rows: u64) {
        let at = self.pad();
        self.buf.extend_from_slice(data);
        let digest = *blake3::hash(data).as_bytes();
        self.rows.push((
            pkg_type,
            name.to_string(),
            at,
            data.len() as u64,
            rows,
            digest,
        ));
    }

    fn manifest(&self) -> Vec<u8> {
        let r = &self.rows;
        let fields = [
            field("pkg_type", I8, false),
            field("repo", K::Utf8, false),
            field("module_name", K::Utf8, false),
            field("index_offset", U64, false),
            field("index_len", U64, false),
            field("row_count", U64, false),
        ];
        let digests: Vec<String> = r
            .iter()
            .map(|x| x.5.iter().map(|b| format!("{b:02x}")).collect())
            .collect();
        let joined = digests.join(",");
        let names: Vec<&str> = r.iter().map(|x| x.1.as_str()).collect();
        let cols = [
            Column::fixed(r.iter().map(|x| x.0 as u8).collect::<Vec<u8>>(), 1),
            Column::strings(&vec![""; r.len()]),
            Column::strings(&names),
            Column::fixed(
                r.iter()
                    .flat_map(|x| x.2.to_le_bytes())
                    .collect::<Vec<u8>>(),
                8,
            ),
            Column::fixed(
                r.iter()
                    .flat_map(|x| x.3.to_le_bytes())
                    .collect::<Vec<u8>>(),
                8,
            ),
            Column::fixed(
                r.iter()
                    .flat_map(|x| x.4.to_le_bytes())
                    .collect::<Vec<u8>>(),
                8,
            ),
        ];
        let meta: Vec<(&str, &str)> = if r.is_empty() {
            vec![]
        } else {
            vec![(SECTION_BLAKE3, joined.as_str())]
        };
        ipcw::stream(&fields, &meta, &cols)
    }
}

/// The whole tail's bytes (from `blob_end`) and what it holds. `packs`: each live pack's
/// index (None: a seal without the git sections).
pub fn tail(
    blob_end: u64,
    live: &[Live],
    packs: Option<&[&Indexed]>,
    prefer: &[[u8; OID]],
    walk_bound: i64,
    given: &[Given],
    tick: &mut Ticker,
) -> Result<(Vec<u8>, Sealed), Fail> {
    let fail = |m: String| Fail::Pack(Error::new(Kind::Format, m));
    let mut out = Out {
        start: blob_end,
        buf: Vec::new(),
        rows: Vec::new(),
    };
    let n = live.len() as u64;
    if !live.is_empty() {
        let rows: Vec<usize> = (0..live.len()).collect();
        out.put(0, "", &pack_rows(live, &rows), n);
    }
    let paths: Vec<String> = live.iter().map(path_of).collect();
    let mut by_path: Vec<usize> = (0..live.len()).collect();
    by_path.sort_by(|&a, &b| paths[a].as_bytes().cmp(paths[b].as_bytes()));
    out.put(RESERVED, LOOKUP, &pack_rows(live, &by_path), n);
    let mut keys = Vec::new();
    let mut offsets = vec![0u8; 4];
    for &r in &by_path {
        keys.extend_from_slice(paths[r].as_bytes());
        offsets.extend_from_slice(&(keys.len() as i32).to_le_bytes());
    }
    let trie_rows: Vec<u8> = (0..n).flat_map(u64::to_le_bytes).collect();
    let trie = crate::create::tail::build(&keys, &offsets, &trie_rows).map_err(Fail::Pack)?;
    out.put(RESERVED, TRIE, &trie, 0);
    let (mut objects, mut commits) = (0, 0);
    if let Some(packs) = packs {
        let mut row_of = vec![0u32; live.len()];
        for (row, &r) in by_path.iter().enumerate() {
            row_of[r] = row as u32;
        }
        let refs: Vec<(&Indexed, u32)> = packs.iter().copied().zip(row_of).collect();
        let s = layout::build(&refs, prefer, walk_bound, tick)?;
        objects = s.types.len() as u64;
        commits = s.generation.len() as u64;
        out.put(RESERVED, GIT_OID, &oid_section(&s).map_err(fail)?, 0);
        out.put(RESERVED, GIT_GRAPH, &graph_section(&s), commits);
        let kept = (s.reach_ids.len() / OID) as u64;
        out.put(RESERVED, GIT_REACH, &reach_section(&s), kept);
    }
    for (name, data, rows) in given {
        if [LOOKUP, TRIE, GIT_OID, GIT_GRAPH, GIT_REACH].contains(&name.as_str()) {
            return Err(fail(format!(
                "section {name:?} is written by the seal itself"
            )));
        }
        out.put(RESERVED, name, data, *rows);
    }
    let manifest_at = out.pad();
    let manifest = out.manifest();
    out.buf.extend_from_slice(&manifest);
    out.buf.extend_from_slice(MAGIC);
    out.buf.extend_from_slice(&manifest_at.to_le_bytes());
    let file_size = out.at();
    Ok((
        out.buf,
        Sealed {
            file_size,
            objects,
            commits,
        },
    ))
}

/// The tail written into `file` after `blob_end`, the file cut there and flushed.
pub fn write(file: &File, blob_end: u64, tail: &[u8], path: &str) -> Result<(), Error> {
    let io = |e: std::io::Error| {
        Error::new(Kind::Io, format!("cannot write the tail: {e}")).at(path.to_string())
    };
    file.write_all_at(tail, blob_end).map_err(io)?;
    file.set_len(blob_end + tail.len() as u64).map_err(io)?;
    file.sync_all().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipc;

    #[test]
    fn an_empty_seal_has_a_lookup_a_trie_and_a_manifest_the_crate_reads() {
        let (raw, sealed) = tail(100, &[], None, &[], 0, &[], &mut Ticker::quiet())
            .unwrap_or_else(|_| panic!("an empty tail"));
        assert_eq!(sealed.file_size, 100 + raw.len() as u64);
        assert_eq!(&raw[raw.len() - 16..raw.len() - 8], MAGIC);
        let at = u64::from_le_bytes(raw[raw.len() - 8..].try_into().unwrap_or([0; 8]));
        assert_eq!(at % ALIGN, 0);
        let m = &raw[(at - 100) as usize..raw.len() - 16];
        let (schema, batches) = ipc::read_all(m).unwrap_or_else(|_| panic!("a manifest"));
        assert!(schema.meta(SECTION_BLAKE3).is_some());
        assert_eq!(batches[0][2].str(0), LOOKUP);
        assert_eq!(batches[0][2].str(1), TRIE);
    }

    #[test]
    fn refs_keep_their_order_and_nulls() {
        let raw = refs_stream(
            &["HEAD".into(), "refs/tags/b".into()],
            &[None, Some(vec![2; 20])],
            &[None, Some(vec![3; 20])],
            &[Some("refs/heads/main".into()), None],
        )
        .unwrap_or_default();
        let (_, batches) = ipc::read_all(&raw).unwrap_or_else(|_| panic!("a refs stream"));
        let c = &batches[0];
        assert_eq!((c[0].str(0), c[0].str(1)), ("HEAD", "refs/tags/b"));
        assert!(c[1].is_null(0) && c[2].is_null(0) && c[3].is_null(1));
        assert_eq!(
            (c[1].bytes(1), c[3].str(0)),
            (&[2u8; 20][..], "refs/heads/main")
        );
        assert!(refs_stream(&["x".into()], &[Some(vec![1; 3])], &[None], &[None]).is_err());
    }
}
