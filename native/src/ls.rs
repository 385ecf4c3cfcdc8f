//! `znippy-sql ls ARCHIVE [PATH...]` of a local archive without pyarrow: the paths of the
//! files of every data sub-index (their `chunk_seq = 0` rows, as the `files` view lists
//! them), each sub-index read and checked as `Archive.group_table` checks it, sorted by their
//! UTF-8 bytes, then the named members as `cli/select.py` `PathFilter` selects them. Only the
//! sub-index schemas this project writes are read here (base columns, `inner_offset`,
//! `pkg_type`, Utf8 module columns); any other is left to the Python reader.

use pyo3::prelude::*;

use crate::ipc::{self, Column, Schema, Type};
use crate::lookup::{rows_problem, BASE, INNER};
use crate::tail::{format_error, ipc_stop, Out, Row, Stop, Tail};

/// Names a module column may not take (`validate.VIEW_COLUMNS`, lower case).
const VIEW_COLUMNS: [&str; 20] = [
    "relative_path",
    "chunk_seq",
    "fdata_offset",
    "compressed",
    "uncompressed_size",
    "blob_offset",
    "blob_size",
    "checksum",
    "inner_offset",
    "pkg_type",
    "pkg_type_name",
    "repo",
    "module",
    "module_name",
    "size",
    "stored_size",
    "chunks",
    "digest",
    "archive",
    "content",
];
/// Schema metadata keys this project reads and the range of each (`validate.schema_metadata`).
const META_RANGES: [(&str, i64, i64); 3] = [
    ("znippy.block_size", 1, 1 << 30),
    ("znippy.openzl.level", -131_072, 22),
    ("znippy.openzl.format_version", 0, 65_536),
];

fn module_name_ok(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// Whether `schema` is one of the sub-index schemas read here (else the Python reader's).
fn schema_read_here(schema: &Schema) -> bool {
    let f = &schema.fields;
    let base = f.len() >= 8
        && f.iter()
            .zip(BASE.iter())
            .all(|(f, (n, t))| f.name == *n && f.ty == *t && !f.nullable);
    if !base {
        return false;
    }
    let mut rest = &f[8..];
    if rest
        .first()
        .is_some_and(|x| x.name == INNER.0 && x.ty == INNER.1 && !x.nullable)
    {
        rest = &rest[1..];
    }
    if rest.first().is_some_and(|x| x.name == "pkg_type") {
        if rest[0].ty
            != (Type::Int {
                bits: 8,
                signed: true,
            })
        {
            return false;
        }
        rest = &rest[1..];
    }
    let mut seen: Vec<String> = Vec::new();
    for col in rest {
        let low = col.name.to_ascii_lowercase();
        if col.ty != Type::Utf8
            || !module_name_ok(&col.name)
            || VIEW_COLUMNS.contains(&low.as_str())
            || seen.contains(&low)
        {
            return false;
        }
        seen.push(low);
    }
    seen.len() <= 64
        && META_RANGES.iter().all(|(key, lo, hi)| {
            schema
                .meta(key)
                .is_none_or(|v| v.parse::<i64>().is_ok_and(|n| (*lo..=*hi).contains(&n)))
        })
}

/// One data sub-index, decoded and checked: its schema and its batches' columns.
pub fn group(tail: &Tail, row: &Row) -> Out<(Schema, Vec<Vec<Column>>)> {
    let what = format!("sub-index {}/{:?}/{:?}", row.pkg_type, row.repo, row.module);
    let bytes = tail.range(row, &what)?;
    let stream = ipc::walk(&bytes).map_err(|p| ipc_stop(&tail.path, &what, p))?;
    if !schema_read_here(&stream.schema) {
        return Err(Stop::NotHere(format!(
            "{what}: a schema the Python reader reads"
        )));
    }
    if stream.rows() != row.count {
        return Err(format_error(&tail.path, format!("{what}: row count")));
    }
    let mut batches = Vec::with_capacity(stream.batches.len());
    for b in &stream.batches {
        let cols =
            ipc::decode(&bytes, &stream.schema, b).map_err(|p| ipc_stop(&tail.path, &what, p))?;
        if let Some(p) = rows_problem(&cols, tail.tail_offset) {
            return Err(format_error(&tail.path, format!("{what} {p}")));
        }
        batches.push(cols);
    }
    Ok((stream.schema, batches))
}

/// Module columns of one name must have one type (`validate.union_problem`): here all are
/// Utf8, so only their spelling across groups is compared.
pub fn union_ok(schemas: &[Schema]) -> bool {
    let mut names: Vec<(String, String)> = Vec::new();
    for s in schemas {
        for f in s.fields.iter().skip(8) {
            if f.name == "pkg_type" || f.name == INNER.0 {
                continue;
            }
            let low = f.name.to_ascii_lowercase();
            match names.iter().find(|(l, _)| *l == low) {
                Some((_, had)) if *had != f.name => return false,
                Some(_) => {}
                None => names.push((low, f.name.clone())),
            }
        }
    }
    names.len() <= 256
}

fn listing(archive: &str, members: &[String]) -> Out<String> {
    let tail = Tail::open(archive)?;
    let mut paths: Vec<&[u8]> = Vec::new();
    let mut read = Vec::new();
    for row in tail.groups() {
        read.push(group(&tail, row)?);
    }
    if !union_ok(&read.iter().map(|(s, _)| s.clone()).collect::<Vec<_>>()) {
        return Err(Stop::NotHere(
            "module columns the Python reader words".into(),
        ));
    }
    for (_, batches) in &read {
        for cols in batches {
            for i in 0..cols[0].len {
                if cols[1].uint(i) == 0 {
                    paths.push(cols[0].bytes(i));
                }
            }
        }
    }
    paths.sort(); // stable: a path listed twice stays twice, as the files view shows it
    let members: Vec<&str> = members
        .iter()
        .map(|m| m.trim_matches('/'))
        .filter(|m| !m.is_empty())
        .collect();
    let mut used = vec![false; members.len()];
    let mut out = String::new();
    for p in paths {
        let text = std::str::from_utf8(p).unwrap_or(""); // validated as UTF-8 when decoded
        if !members.is_empty() {
            let hit = members.iter().position(|m| {
                text == *m || (text.starts_with(m) && text.as_bytes().get(m.len()) == Some(&b'/'))
            });
            match hit {
                Some(k) => used[k] = true,
                None => continue,
            }
        }
        out.push_str(text);
        out.push('\n');
    }
    if used.iter().any(|u| !u) {
        return Err(Stop::NotHere("a member not in the archive".into())); // worded by Python
    }
    Ok(out)
}

/// What `ls ARCHIVE [PATH...]` prints (one path a line), or None when the Python reader must
/// answer (a member not there, a layout or schema the core does not read).
#[pyfunction]
pub fn ls_text(py: Python<'_>, archive: &str, members: Vec<String>) -> PyResult<Option<String>> {
    match py.detach(|| listing(archive, &members)) {
        Ok(text) => Ok(Some(text)),
        Err(Stop::NotHere(_)) => Ok(None),
        Err(Stop::Fail(e)) => Err(e.into()),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ls_text, m)?)?;
    Ok(())
}
