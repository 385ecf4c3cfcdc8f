//! `znippy-sql info ARCHIVE` of a local archive without pyarrow (issue 33, item 6): the facts
//! `cli/core.py` `archive_info` gathers — the manifest, each data group's files, chunks,
//! bytes and stored shares (`views/shares.py`, the rule of docs/format.md "Stored sizes"),
//! the codec metadata, the blob bytes referenced and distinct, the packed blobs
//! (`cli/core.py` `pack_info`) and the end of the blob region — read here; Python
//! (`cli/infotext.py`) derives and prints the rest, for both paths. What this core does not
//! read (git sections, another writer's layout or schemas, a lookup it cannot decode or finds
//! damaged) is left to the Python path, which answers and words it as before.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::ipc::{self, Column, Schema};
use crate::lookup::{lookup_fields, lookup_problem, rows_problem, Rows, INNER};
use crate::ls::{group, union_ok};
use crate::tail::{ipc_stop, Out, Stop, Tail, LOOKUP, META, TRIE};

/// Reserved sections info reads nothing of beyond their names (the signatures' are
/// `provenance/` names: `__sign_artifacts__`, `__sign_archive__`).
const PLAIN_SECTIONS: [&str; 5] = [LOOKUP, TRIE, META, "__sign_artifacts__", "__sign_archive__"];

/// One data row as the share rule reads it.
struct Slot<'a> {
    group: usize,
    path: &'a [u8],
    seq: u64,
    off: u64,
    size: u64,
    comp: bool,
    inner: u64,
    usize: u64,
}

/// One data group's totals: files, compressed chunks, bytes, stored bytes.
#[derive(Default, Clone)]
struct Totals {
    files: u64,
    compressed: u64,
    bytes: u64,
    stored: u64,
}

/// Each data row's share of its blob (`shares.row_shares`), summed per group into `out`.
fn shares(rows: &[Slot<'_>], out: &mut [Totals]) -> Out<()> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    let key = |i: usize| {
        let r = &rows[i];
        (r.off, r.size, r.comp, r.inner, r.usize)
    };
    order.sort_by_key(|i| key(*i)); // stable: ties keep row order, as np.lexsort
    let hostile = || Stop::NotHere("share products beyond 128 bits".into());
    let mut b = 0;
    while b < order.len() {
        let blob = |i: usize| (rows[i].off, rows[i].size, rows[i].comp);
        let mut e = b + 1;
        while e < order.len() && blob(order[e]) == blob(order[b]) {
            e += 1;
        }
        // the blob's slices: runs of (inner, usize), each with the rows pointing at it
        let mut slices: Vec<(usize, usize)> = Vec::new();
        let mut s = b;
        while s < e {
            let mut t = s + 1;
            while t < e && key(order[t]) == key(order[s]) {
                t += 1;
            }
            slices.push((s, t));
            s = t;
        }
        let empty = slices.iter().all(|(s, _)| rows[order[*s]].usize == 0);
        let weight = |s: usize| {
            if empty {
                1u128
            } else {
                rows[order[s]].usize as u128
            }
        };
        let total: u128 = slices.iter().map(|(s, _)| weight(*s)).sum();
        let big = rows[order[b]].size as u128;
        let mut running = 0u128;
        for (s, t) in slices {
            let before = big.checked_mul(running).ok_or_else(hostile)? / total;
            running += weight(s);
            let share = big.checked_mul(running).ok_or_else(hostile)? / total - before;
            // charged to the first row in path order (then chunk_seq, then row order)
            let owner = order[s..t]
                .iter()
                .min_by_key(|i| (rows[**i].path, rows[**i].seq, **i))
                .copied()
                .unwrap_or(order[s]);
            let g = &mut out[rows[owner].group];
            g.stored = g.stored.wrapping_add(share as u64);
        }
        b = e;
    }
    Ok(())
}

/// `pack_info` of the lookup's rows: (packs, packed files, pack stored bytes, pack bytes,
/// member stored bytes).
fn packs(lk: &Rows, packed: bool) -> (u64, u64, u64, u64, u64) {
    if !packed || lk.n == 0 {
        return (0, 0, 0, 0, 0);
    }
    let chunks: Vec<_> = (0..lk.n).map(|i| lk.chunk(i)).collect();
    let mut offsets: Vec<u64> = chunks
        .iter()
        .filter(|c| c.compressed && c.inner > 0)
        .map(|c| c.blob_offset)
        .collect();
    offsets.sort_unstable();
    offsets.dedup();
    let mut files = 0u64;
    let mut member_stored = 0u64;
    // per pack: (its last stored size in row order, its greatest slice end)
    let mut per: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
    for c in chunks.iter().filter(|c| c.compressed) {
        if offsets.binary_search(&c.blob_offset).is_err() {
            continue;
        }
        files += 1;
        member_stored = member_stored.wrapping_add(c.blob_size);
        let end = c.inner.wrapping_add(c.size);
        let slot = per.entry(c.blob_offset).or_insert((0, 0));
        *slot = (c.blob_size, slot.1.max(end));
    }
    let stored = per.values().fold(0u64, |a, v| a.wrapping_add(v.0));
    let bytes = per.values().fold(0u64, |a, v| a.wrapping_add(v.1));
    (offsets.len() as u64, files, stored, bytes, member_stored)
}

/// The lookup, read and checked as `Tail.read_lookup` checks it; anything else is Python's.
fn lookup(tail: &Tail) -> Out<(Rows, bool)> {
    let lrow = tail
        .section(LOOKUP)
        .ok_or_else(|| Stop::NotHere("no lookup".into()))?;
    let bytes = tail.range(lrow, LOOKUP)?;
    let stream = ipc::walk(&bytes).map_err(|p| ipc_stop(&tail.path, LOOKUP, p))?;
    let packed = lookup_fields(&stream.schema.fields);
    if packed.is_none() || stream.rows() != lrow.count {
        return Err(Stop::NotHere(format!("{LOOKUP} of another schema or size")));
    }
    let packed = packed == Some(true);
    let mut parts = Vec::new();
    for b in &stream.batches {
        let cols =
            ipc::decode(&bytes, &stream.schema, b).map_err(|p| ipc_stop(&tail.path, LOOKUP, p))?;
        if rows_problem(&cols, tail.tail_offset).is_some() {
            return Err(Stop::NotHere(format!(
                "{LOOKUP}: the Python reader words it"
            )));
        }
        parts.push(cols);
    }
    let rows = Rows::new(0, parts);
    if lookup_problem(&rows).is_some() {
        return Err(Stop::NotHere(format!(
            "{LOOKUP}: the Python reader words it"
        )));
    }
    Ok((rows, packed))
}

/// Everything `info` prints that the archive's bytes decide.
struct Facts {
    tail: Tail,
    groups: Vec<Totals>,
    codec: Vec<(String, String)>,
    referenced: u64,
    distinct: u64,
    packs: (u64, u64, u64, u64, u64),
    blob_end: u64,
}

fn facts(archive: &str) -> Out<Facts> {
    let tail = Tail::open(archive)?;
    for r in tail.rows.iter().filter(|r| r.reserved()) {
        if !PLAIN_SECTIONS.contains(&r.module.as_str()) {
            return Err(Stop::NotHere(format!("{}: a section info reads", r.module)));
        }
    }
    let mut read: Vec<(Schema, Vec<Vec<Column>>)> = Vec::new();
    for row in tail.groups() {
        read.push(group(&tail, row)?);
    }
    if !union_ok(&read.iter().map(|(s, _)| s.clone()).collect::<Vec<_>>()) {
        return Err(Stop::NotHere(
            "module columns the Python reader words".into(),
        ));
    }
    let codec = read
        .iter()
        .map(|(s, _)| &s.metadata)
        .find(|m| !m.is_empty())
        .cloned()
        .unwrap_or_default();
    let mut totals = vec![Totals::default(); read.len()];
    let mut slots: Vec<Slot<'_>> = Vec::new();
    let (mut referenced, mut distinct) = (0u64, 0u64);
    let mut seen = std::collections::HashSet::new();
    for (g, (schema, batches)) in read.iter().enumerate() {
        let inner = schema.fields.iter().position(|f| f.name == INNER.0);
        for c in batches {
            for i in 0..c[0].len {
                let (seq, size) = (c[1].uint(i), c[6].uint(i));
                let t = &mut totals[g];
                t.files += (seq == 0) as u64;
                t.compressed += c[3].bool(i) as u64;
                t.bytes = t.bytes.wrapping_add(c[4].uint(i));
                referenced = referenced.wrapping_add(size);
                if size > 0 && seen.insert(c[5].uint(i)) {
                    distinct = distinct.wrapping_add(size); // a shared blob counted once
                }
                slots.push(Slot {
                    group: g,
                    path: c[0].bytes(i),
                    seq,
                    off: c[5].uint(i),
                    size,
                    comp: c[3].bool(i),
                    inner: inner.map_or(0, |k| c[k].uint(i)),
                    usize: c[4].uint(i),
                });
            }
        }
    }
    shares(&slots, &mut totals)?;
    drop(slots);
    let (lk, packed) = lookup(&tail)?;
    let mut blob_end = 0u64;
    for i in 0..lk.n {
        let c = lk.chunk(i);
        let end = c
            .blob_offset
            .checked_add(c.blob_size)
            .ok_or_else(|| Stop::NotHere("a blob range overflows 64 bits".into()))?;
        blob_end = blob_end.max(end);
    }
    let packs = packs(&lk, packed);
    drop(read);
    Ok(Facts {
        tail,
        groups: totals,
        codec,
        referenced,
        distinct,
        packs,
        blob_end,
    })
}

/// The facts of `info ARCHIVE` as a dict (`cli/infotext.py` `summary` takes them), or None
/// when the Python path must answer.
#[pyfunction]
pub fn info_facts<'py>(py: Python<'py>, archive: &str) -> PyResult<Option<Bound<'py, PyDict>>> {
    let f = match py.detach(|| facts(archive)) {
        Ok(f) => f,
        Err(Stop::NotHere(_)) => return Ok(None),
        Err(Stop::Fail(e)) => return Err(e.into()),
    };
    let d = PyDict::new(py);
    d.set_item("archive_bytes", f.tail.size)?;
    d.set_item("tail_offset", f.tail.tail_offset)?;
    d.set_item("blob_end", f.blob_end)?;
    let groups = PyList::empty(py);
    for (row, t) in f.tail.groups().into_iter().zip(&f.groups) {
        groups.append((
            row.pkg_type,
            row.repo.as_str(),
            row.module.as_str(),
            t.files,
            row.count,
            t.compressed,
            t.bytes,
            t.stored,
        ))?;
    }
    d.set_item("groups", groups)?;
    let manifest = PyList::empty(py);
    for r in &f.tail.rows {
        manifest.append((
            r.pkg_type,
            r.repo.as_str(),
            r.module.as_str(),
            r.offset,
            r.len,
            r.count,
        ))?;
    }
    d.set_item("manifest", manifest)?;
    d.set_item("codec", f.codec)?;
    d.set_item("referenced", f.referenced)?;
    d.set_item("distinct", f.distinct)?;
    d.set_item("packs", f.packs)?;
    Ok(Some(d))
}

/// Why the core left `info` of `archive` to the Python path (None: it did not); for tests.
#[pyfunction]
pub fn _info_left_because(py: Python<'_>, archive: &str) -> Option<String> {
    match py.detach(|| facts(archive)) {
        Ok(_) => None,
        Err(Stop::NotHere(why)) => Some(why),
        Err(Stop::Fail(e)) => Some(format!("{e:?}")),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(info_facts, m)?)?;
    m.add_function(wrap_pyfunction!(_info_left_because, m)?)?;
    Ok(())
}
