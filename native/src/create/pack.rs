//! Pack assembly (`write/pack.py`, docs/format.md "Packed blobs"): the open packs of a write,
//! by (group, directory?), in the order they opened; a member's bytes appended, its BLAKE3
//! taken when not given, its dedup answer asked of the write's [`DedupTable`]. A closed pack
//! waits in `closed` until Python takes it (`take`) with its members' columns.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::dedup::DedupTable;

struct Open {
    serial: u64,
    group: u64,
    directory: bool,
    /// the members' bytes objects, joined once when the pack is taken (no copy before)
    parts: Vec<Py<PyBytes>>,
    size: u64,
    lengths: Vec<u64>,
    digests: Vec<u8>,
    inner: Vec<u64>,
    refs: Vec<i64>,
    slots: Vec<i64>,
    /// the dedup slots entered for this pack's own members (closed with it)
    pending: Vec<usize>,
}

/// The open packs of one write.
#[pyclass(module = "znippy_sql._native")]
pub struct Packs {
    open: Vec<Open>,
    closed: Vec<Open>,
    next: u64,
    target: u64,
    dir_max: u64,
}

impl Packs {
    fn close_at(&mut self, i: usize, dedup: &mut Option<PyRefMut<'_, DedupTable>>) {
        let pack = self.open.remove(i);
        if let Some(d) = dedup.as_mut() {
            d.close_slots(&pack.pending);
        }
        self.closed.push(pack);
    }
}

#[pymethods]
impl Packs {
    /// `target`: a small-file pack closes once it holds this many bytes; `dir_max`: a
    /// directory pack never holds more.
    #[new]
    fn new(target: u64, dir_max: u64) -> Self {
        Packs {
            open: Vec::new(),
            closed: Vec::new(),
            next: 0,
            target,
            dir_max,
        }
    }

    /// `data` joins the open pack (`directory`: the directory pack) of `group`; returns
    /// that pack's serial and how many packs wait closed (a directory pack that would pass
    /// `dir_max` closes first; a small-file pack at `target` closes after).
    #[pyo3(signature = (group, directory, data, digest, dedup))]
    fn add(
        &mut self,
        group: u64,
        directory: bool,
        data: &Bound<'_, PyBytes>,
        digest: Option<&[u8]>,
        mut dedup: Option<PyRefMut<'_, DedupTable>>,
    ) -> PyResult<(u64, usize)> {
        super::guarded("pack assembly", || {
            let bytes = data.as_bytes();
            let n = bytes.len() as u64;
            let mut at = self
                .open
                .iter()
                .position(|p| p.group == group && p.directory == directory);
            if let Some(i) = at {
                if directory && self.open[i].size + n > self.dir_max {
                    self.close_at(i, &mut dedup);
                    at = None;
                }
            }
            let i = match at {
                Some(i) => i,
                None => {
                    self.open.push(Open {
                        serial: self.next,
                        group,
                        directory,
                        parts: Vec::new(),
                        size: 0,
                        lengths: Vec::new(),
                        digests: Vec::new(),
                        inner: Vec::new(),
                        refs: Vec::new(),
                        slots: Vec::new(),
                        pending: Vec::new(),
                    });
                    self.next += 1;
                    self.open.len() - 1
                }
            };
            let digest: [u8; 32] = match digest {
                Some(d) => d
                    .try_into()
                    .map_err(|_| PyValueError::new_err("a member digest must be 32 bytes"))?,
                None => *blake3::hash(bytes).as_bytes(),
            };
            let pack = &mut self.open[i];
            let (mut r, mut slot) = (-1i64, -1i64);
            if let Some(d) = dedup.as_mut() {
                (r, slot) = d.member(&digest, n, &pack.pending);
            }
            pack.lengths.push(n);
            pack.digests.extend_from_slice(&digest);
            pack.refs.push(r);
            if r >= 0 {
                pack.inner.push(0);
                pack.slots.push(-1);
            } else {
                if slot >= 0 {
                    pack.pending.push(slot as usize);
                }
                pack.inner.push(pack.size);
                pack.slots.push(slot);
                pack.parts.push(data.clone().unbind());
                pack.size += n;
            }
            let serial = pack.serial;
            if !directory && pack.size >= self.target {
                self.close_at(i, &mut dedup);
            }
            Ok((serial, self.closed.len()))
        })
    }

    /// Close every open directory pack (1), or every open pack (2), in the order they
    /// opened; returns how many packs wait closed.
    fn close(&mut self, which: u8, mut dedup: Option<PyRefMut<'_, DedupTable>>) -> PyResult<usize> {
        super::guarded("pack assembly", || {
            let mut i = 0;
            while i < self.open.len() {
                if which == 2 || self.open[i].directory {
                    self.close_at(i, &mut dedup);
                } else {
                    i += 1;
                }
            }
            Ok(self.closed.len())
        })
    }

    /// The closed packs, oldest first: `(serial, directory, parts, lengths, digests, inner,
    /// refs, slots)` (`parts` the members' bytes objects stored in the pack, to be joined;
    /// digests back to back; `inner` each member's offset in `data`, `refs`
    /// the dedup slot a member points at or -1, `slots` the slot entered for it or -1).
    #[allow(clippy::type_complexity)]
    fn take<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<
        Vec<(
            u64,
            bool,
            Vec<Py<PyBytes>>,
            Vec<u64>,
            Bound<'py, PyBytes>,
            Vec<u64>,
            Vec<i64>,
            Vec<i64>,
        )>,
    > {
        super::guarded("pack assembly", || {
            Ok(std::mem::take(&mut self.closed)
                .into_iter()
                .map(|p| {
                    (
                        p.serial,
                        p.directory,
                        p.parts,
                        p.lengths,
                        PyBytes::new(py, &p.digests),
                        p.inner,
                        p.refs,
                        p.slots,
                    )
                })
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_close_at_their_target_and_directory_packs_at_their_limit() {
        Python::initialize();
        Python::attach(|py| {
            let mut p = Packs::new(10, 8);
            let b = |x: &[u8]| PyBytes::new(py, x);
            assert_eq!(p.add(1, false, &b(b"abcdef"), None, None).unwrap(), (0, 0));
            assert_eq!(p.add(2, false, &b(b"xy"), None, None).unwrap(), (1, 0));
            assert_eq!(p.add(1, false, &b(b"ghij"), None, None).unwrap(), (0, 1)); // 10 bytes
            assert_eq!(p.add(1, true, &b(b"12345"), None, None).unwrap(), (2, 1));
            assert_eq!(p.add(1, true, &b(b"6789"), None, None).unwrap(), (3, 2)); // 9 > 8: a new one
            let closed: Vec<(u64, Vec<u8>, Vec<u64>)> = std::mem::take(&mut p.closed)
                .into_iter()
                .map(|o| {
                    let data = o
                        .parts
                        .iter()
                        .flat_map(|x| x.as_bytes(py).to_vec())
                        .collect();
                    (o.serial, data, o.inner)
                })
                .collect();
            assert_eq!(closed[0], (0, b"abcdefghij".to_vec(), vec![0, 6]));
            assert_eq!(closed[1], (2, b"12345".to_vec(), vec![0]));
            assert_eq!(p.close(1, None).unwrap(), 1); // the open directory pack, not the small one
            assert_eq!(p.closed[0].serial, 3);
            assert_eq!(p.open.len(), 1);
            assert_eq!(p.close(2, None).unwrap(), 2);
            assert!(p.open.is_empty());
            assert_eq!(p.closed[1].digests, blake3::hash(b"xy").as_bytes().to_vec());
        });
    }
}
