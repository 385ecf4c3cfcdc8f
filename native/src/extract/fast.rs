//! The plan of `extract ARCHIVE -o DIR` read by the core without pyarrow (`cli/fast.py`):
//! the lookup's columns as `extract_files` takes them, from the archive's tail.

use super::*;

/// What [`extract_plan`] gives: the lookup's columns as [`extract_files`] takes them, the tail
/// offset, packed or not, each file's first row, the names joined and their offsets, and the
/// recorded directories.
pub(super) type Plan = (
    Vec<Py<PyBytes>>,
    u64,
    bool,
    Py<PyBytes>,
    Py<PyBytes>,
    Py<PyBytes>,
    Vec<String>,
);

/// [`plan`]'s answer, before the buffers become `bytes`.
pub(super) type Planned = (
    Vec<Vec<u8>>,
    u64,
    bool,
    Vec<u8>,
    Vec<u8>,
    Vec<u8>,
    Vec<String>,
);

/// The plan of `extract ARCHIVE -o DIR` read by the core without pyarrow (`cli/fast.py`):
/// every file, each under its own path. None for anything the Python extract must answer or
/// word: a failure reading the tail or the lookup, a section other than the lookup, the trie
/// and `__meta__`, a symbolic link, a path that is not plain or not in order.
pub(super) fn plan(archive: &str) -> Option<Planned> {
    use crate::ipc;
    use crate::lookup::{lookup_fields, lookup_problem, meta_schema, rows_problem, Rows};
    use crate::tail::{Tail, LOOKUP, META, TRIE};

    let tail = Tail::open(archive).ok()?;
    if tail
        .rows
        .iter()
        .any(|r| r.reserved() && ![LOOKUP, TRIE, META].contains(&r.module.as_str()))
    {
        return None;
    }
    let mut dirs = Vec::new();
    if let Some(row) = tail.section(META) {
        let bytes = tail.range(row, META).ok()?;
        let (schema, batches) = ipc::read_all(&bytes).ok()?;
        if !meta_schema(&schema) {
            return None;
        }
        for cols in &batches {
            if cols[1].null_count() + cols[2].null_count() > 0 {
                return None;
            }
            for i in 0..cols[0].len {
                let key = cols[1].bytes(i);
                if cols[0].is_null(i) {
                    continue; // a fact of the archive (created_at, source, ...)
                }
                if key == b"posix.symlink" {
                    return None;
                }
                let value = cols[2].str(i);
                let dir = key == b"posix.mode"
                    && value.starts_with('4')
                    && u32::from_str_radix(value, 8).is_ok_and(|m| m & 0o170000 == 0o040000);
                if dir {
                    dirs.push(cols[0].str(i).to_string());
                }
            }
        }
    }
    dirs.sort();
    let lrow = tail.section(LOOKUP)?;
    let bytes = tail.range(lrow, LOOKUP).ok()?;
    let stream = ipc::walk(&bytes).ok()?;
    let packed = lookup_fields(&stream.schema.fields)?;
    if stream.rows() != lrow.count {
        return None;
    }
    let mut parts = Vec::new();
    for b in &stream.batches {
        let cols = ipc::decode(&bytes, &stream.schema, b).ok()?;
        if rows_problem(&cols, tail.tail_offset).is_some() {
            return None;
        }
        parts.push(cols);
    }
    let rows = Rows::new(0, parts);
    if lookup_problem(&rows).is_some() {
        return None;
    }
    let n = rows.n;
    let mut cols: Vec<Vec<u8>> = (0..6).map(|_| Vec::with_capacity(8 * n)).collect();
    let (mut compressed, mut checksum) = (Vec::with_capacity(n), Vec::with_capacity(32 * n));
    let (mut offsets, mut data) = (vec![0u8; 8], Vec::new());
    let (mut firsts, mut names, mut name_offsets) = (Vec::new(), Vec::new(), vec![0u8; 8]);
    let mut last: Option<&[u8]> = None;
    for i in 0..n {
        let c = rows.chunk(i);
        let p = rows.path(i);
        for (col, v) in cols.iter_mut().zip([
            c.seq as u64,
            c.fdata_offset,
            c.size,
            c.blob_offset,
            c.blob_size,
            c.inner,
        ]) {
            col.extend(v.to_le_bytes());
        }
        compressed.push(c.compressed as u8);
        checksum.extend(c.checksum);
        data.extend(p);
        offsets.extend((data.len() as u64).to_le_bytes());
        if c.seq == 0 {
            if last.is_some_and(|l| l >= p) || !crate::verify::safe(p) {
                return None; // out of order, twice, or not plain: the Python extract says so
            }
            last = Some(p);
            firsts.extend((i as u64).to_le_bytes());
            names.extend(p);
            name_offsets.extend((names.len() as u64).to_le_bytes());
        }
    }
    cols.push(compressed);
    cols.push(checksum);
    cols.push(offsets);
    cols.push(data);
    Some((
        cols,
        tail.tail_offset,
        packed,
        firsts,
        names,
        name_offsets,
        dirs,
    ))
}

#[pyfunction]
pub(super) fn extract_plan(py: Python<'_>, archive: &str) -> Option<Plan> {
    let (cols, tail, packed, firsts, names, offsets, dirs) = py.detach(|| plan(archive))?;
    Some((
        cols.iter().map(|c| PyBytes::new(py, c).unbind()).collect(),
        tail,
        packed,
        PyBytes::new(py, &firsts).unbind(),
        PyBytes::new(py, &names).unbind(),
        PyBytes::new(py, &offsets).unbind(),
        dirs,
    ))
}
