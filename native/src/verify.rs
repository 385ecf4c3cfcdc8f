//! `znippy-sql verify ARCHIVE` of a local archive without pyarrow, for the archive that is
//! sound: every check of `read/verify.py` is made here (section digests, `__meta__`, every
//! sub-index, duplicate paths, the lookup against the sorted union of the data rows, extents,
//! chunks and paths, the trie, every blob decoded and its BLAKE3, the slices of packed blobs).
//! The core only proves an archive clean: at the first finding — or anything it does not
//! read (signatures, git sections, another writer's schemas or frames, bytes no slice
//! covers: a note) — it stops, and the Python verify answers and
//! words every finding, as before.

use pyo3::prelude::*;

use crate::frame::{self, Shape};
use crate::ipc;
use crate::lookup::{
    lookup_fields, lookup_problem, meta_schema, rows_problem, Chunk, Rows, INNER, MAX_CHUNK_BYTES,
};
use crate::ls::{group, union_ok};
use crate::tail::{ipc_stop, Out, Stop, Tail, LOOKUP, META, TRIE};
use crate::trie;

/// One data row: its path and its chunk.
type Rec = (Vec<u8>, Chunk);
/// The packed blob at hand: its offset, decoded bytes, where its slices reached, the last
/// slice (inner offset, size, checksum).
type Pack = Option<(u64, Vec<u8>, u64, Option<(u64, u64, [u8; 32])>)>;

fn finding<T>(what: impl Into<String>) -> Out<T> {
    Err(Stop::NotHere(what.into()))
}

/// `paths.check_relative_path` of a valid UTF-8 path (FORMAT §3, docs/format.md §8): not
/// empty, no NUL or control character, no backslash, not absolute, no drive letter, at most
/// 4096 bytes, no empty, `.` or `..` component, none over 255 bytes.
pub(crate) fn safe(p: &[u8]) -> bool {
    let drive = p.first().is_some_and(u8::is_ascii_alphabetic) && p.get(1) == Some(&b':');
    !p.is_empty()
        && !drive
        && !p.iter().any(|b| *b < 0x20 || *b == 0x7f || *b == b'\\')
        && p[0] != b'/'
        && p.len() <= 4096
        && p.split(|b| *b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b".." && c.len() <= 255)
}

fn records(rows: &Rows) -> Vec<Rec> {
    (0..rows.n)
        .map(|i| (rows.path(i).to_vec(), rows.chunk(i)))
        .collect()
}

/// What the sound archive holds: (files, chunks, bytes checked).
fn verify(archive: &str) -> Out<(u64, u64, u64)> {
    let tail = Tail::open(archive)?;
    if tail.rows.iter().any(|r| r.blake3.is_none()) {
        // without the section digests, bytes pyarrow's flatbuffer verifier refuses could
        // reach a reader that does not verify every field of every message: Python's call
        return finding("no section digests");
    }
    for r in tail.rows.iter().filter(|r| r.reserved()) {
        if ![LOOKUP, TRIE, META].contains(&r.module.as_str()) {
            return finding(format!("{}: a section the Python verify checks", r.module));
        }
        if r.module == TRIE && r.count != 0 {
            return finding("a raw section with a row count");
        }
    }
    for r in &tail.rows {
        tail.range(r, "section")?; // its digest
    }
    if let Some(r) = tail.section(META) {
        let bytes = tail.range(r, META)?;
        let (schema, batches) = ipc::read_all(&bytes).map_err(|p| ipc_stop(archive, META, p))?;
        if !meta_schema(&schema)
            || batches
                .iter()
                .any(|c| c[1].null_count() + c[2].null_count() > 0)
        {
            return finding(format!("{META} the Python verify words"));
        }
    }
    // the data rows, as build_lookup sorts them
    let mut schemas = Vec::new();
    let mut data: Vec<Rec> = Vec::new();
    for row in tail.groups() {
        let (schema, batches) = group(&tail, row)?;
        for cols in batches {
            let rows = Rows::new(0, vec![cols]);
            data.extend(records(&rows));
        }
        schemas.push(schema);
    }
    if !union_ok(&schemas) {
        return finding("module columns");
    }
    let inner = |s: &ipc::Schema| s.fields.get(8).is_some_and(|f| f.name == INNER.0);
    let packed = schemas.iter().any(inner);
    if packed && !schemas.iter().all(inner) {
        return finding("inner_offset in some sub-indexes only");
    }
    let mut firsts: Vec<&[u8]> = data
        .iter()
        .filter(|(_, c)| c.seq == 0)
        .map(|(p, _)| p.as_slice())
        .collect();
    firsts.sort();
    if firsts.windows(2).any(|w| w[0] == w[1]) {
        return finding("a path in the archive more than once");
    }
    data.sort_by(|a, b| (&a.0, a.1.seq).cmp(&(&b.0, b.1.seq)));
    // the lookup: read as the reader reads it, then equal to the data rows
    let lrow = tail
        .section(LOOKUP)
        .ok_or_else(|| Stop::NotHere("no lookup".into()))?;
    let bytes = tail.range(lrow, LOOKUP)?;
    let stream = ipc::walk(&bytes).map_err(|p| ipc_stop(archive, LOOKUP, p))?;
    if lookup_fields(&stream.schema.fields) != Some(packed) || stream.rows() != lrow.count {
        return finding(format!("{LOOKUP} of another schema or size"));
    }
    let mut parts = Vec::new();
    for b in &stream.batches {
        let cols =
            ipc::decode(&bytes, &stream.schema, b).map_err(|p| ipc_stop(archive, LOOKUP, p))?;
        if rows_problem(&cols, tail.tail_offset).is_some() {
            return finding(LOOKUP);
        }
        parts.push(cols);
    }
    let rows = Rows::new(0, parts);
    if lookup_problem(&rows).is_some() {
        return finding(LOOKUP);
    }
    let lk = records(&rows);
    if lk != data {
        return finding(format!("{LOOKUP} is not the sorted union of the data rows"));
    }
    extents(&tail, &lk, packed)?;
    for (i, (p, c)) in lk.iter().enumerate() {
        let first = i == 0 || lk[i - 1].0 != *p;
        if first && !safe(p) {
            return finding("an unsafe path");
        }
        let want = if first {
            (0, 0)
        } else {
            let q = &lk[i - 1].1;
            (q.seq as u64 + 1, q.fdata_offset + q.size)
        };
        if (c.seq as u64, c.fdata_offset) != want {
            return finding("chunks out of order");
        }
    }
    // the trie: each path to its first row, one key per path
    let trow = tail
        .section(TRIE)
        .ok_or_else(|| Stop::NotHere("no trie".into()))?;
    let tbytes = tail.range(trow, TRIE)?;
    if trie::fst_problem(&tbytes).is_some() {
        return finding(TRIE);
    }
    let mut distinct = 0u64;
    for (i, (p, c)) in lk.iter().enumerate() {
        if c.seq == 0 {
            distinct += 1;
            if trie::get(&tbytes, p).map_err(Stop::NotHere)? != Some(i as u64) {
                return finding(format!("{TRIE} maps a path wrongly"));
            }
        }
    }
    if trie::len(&tbytes).map_err(Stop::NotHere)? != distinct {
        return finding(format!("{TRIE} holds another number of keys"));
    }
    content(&tail, &lk, packed)
}

/// `verify._extents`: every blob inside the blob region; two extents the same blob of the
/// same content, or disjoint.
fn extents(tail: &Tail, lk: &[Rec], packed: bool) -> Out<()> {
    let mut spans: Vec<&Rec> = lk.iter().collect();
    spans.sort_by(|(pa, a), (pb, b)| {
        (
            a.blob_offset,
            a.blob_size,
            pa,
            a.seq,
            a.compressed,
            a.size,
            a.checksum,
        )
            .cmp(&(
                b.blob_offset,
                b.blob_size,
                pb,
                b.seq,
                b.compressed,
                b.size,
                b.checksum,
            ))
    });
    let mut prev: Option<&Chunk> = None;
    let mut prev_end = 0u64;
    for (_, c) in spans {
        if c.blob_offset + c.blob_size > tail.tail_offset {
            return finding("a blob past the blob region");
        }
        if let Some(p) = prev.filter(|p| {
            c.blob_size > 0 && (p.blob_offset, p.blob_size) == (c.blob_offset, c.blob_size)
        }) {
            if packed && c.compressed && c.compressed == p.compressed {
                continue; // slices of one packed blob: checked with the content
            }
            if (c.compressed, c.size, c.checksum) != (p.compressed, p.size, p.checksum) {
                return finding("a shared blob of another content");
            }
            continue;
        }
        if c.blob_size > 0 && c.blob_offset < prev_end {
            return finding("overlapping blobs");
        }
        if c.blob_size > 0 && c.blob_offset + c.blob_size > prev_end {
            prev_end = c.blob_offset + c.blob_size;
            prev = Some(c);
        }
    }
    Ok(())
}

/// Every chunk decoded and checked (a packed blob once, its slices in order, covering it).
fn content(tail: &Tail, lk: &[Rec], packed: bool) -> Out<(u64, u64, u64)> {
    let mut order: Vec<&Rec> = lk.iter().collect();
    if packed {
        order.sort_by_key(|(_, c)| (c.blob_offset, c.inner, c.size, c.checksum));
    }
    let (mut files, mut chunks, mut bytes) = (0u64, 0u64, 0u64);
    let mut pack: Pack = None;
    let close = |pack: &Pack| match pack {
        Some((_, d, end, _)) if *end != d.len() as u64 => finding("bytes no slice covers"),
        _ => Ok(()),
    };
    for (_, c) in order {
        let head = || tail.read(c.blob_offset, c.blob_size.min(64), "blob");
        let data: Vec<u8> = if !c.compressed {
            tail.read(c.blob_offset, c.blob_size, "blob")?
        } else if packed {
            if pack.as_ref().is_none_or(|p| p.0 != c.blob_offset) {
                close(&pack)?;
                let n = frame::declared(&head()?).ok_or_else(|| Stop::NotHere("frame".into()))?;
                let blob = tail.read(c.blob_offset, c.blob_size, "blob")?;
                pack = Some((c.blob_offset, decode(&blob, n)?, 0, None));
            }
            let (_, d, end, last) = pack.as_mut().expect("set above");
            let (lo, hi) = (c.inner, c.inner + c.size);
            if hi > d.len() as u64 {
                return finding("a slice outside its decoded blob");
            }
            if lo < *end {
                if *last != Some((lo, c.size, c.checksum)) {
                    return finding("slices overlapping partially");
                }
            } else if lo > *end {
                return finding("bytes no slice covers");
            } else {
                *end = hi;
                *last = Some((lo, c.size, c.checksum));
            }
            d[lo as usize..hi as usize].to_vec()
        } else {
            let blob = tail.read(c.blob_offset, c.blob_size, "blob")?;
            decode(&blob, c.size)?
        };
        if *blake3::hash(&data).as_bytes() != c.checksum {
            return finding("a BLAKE3 mismatch");
        }
        bytes += data.len() as u64;
        chunks += 1;
        files += (c.seq == 0) as u64;
    }
    close(&pack)?;
    Ok((files, chunks, bytes))
}

/// A frame of our shapes decoded whole to `n` bytes; another frame is the Python verify's.
fn decode(blob: &[u8], n: u64) -> Out<Vec<u8>> {
    if n > MAX_CHUNK_BYTES {
        return finding("a blob over the chunk limit");
    }
    let head = &blob[..blob.len().min(64)];
    let shape: Shape = frame::parse(head, blob.len(), n)
        .ok_or_else(|| Stop::NotHere("another frame shape".into()))?;
    frame::decode(blob, shape, n, n).map_err(Stop::NotHere)
}

/// `(files, chunks, bytes checked)` of a sound archive, or None when the Python verify must
/// answer (a finding, or what the core does not read).
#[pyfunction]
pub fn verify_clean(py: Python<'_>, archive: &str) -> PyResult<Option<(u64, u64, u64)>> {
    match py.detach(|| verify(archive)) {
        Ok(counts) => Ok(Some(counts)),
        Err(Stop::NotHere(_)) => Ok(None),
        Err(Stop::Fail(e)) => Err(e.into()),
    }
}

/// Why the core left `verify` of `archive` to the Python verify (None: it did not); for tests.
#[pyfunction]
pub fn _verify_left_because(py: Python<'_>, archive: &str) -> Option<String> {
    match py.detach(|| verify(archive)) {
        Ok(_) => None,
        Err(Stop::NotHere(why)) => Some(why),
        Err(Stop::Fail(e)) => Some(e.to_string()),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(verify_clean, m)?)?;
    m.add_function(wrap_pyfunction!(_verify_left_because, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_rules_of_paths_py() {
        for ok in [
            "a",
            "a/b.txt",
            "ünï/名前.txt",
            "a..b/c",
            ".hidden/x",
            "ab:c",
        ] {
            assert!(safe(ok.as_bytes()), "{ok}");
        }
        let long = "x".repeat(256);
        for bad in [
            "", "/a", "a//b", "a/./b", "../a", "a/..", "C:x", "x:", "a\\b", "a\u{7f}", "a\nb",
            "a/", &long,
        ] {
            assert!(!safe(bad.as_bytes()), "{bad:?}");
        }
    }
}
