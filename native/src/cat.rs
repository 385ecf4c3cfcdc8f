//! `znippy-sql cat ARCHIVE PATH...` of a local archive without pyarrow (issue 33, item 6):
//! [`cat_plan`] opens the tail, finds every path (trie → lookup rows) and checks every
//! chunk's frame shape before a byte is written; [`CatPlan::chunk`] then decodes one chunk
//! and checks its BLAKE3. A shape the core does not read (no plan: `None`) is left to the
//! Python reader, which answers it as before.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{Error, Kind};
use crate::frame::{self, Shape};
use crate::ipc::{self, Type};
use crate::lookup::{py_repr, Chunk, Finder, MAX_CHUNK_BYTES};
use crate::tail::{format_error, ipc_stop, Out, Stop, Tail, META};

/// Above this a chunk is streamed by the Python reader (`codec.STREAM_BYTES`): left to it.
const STREAM_BYTES: u64 = 64 << 20;
/// A point read of a pack member decodes at least this much of it (`reader.PREFIX_MIN`).
const PREFIX_MIN: u64 = 256 << 10;
const SYMLINK: &str = "posix.symlink";

/// The paths `__meta__` records as symbolic links (`read/posix.links`): `cat` skips them.
fn links(tail: &Tail) -> Out<Vec<String>> {
    let Some(row) = tail.section(META) else {
        return Ok(Vec::new());
    };
    let bytes = tail.range(row, META)?;
    let (schema, batches) = ipc::read_all(&bytes).map_err(|p| ipc_stop(&tail.path, META, p))?;
    let shape = [
        ("relative_path", Type::Utf8),
        ("key", Type::Utf8),
        ("value", Type::Utf8),
    ];
    let ok = schema.fields.len() == 3
        && schema
            .fields
            .iter()
            .zip(shape)
            .all(|(f, (n, t))| f.name == n && f.ty == t);
    if !ok {
        return Err(Stop::NotHere(format!("{META} of another schema")));
    }
    let mut out = Vec::new();
    for cols in &batches {
        if cols[1].null_count() > 0 || cols[2].null_count() > 0 {
            return Err(format_error(
                &tail.path,
                format!("{META}: a fact without a key or a value"),
            ));
        }
        for i in 0..cols[0].len {
            if !cols[0].is_null(i) && cols[1].bytes(i) == SYMLINK.as_bytes() {
                out.push(cols[0].str(i).to_string());
            }
        }
    }
    Ok(out)
}

/// A path and its chunks, each with its frame shape (None: stored raw).
type Planned = (String, Vec<(Chunk, Option<Shape>)>);
/// A decoded packed blob: (blob offset, blob size, bytes, whether whole or a prefix).
type Decoded = (u64, u64, Vec<u8>, bool);

/// What [`cat_plan`] found: the archive, each path's chunks (none for a link), their shapes.
#[pyclass(frozen, module = "znippy_sql._native")]
pub struct CatPlan {
    tail: Tail,
    files: Vec<Planned>,
    packed: bool,
    /// the last decoded packed blob: (offset, size, bytes, whole)
    last: Mutex<Option<Decoded>>,
}

fn plan(archive: &str, paths: &[String]) -> Out<CatPlan> {
    let tail = Tail::open(archive)?;
    let skip = links(&tail)?;
    let mut finder = Finder::new(&tail)?;
    let packed = finder.packed;
    let mut found = Vec::with_capacity(paths.len());
    for name in paths {
        let Some(chunks) = finder.find(name)? else {
            return Err(Stop::NotHere(format!("no file {name:?}"))); // worded by Python
        };
        found.push((name.clone(), chunks));
    }
    drop(finder);
    let mut files = Vec::with_capacity(found.len());
    for (name, chunks) in found {
        if skip.contains(&name) {
            files.push((name, Vec::new()));
            continue;
        }
        let mut planned = Vec::with_capacity(chunks.len());
        for ch in chunks {
            let shape = shape_of(&tail, &name, &ch, packed)?;
            planned.push((ch, shape));
        }
        files.push((name, planned));
    }
    Ok(CatPlan {
        tail,
        files,
        packed,
        last: Mutex::new(None),
    })
}

/// The frame shape of a compressed chunk (None for a raw one), read from its blob's head.
fn shape_of(tail: &Tail, name: &str, ch: &Chunk, packed: bool) -> Out<Option<Shape>> {
    if ch.blob_offset + ch.blob_size > tail.tail_offset {
        return Err(format_error(
            &tail.path,
            format!(
                "{} chunk {}: blob runs into the index tail",
                py_repr(name),
                ch.seq
            ),
        ));
    }
    if !ch.compressed {
        if ch.size > STREAM_BYTES {
            // the Python path writes such a chunk from its memory map, without a copy
            return Err(Stop::NotHere("a raw chunk over STREAM_BYTES".into()));
        }
        return Ok(None);
    }
    let head = tail.read(ch.blob_offset, ch.blob_size.min(64), "blob")?;
    let expected = if packed {
        frame::declared(&head).ok_or_else(|| Stop::NotHere("another frame shape".into()))?
    } else {
        ch.size
    };
    if expected > STREAM_BYTES.min(MAX_CHUNK_BYTES) {
        return Err(Stop::NotHere("a chunk the Python reader streams".into()));
    }
    match frame::parse(&head, ch.blob_size as usize, expected) {
        Some(shape) => Ok(Some(shape)),
        None => Err(Stop::NotHere(
            "another frame shape (the OpenZL binding reads it)".into(),
        )),
    }
}

impl CatPlan {
    fn data(&self, i: usize, j: usize) -> Result<Vec<u8>, Error> {
        let (name, chunks) = &self.files[i];
        let (ch, shape) = &chunks[j];
        let path = self.tail.path.as_str();
        let where_ = format!("{} chunk {}: ", py_repr(name), ch.seq);
        let fail = |s: Stop| match s {
            Stop::Fail(e) => e,
            Stop::NotHere(m) => Error::new(Kind::Format, m).at(path),
        };
        let codec = |m: String| Error::new(Kind::Codec, format!("{where_}{m}")).at(path);
        let data = match shape {
            None => self
                .tail
                .read(ch.blob_offset, ch.blob_size, "blob")
                .map_err(fail)?,
            Some(shape) if self.packed => {
                let end = ch.inner + ch.size;
                let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
                let hit = last.as_ref().is_some_and(|(o, s, d, whole)| {
                    *o == ch.blob_offset && *s == ch.blob_size && (*whole || end <= d.len() as u64)
                });
                if !hit {
                    let blob = self
                        .tail
                        .read(ch.blob_offset, ch.blob_size, "blob")
                        .map_err(fail)?;
                    let n = frame::declared(&blob).unwrap_or(0);
                    let want = end.max(PREFIX_MIN).min(n);
                    let decoded = frame::decode(&blob, *shape, n, want).map_err(codec)?;
                    *last = Some((ch.blob_offset, ch.blob_size, decoded, want >= n));
                }
                let decoded = &last.as_ref().expect("set above").2;
                if end > decoded.len() as u64 {
                    return Err(Error::new(
                        Kind::Format,
                        format!(
                            "{where_}slice [{}, {end}) lies outside its decoded blob of {} bytes",
                            ch.inner,
                            decoded.len()
                        ),
                    )
                    .at(path));
                }
                decoded[ch.inner as usize..end as usize].to_vec()
            }
            Some(shape) => {
                let blob = self
                    .tail
                    .read(ch.blob_offset, ch.blob_size, "blob")
                    .map_err(fail)?;
                frame::decode(&blob, *shape, ch.size, ch.size).map_err(codec)?
            }
        };
        if *blake3::hash(&data).as_bytes() != ch.checksum {
            return Err(Error::new(Kind::Checksum, format!("{where_}BLAKE3 mismatch")).at(path));
        }
        Ok(data)
    }
}

#[pymethods]
impl CatPlan {
    /// How many chunks each path has (0 for a link, which `cat` skips).
    fn counts(&self) -> Vec<usize> {
        self.files.iter().map(|(_, c)| c.len()).collect()
    }

    /// Chunk `j` of path `i`, decoded and checked against its BLAKE3.
    fn chunk<'py>(&self, py: Python<'py>, i: usize, j: usize) -> PyResult<Bound<'py, PyBytes>> {
        if i >= self.files.len() || j >= self.files[i].1.len() {
            return Err(pyo3::exceptions::PyIndexError::new_err("no such chunk"));
        }
        let data = py.detach(|| self.data(i, j))?;
        Ok(PyBytes::new(py, &data))
    }
}

/// The plan of `cat ARCHIVE PATH...`, or None when the Python reader must answer (a path
/// that is not there, a layout or frame this core does not read).
#[pyfunction]
pub fn cat_plan(py: Python<'_>, archive: &str, paths: Vec<String>) -> PyResult<Option<CatPlan>> {
    match py.detach(|| plan(archive, &paths)) {
        Ok(p) => Ok(Some(p)),
        Err(Stop::NotHere(_)) => Ok(None),
        Err(Stop::Fail(e)) => Err(e.into()),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CatPlan>()?;
    m.add_function(wrap_pyfunction!(cat_plan, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/golden-v6-default.znippy"
    );

    #[test]
    fn golden_files_are_planned_decoded_and_checked() {
        let names = ["README.txt", "empty", "lib/x.jar", "src/m00.txt"].map(String::from);
        let plan = plan(GOLDEN, &names).unwrap_or_else(|_| panic!("not planned"));
        for (i, (_, chunks)) in plan.files.iter().enumerate() {
            for (j, (chunk, _)) in chunks.iter().enumerate() {
                let data = plan.data(i, j).unwrap(); // its BLAKE3 is checked inside
                assert_eq!(data.len() as u64, chunk.size);
            }
        }
        assert!(plan.packed);
        assert!(matches!(plan_of(&["nope"]), Err(Stop::NotHere(_))));
    }

    fn plan_of(names: &[&str]) -> Out<CatPlan> {
        plan(
            GOLDEN,
            &names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    }
}
