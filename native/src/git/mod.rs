//! git packs for `git import` (docs/git-sections.md): a pack indexed from its checked `.idx`
//! or parsed whole, and the three git sections' columns. Python reaches these through
//! `znippy_sql/corelib.py` (the block `# -- git packs`); every function lets go of the GIL
//! while it works and checks for Ctrl-C every 20 ms.

mod bitmap;
mod index;
mod layout;
mod pack;
mod parse;
mod seal;
mod signals;
mod spread;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::errors::Error;
use index::{Fail, Indexed};
use pack::OID;
use signals::Ticker;

impl From<Fail> for PyErr {
    fn from(f: Fail) -> PyErr {
        match f {
            Fail::Pack(e) => e.into(),
            Fail::Mismatch(why) => Error::new(crate::errors::Kind::Pack, why).into(),
            Fail::Py(e) => e,
        }
    }
}

/// One indexed pack: its objects in entry order and its commits and trees (columns).
#[pyclass(frozen, module = "znippy_sql._native")]
pub struct PackIndex {
    inner: Indexed,
    /// why the pack's `.idx` was not used (it was parsed whole instead); None: it was, or
    /// none was given
    mismatch: Option<String>,
}

fn le<T: Copy, const N: usize>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * N);
    for &v in values {
        out.extend_from_slice(&to(v));
    }
    out
}

fn from_le<T, const N: usize>(raw: &[u8], to: impl Fn([u8; N]) -> T) -> Vec<T> {
    raw.chunks_exact(N)
        .map(|c| to(c.try_into().unwrap_or([0; N])))
        .collect()
}

#[pymethods]
impl PackIndex {
    /// A pack's index given as columns (the layout of `objects()` and `graph()`), for a
    /// writer that knows its objects without a pack to parse (and the tests of the layout).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn from_columns(
        ids: Vec<u8>,
        types: Vec<u8>,
        offsets: &[u8],
        commit_ids: Vec<u8>,
        tree_of: Vec<u8>,
        parent_counts: &[u8],
        parent_ids: Vec<u8>,
        times: &[u8],
        tree_ids: Vec<u8>,
        edge_tree: &[u8],
        edge_sub: Vec<u8>,
        edge_ids: Vec<u8>,
    ) -> PyResult<PackIndex> {
        let graph = parse::Graph {
            commit_ids,
            tree_of,
            parent_counts: from_le(parent_counts, u32::from_le_bytes),
            parent_ids,
            times: from_le(times, i64::from_le_bytes),
            tree_ids,
            edge_tree: from_le(edge_tree, u32::from_le_bytes),
            edge_sub,
            edge_ids,
        };
        let inner = Indexed {
            ids,
            types,
            offsets: from_le(offsets, u64::from_le_bytes),
            external_bases: 0,
            graph,
        };
        let g = &inner.graph;
        let n = inner.types.len();
        let c = g.times.len();
        let t = g.tree_ids.len() / OID;
        let e = g.edge_tree.len();
        let parents: usize = g.parent_counts.iter().map(|&k| k as usize).sum();
        let fits = inner.ids.len() == OID * n
            && inner.offsets.len() == n
            && g.commit_ids.len() == OID * c
            && g.tree_of.len() == OID * c
            && g.parent_counts.len() == c
            && g.parent_ids.len() == OID * parents
            && g.tree_ids.len() == OID * t
            && g.edge_sub.len() == e
            && g.edge_ids.len() == OID * e
            && g.edge_tree.iter().all(|&k| (k as usize) < t);
        if !fits {
            return Err(Error::new(
                crate::errors::Kind::Format,
                "pack index columns do not line up",
            )
            .into());
        }
        Ok(PackIndex {
            inner,
            mismatch: None,
        })
    }

    /// How many objects the pack holds.
    fn __len__(&self) -> usize {
        self.inner.types.len()
    }

    /// REF deltas resolved against objects of earlier packs.
    #[getter]
    fn external_bases(&self) -> u64 {
        self.inner.external_bases
    }

    /// Why the `.idx` given did not describe the pack (it was parsed whole instead).
    #[getter]
    fn idx_mismatch(&self) -> Option<String> {
        self.mismatch.clone()
    }

    /// `(ids, types, offsets)`: ids joined (20 bytes each), types u8, offsets u64 LE; in
    /// entry order.
    fn objects<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        let i = &self.inner;
        let parts = [
            PyBytes::new(py, &i.ids),
            PyBytes::new(py, &i.types),
            PyBytes::new(py, &le(&i.offsets, u64::to_le_bytes)),
        ];
        PyTuple::new(py, parts).expect("a tuple of three bytes")
    }

    /// The ids (joined) of the objects whose pack entry has type `kind` (4: the tags).
    fn ids_of_type<'py>(&self, py: Python<'py>, kind: u8) -> Bound<'py, PyBytes> {
        let i = &self.inner;
        let mut out = Vec::new();
        for (k, _) in i.types.iter().enumerate().filter(|(_, t)| **t == kind) {
            out.extend_from_slice(&i.ids[OID * k..OID * (k + 1)]);
        }
        PyBytes::new(py, &out)
    }

    /// The commits and trees: `commit_ids, tree_of, parent_counts (u32 LE), parent_ids,
    /// times (i64 LE), tree_ids, edge_tree (u32 LE), edge_sub (u8), edge_ids`.
    fn graph<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        let g = &self.inner.graph;
        let parts = [
            PyBytes::new(py, &g.commit_ids),
            PyBytes::new(py, &g.tree_of),
            PyBytes::new(py, &le(&g.parent_counts, u32::to_le_bytes)),
            PyBytes::new(py, &g.parent_ids),
            PyBytes::new(py, &le(&g.times, i64::to_le_bytes)),
            PyBytes::new(py, &g.tree_ids),
            PyBytes::new(py, &le(&g.edge_tree, u32::to_le_bytes)),
            PyBytes::new(py, &g.edge_sub),
            PyBytes::new(py, &g.edge_ids),
        ];
        PyTuple::new(py, parts).expect("a tuple of nine bytes")
    }
}

/// The bytes of a Python buffer (bytes, a read-only memoryview of a map): borrowed when the
/// buffer is read-only and contiguous, else copied (a writable buffer could change while the
/// GIL is released).
pub(crate) enum Bytes {
    Held(PyBuffer<u8>),
    Copied(Vec<u8>),
}

impl Bytes {
    pub(crate) fn of(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
        let buf = PyBuffer::<u8>::get(obj)?;
        if buf.readonly() && buf.is_c_contiguous() {
            return Ok(Bytes::Held(buf));
        }
        Ok(Bytes::Copied(buf.to_vec(obj.py())?))
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            // SAFETY: the buffer is read-only and C-contiguous, and `PyBuffer` keeps the
            // exporter's view (and so its memory) alive and unchanged until it is dropped,
            // which happens after the last use of this slice (it borrows `self`).
            Bytes::Held(buf) => unsafe {
                std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes())
            },
            Bytes::Copied(v) => v,
        }
    }
}

/// Index one pack: from its `.idx` when given and it describes the pack (checked), else by
/// parsing it whole (every object inflated and hashed). `external(oid)` gives `(type,
/// content)` of a REF delta's base outside the pack, or None. A damaged pack is a
/// `PackError` naming it (and the object).
#[pyfunction]
#[pyo3(signature = (pack, idx, name, external=None))]
fn git_index_pack(
    py: Python<'_>,
    pack: &Bound<'_, PyAny>,
    idx: Option<&Bound<'_, PyAny>>,
    name: &str,
    external: Option<Py<PyAny>>,
) -> PyResult<PackIndex> {
    let pack = Bytes::of(pack)?;
    let idx = idx.map(Bytes::of).transpose()?;
    let (pack, idx) = (pack.as_slice(), idx.as_ref().map(Bytes::as_slice));
    let mut ask = |oid: &[u8; OID]| -> PyResult<Option<(u8, Vec<u8>)>> {
        let Some(f) = &external else {
            return Ok(None);
        };
        Python::attach(|py| {
            let got = f.call1(py, (PyBytes::new(py, oid),))?;
            if got.is_none(py) {
                return Ok(None);
            }
            let (kind, content): (u8, Vec<u8>) = got.extract(py)?;
            Ok(Some((kind, content)))
        })
    };
    let (inner, mismatch) = py.detach(|| -> Result<(Indexed, Option<String>), Fail> {
        let mut tick = Ticker::new();
        let mut mismatch = None;
        if let Some(idx) = idx {
            match index::index_with_idx(pack, idx, name, &mut tick) {
                Err(Fail::Mismatch(why)) => mismatch = Some(why), // the whole parse decides
                other => return other.map(|got| (got, None)),
            }
        }
        Ok((
            index::parse_whole(pack, name, &mut ask, &mut tick)?,
            mismatch,
        ))
    })?;
    Ok(PackIndex { inner, mismatch })
}

/// The git sections' columns from indexed packs `[(pack, lookup row)]` in pack-ordinal
/// order; `prefer`: ref targets joined (20 bytes each); `walk_bound <= 0`: every commit
/// gets a stored bitmap. A dict of bytes columns (little-endian) and counts.
#[pyfunction]
fn git_sections<'py>(
    py: Python<'py>,
    packs: Vec<(Py<PackIndex>, u32)>,
    prefer: &[u8],
    walk_bound: i64,
) -> PyResult<Bound<'py, PyDict>> {
    let refs: Vec<(&Indexed, u32)> = packs
        .iter()
        .map(|(p, row)| (&p.get().inner, *row))
        .collect();
    let wanted: Vec<[u8; OID]> = prefer
        .chunks_exact(OID)
        .map(|c| {
            let mut id = [0u8; OID];
            id.copy_from_slice(c);
            id
        })
        .collect();
    let s = py.detach(|| layout::build(&refs, &wanted, walk_bound, &mut Ticker::new()))?;
    let d = PyDict::new(py);
    let b = |v: &[u8]| PyBytes::new(py, v);
    d.set_item("ids", b(&s.ids))?;
    d.set_item("pack_rows", b(&le(&s.pack_rows, u32::to_le_bytes)))?;
    d.set_item("offsets", b(&le(&s.offsets, u64::to_le_bytes)))?;
    d.set_item("types", b(&s.types))?;
    d.set_item("order", b(&le(&s.order, u32::to_le_bytes)))?;
    d.set_item("commit_ids", b(&s.commit_ids))?;
    d.set_item(
        "parent_offsets",
        b(&le(&s.parent_offsets, i32::to_le_bytes)),
    )?;
    d.set_item("parent_ids", b(&s.parent_ids))?;
    d.set_item("tree_of", b(&s.tree_of))?;
    d.set_item("generation", b(&le(&s.generation, u32::to_le_bytes)))?;
    d.set_item("times", b(&le(&s.times, i64::to_le_bytes)))?;
    d.set_item("corrected", b(&le(&s.corrected, i64::to_le_bytes)))?;
    d.set_item("position", b(&le(&s.position, u32::to_le_bytes)))?;
    d.set_item("block", b(&le(&s.block, u32::to_le_bytes)))?;
    d.set_item("reach_ids", b(&s.reach_ids))?;
    d.set_item("reach_offsets", b(&le(&s.reach_offsets, i32::to_le_bytes)))?;
    d.set_item("reach_data", b(&s.reach_data))?;
    d.set_item("absent", s.absent)?;
    d.set_item("irregular", s.irregular)?;
    Ok(d)
}

/// The tail of a sealed git archive written into the open file `fd` (the staging file, its
/// packs in it up to `blob_end`; `path`: the archive it becomes, for errors): `live` =
/// `[(ordinal, offset, size, BLAKE3)]` of its packs, `packs` their indexes in the same order
/// (None: no git sections), `sections` = `[(name, bytes, rows)]` already encoded, in tail
/// order. Returns `(file size, objects, commits)`. The file is cut after the tail and
/// flushed (`fsync`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn git_seal_tail(
    py: Python<'_>,
    path: &str,
    fd: i32,
    blob_end: u64,
    live: Vec<(u32, u64, u64, Vec<u8>)>,
    packs: Option<Vec<Py<PackIndex>>>,
    prefer: &[u8],
    walk_bound: i64,
    sections: Vec<seal::Given>,
) -> PyResult<(u64, u64, u64)> {
    let bad = |m: String| -> PyErr { Error::new(crate::errors::Kind::Format, m).at(path).into() };
    let mut extents = Vec::with_capacity(live.len());
    for (ordinal, offset, size, digest) in live {
        let digest: [u8; 32] = digest.as_slice().try_into().map_err(|_| {
            bad(format!(
                "pack {ordinal}: a BLAKE3 of {} bytes",
                digest.len()
            ))
        })?;
        extents.push(seal::Live {
            ordinal,
            offset,
            size,
            digest,
        });
    }
    let indexed: Option<Vec<&Indexed>> = packs
        .as_ref()
        .map(|v| v.iter().map(|p| &p.get().inner).collect());
    if indexed.as_ref().is_some_and(|v| v.len() != extents.len()) {
        return Err(bad("one index is needed for each live pack".into()));
    }
    let wanted: Vec<[u8; OID]> = prefer
        .chunks_exact(OID)
        .map(|c| c.try_into().unwrap_or([0; OID]))
        .collect();
    if fd < 0 {
        return Err(bad(format!(
            "no open file to write the tail into (descriptor {fd})"
        )));
    }
    // SAFETY: `fd` is the caller's open file, kept open by it for this call (the GIL is
    // held while it is duplicated); the duplicate is owned and closed here.
    let file = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .map_err(|e| {
            Error::new(
                crate::errors::Kind::Io,
                format!("cannot write the tail: {e}"),
            )
            .at(path)
        })?;
    let sealed = py.detach(|| -> Result<seal::Sealed, Fail> {
        let (raw, sealed) = seal::tail(
            blob_end,
            &extents,
            indexed.as_deref(),
            &wanted,
            walk_bound,
            &sections,
            &mut Ticker::new(),
        )?;
        seal::write(&file, blob_end, &raw, path).map_err(Fail::Pack)?;
        Ok(sealed)
    })?;
    Ok((sealed.file_size, sealed.objects, sealed.commits))
}

/// The `__gunnar_refs__` stream of the refs given as columns, rows in the order given.
#[pyfunction]
fn git_refs_stream<'py>(
    py: Python<'py>,
    names: Vec<String>,
    targets: Vec<Option<Vec<u8>>>,
    peeled: Vec<Option<Vec<u8>>>,
    symbolic: Vec<Option<String>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let raw = seal::refs_stream(&names, &targets, &peeled, &symbolic)
        .map_err(|m| PyErr::from(Error::new(crate::errors::Kind::Format, m)))?;
    Ok(PyBytes::new(py, &raw))
}

/// The `__meta__` stream of `(relative_path, key, value)` rows given as columns, in order.
#[pyfunction]
fn meta_stream<'py>(
    py: Python<'py>,
    paths: Vec<Option<String>>,
    keys: Vec<String>,
    values: Vec<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    if keys.len() != values.len() || paths.len() != keys.len() {
        let e = Error::new(
            crate::errors::Kind::Format,
            "__meta__ columns differ in length",
        );
        return Err(e.into());
    }
    Ok(PyBytes::new(py, &seal::meta_stream(&paths, &keys, &values)))
}

/// A tree's entries as the import reads them: `[(is subtree, child id)]`, gitlinks left out.
#[pyfunction]
fn git_tree_entries<'py>(py: Python<'py>, content: &[u8]) -> Vec<(bool, Bound<'py, PyBytes>)> {
    let entries = parse::tree_entries(content);
    entries
        .into_iter()
        .map(|(sub, id)| (sub, PyBytes::new(py, &id)))
        .collect()
}

/// The Roaring portable serialization of the positions in `runs` (`[(start, end)]`, sorted,
/// disjoint): what a stored bitmap's bytes are.
#[pyfunction]
fn git_serialize_runs(py: Python<'_>, runs: Vec<(u32, u32)>) -> Bound<'_, PyBytes> {
    let mut set = bitmap::Runs::default();
    for (a, b) in runs {
        set.add_range(a, b);
    }
    PyBytes::new(py, &set.serialize())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PackIndex>()?;
    m.add_function(wrap_pyfunction!(git_index_pack, m)?)?;
    m.add_function(wrap_pyfunction!(git_sections, m)?)?;
    m.add_function(wrap_pyfunction!(git_tree_entries, m)?)?;
    m.add_function(wrap_pyfunction!(git_seal_tail, m)?)?;
    m.add_function(wrap_pyfunction!(git_refs_stream, m)?)?;
    m.add_function(wrap_pyfunction!(meta_stream, m)?)?;
    m.add_function(wrap_pyfunction!(git_serialize_runs, m)?)?;
    Ok(())
}
