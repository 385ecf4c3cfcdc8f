//! Sources: a blob read from a local archive (`pread`) or fetched by a Python callable (a
//! remote or relaid archive: a unit's blobs at once).

use super::*;

/// Where the blobs come from.
pub(super) enum Source {
    /// a local archive, read with `pread`
    Local(File),
    /// `fetch(offsets, sizes) -> list of buffers`: a unit's blobs at once (a remote source
    /// prefetches them coalesced)
    Python(Py<PyAny>),
}

/// A unit's blobs fetched by Python: blob offset → bytes.
pub(super) type Fetched = HashMap<(u64, u64), Vec<u8>>;

pub(super) fn py_problem(py: Python<'_>, e: PyErr) -> String {
    let v = e.value(py);
    match v.getattr("problem").and_then(|p| p.extract::<String>()) {
        Ok(p) => p,
        Err(_) => v.to_string(),
    }
}

pub(super) fn buffer_vec(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    PyBuffer::<u8>::get(obj)?.to_vec(obj.py())
}

impl Job {
    /// The blob `[offset, offset + size)`: read into `rbuf` (a worker's, kept: zero-filled
    /// only where it grows) from a local archive, or the unit's fetched one.
    pub(super) fn read<'a>(
        &self,
        rbuf: &'a mut Vec<u8>,
        fetched: &'a Fetched,
        offset: u64,
        size: u64,
    ) -> Result<&'a [u8], String> {
        match &self.source {
            Source::Local(f) => {
                let size = usize::try_from(size).map_err(|_| "a blob beyond memory")?;
                if rbuf.len() < size {
                    rbuf.resize(size, 0);
                }
                let buf = &mut rbuf[..size];
                f.read_exact_at(buf, offset)
                    .map_err(|e| format!("cannot read the archive: {}", strerror(&e)))?;
                self.bytes_read.fetch_add(size as u64, Ordering::Relaxed);
                Ok(buf)
            }
            Source::Python(_) => fetched
                .get(&(offset, size))
                .map(Vec::as_slice)
                .ok_or_else(|| format!("blob [{offset}, {}) was not fetched", offset + size)),
        }
    }

    pub(super) fn read_plain(&self, offset: u64, size: u64) -> Result<Vec<u8>, String> {
        let Source::Local(f) = &self.source else {
            return Err("not a local archive".into());
        };
        let mut buf = vec![0u8; size as usize];
        f.read_exact_at(&mut buf, offset)
            .map_err(|e| format!("cannot read the archive: {}", strerror(&e)))?;
        self.bytes_read.fetch_add(size, Ordering::Relaxed);
        Ok(buf)
    }

    /// The blobs of a unit's files, fetched by Python at once (a remote source).
    pub(super) fn fetch(
        &self,
        w: &mut Worker,
        items: &[Item<'_>],
        run: Option<std::ops::Range<usize>>,
    ) -> Result<(), String> {
        let Source::Python(fetch) = &self.source else {
            return Ok(());
        };
        w.fetched.clear();
        let c = &self.cols;
        let mut keys: Vec<(u64, u64)> = Vec::new();
        for item in items.iter().filter(|i| i.row < c.n) {
            let rows = run.clone().unwrap_or(item.row..c.next_first(item.row));
            for r in rows {
                let key = (c.blob_offset[r], c.blob_size[r]);
                if key.0.checked_add(key.1).is_some_and(|e| e <= self.tail)
                    && keys.last() != Some(&key)
                    && !w.packs.iter().any(|(k, _)| *k == key)
                {
                    keys.push(key);
                }
            }
        }
        keys.sort_unstable();
        keys.dedup();
        if keys.is_empty() {
            return Ok(());
        }
        let offs: Vec<u8> = keys.iter().flat_map(|k| k.0.to_le_bytes()).collect();
        let sizes: Vec<u8> = keys.iter().flat_map(|k| k.1.to_le_bytes()).collect();
        Python::attach(|py| -> Result<(), String> {
            let got = match fetch.call1(py, (PyBytes::new(py, &offs), PyBytes::new(py, &sizes))) {
                Ok(got) => got,
                Err(e) => {
                    // the source failed (a remote object changed, the network): the whole
                    // extract stops with that error, as when Python read the blobs
                    let why = py_problem(py, e.clone_ref(py));
                    lock(&self.raised).get_or_insert(e);
                    self.halt.store(true, Ordering::Relaxed);
                    return Err(why);
                }
            };
            let list = got
                .bind(py)
                .cast::<PyList>()
                .map_err(|e| e.to_string())?
                .clone();
            for (key, obj) in keys.iter().zip(list.iter()) {
                let data = buffer_vec(&obj).map_err(|e| py_problem(py, e))?;
                self.bytes_read
                    .fetch_add(data.len() as u64, Ordering::Relaxed);
                w.fetched.insert(*key, data);
            }
            Ok(())
        })
    }
}

/// `[at, end)` of a local file as a reader.
pub(super) struct Ranged<'f> {
    pub(super) file: &'f File,
    pub(super) at: u64,
    pub(super) end: u64,
}

impl Read for Ranged<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.end - self.at).min(buf.len() as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        let got = self.file.read_at(&mut buf[..n], self.at)?;
        self.at += got as u64;
        Ok(got)
    }
}
