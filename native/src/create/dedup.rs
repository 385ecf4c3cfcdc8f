//! The dedup index's table (`write/dedup.py` `DedupIndex`, a Python subclass of
//! [`DedupTable`]): chunk content (BLAKE3 + length) → the one blob that holds it.
//!
//! A distinct chunk takes its digest, its length, blob offset and size, codec flag,
//! `inner_offset` and state (74 bytes with the open-addressing table, at most half full, of
//! `slot + 1` keyed by the digest's first 8 bytes). Each digest is entered at most once, so
//! the table's layout never changes an answer. Every method runs holding the GIL (none
//! releases it): a worker thread's `known` never sees an entry half made.

use pyo3::prelude::*;

use pyo3::exceptions::{PyRuntimeError, PyValueError};

/// An entry's state (`write/dedup.py`): a whole blob (written here or seeded); a member of
/// an open pack of this write; a member of a placed pack; a member of a closed pack (sent
/// to the codec, not placed yet); a member of a placed pack written as its own raw blob.
pub const WHOLE: u8 = 0;
pub const PENDING: u8 = 1;
pub const PACKED: u8 = 2;
pub const CLOSED: u8 = 3;
pub const PACK_WHOLE: u8 = 4;

/// The columns of the distinct chunks and the digest table over them.
#[derive(Default)]
pub struct Table {
    digests: Vec<[u8; 32]>,
    lengths: Vec<u64>,
    offsets: Vec<u64>,
    sizes: Vec<u64>,
    flags: Vec<bool>,
    inner: Vec<u64>,
    state: Vec<u8>,
    /// `slot + 1` (0: empty), linear probing
    table: Vec<u32>,
}

fn key(digest: &[u8; 32]) -> usize {
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first) as usize
}

/// A digest argument (an internal mistake when not 32 bytes: a ValueError).
fn digest_of(bytes: &[u8]) -> PyResult<[u8; 32]> {
    bytes.try_into().map_err(|_| {
        PyValueError::new_err(format!(
            "a chunk digest must be 32 bytes, not {}",
            bytes.len()
        ))
    })
}

impl Table {
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// The slot of `digest`, if entered.
    pub fn find(&self, digest: &[u8; 32]) -> Option<usize> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.table.len() - 1;
        let mut i = key(digest) & mask;
        loop {
            let s = self.table[i] as usize;
            if s == 0 {
                return None;
            }
            if &self.digests[s - 1] == digest {
                return Some(s - 1);
            }
            i = (i + 1) & mask;
        }
    }

    fn place_slot(&mut self, slot: usize) {
        let mask = self.table.len() - 1;
        let mut i = key(&self.digests[slot]) & mask;
        while self.table[i] != 0 {
            i = (i + 1) & mask;
        }
        self.table[i] = (slot + 1) as u32;
    }

    /// A new entry for `digest` (not entered yet); its slot.
    #[allow(clippy::too_many_arguments)]
    pub fn enter(
        &mut self,
        digest: [u8; 32],
        length: u64,
        offset: u64,
        size: u64,
        compressed: bool,
        inner: u64,
        state: u8,
    ) -> usize {
        let slot = self.len();
        self.digests.push(digest);
        self.lengths.push(length);
        self.offsets.push(offset);
        self.sizes.push(size);
        self.flags.push(compressed);
        self.inner.push(inner);
        self.state.push(state);
        if 2 * (slot + 1) > self.table.len() {
            let size = (2 * self.table.len()).max(1024);
            self.table = vec![0; size];
            for s in 0..slot {
                self.place_slot(s);
            }
        }
        self.place_slot(slot);
        slot
    }

    /// Whether a chunk of this content has a blob already.
    pub fn known(&self, digest: &[u8; 32], length: u64) -> bool {
        self.find(digest).is_some_and(|s| {
            self.lengths[s] == length && matches!(self.state[s], WHOLE | PACKED | PACK_WHOLE)
        })
    }
}

/// The native part of `write/dedup.py` `DedupIndex` (subclassed there: `seed` and the
/// pieces `place` writes stay Python). `limit`: blobs ending at or before it were seeded;
/// `hits`/`saved`: the rows and bytes shared.
#[pyclass(module = "znippy_sql._native", subclass)]
pub struct DedupTable {
    t: Table,
    #[pyo3(get, set)]
    limit: u64,
    #[pyo3(get, set)]
    hits: u64,
    #[pyo3(get, set)]
    saved: u64,
}

impl DedupTable {
    /// A new pack member's `(ref, slot)`: `ref` the slot it may point at — a member of a
    /// closed or placed pack of this write, of its own open pack (`pending`), or a blob
    /// seeded from existing rows; never a whole blob of this write nor a member of another
    /// open pack (whether those are placed first depends on timing) — else -1; and `slot`,
    /// the pending entry made for its content (-1: none, the digest has an entry already).
    pub fn member(&mut self, digest: &[u8; 32], length: u64, pending: &[usize]) -> (i64, i64) {
        let t = &mut self.t;
        let Some(slot) = t.find(digest) else {
            let slot = t.enter(*digest, length, 0, 0, false, 0, PENDING);
            return (-1, slot as i64);
        };
        if t.lengths[slot] == length {
            let state = t.state[slot];
            let shared = matches!(state, PACKED | CLOSED | PACK_WHOLE)
                || (state == WHOLE && t.offsets[slot] + t.sizes[slot] <= self.limit)
                || (state == PENDING && pending.contains(&slot));
            if shared {
                return (slot as i64, -1);
            }
        }
        (-1, -1)
    }

    /// The pack holding these pending members was sent to the codec.
    pub fn close_slots(&mut self, slots: &[usize]) {
        for &s in slots {
            if let Some(state) = self.t.state.get_mut(s) {
                *state = CLOSED;
            }
        }
    }

    /// A slot given by Python is one entered (else an error, never a panic).
    fn check(&self, slot: usize) -> PyResult<()> {
        if slot < self.t.len() {
            Ok(())
        } else {
            Err(PyRuntimeError::new_err(format!("no dedup slot {slot}")))
        }
    }
}

#[pymethods]
impl DedupTable {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyAny>, _kwargs: Option<&Bound<'_, PyAny>>) -> Self {
        DedupTable {
            t: Table::default(),
            limit: 0,
            hits: 0,
            saved: 0,
        }
    }

    fn __len__(&self) -> usize {
        self.t.len()
    }

    /// Whether a chunk of this content has a blob already (entries are only ever added, so
    /// a True stays true).
    fn known(&self, digest: &[u8], length: u64) -> PyResult<bool> {
        super::guarded("the dedup index", || {
            Ok(self.t.known(&digest_of(digest)?, length))
        })
    }

    /// A new pack member's `(ref, slot)` (`write/dedup.py` says which slots it may point
    /// at); `pack_slots`: the pending slots of its own open pack.
    fn pack_member(
        &mut self,
        digest: &[u8],
        length: u64,
        pack_slots: Vec<usize>,
    ) -> PyResult<(i64, i64)> {
        super::guarded("the dedup index", || {
            Ok(self.member(&digest_of(digest)?, length, &pack_slots))
        })
    }

    /// The pack holding these pending members was sent to the codec.
    fn close(&mut self, slots: Vec<usize>) -> PyResult<()> {
        super::guarded("the dedup index", || {
            for s in slots {
                self.check(s)?;
                self.t.state[s] = CLOSED;
            }
            Ok(())
        })
    }

    /// Where a pending member went once its pack was placed.
    fn settle(
        &mut self,
        slot: usize,
        offset: u64,
        size: u64,
        compressed: bool,
        inner: u64,
    ) -> PyResult<()> {
        super::guarded("the dedup index", || {
            self.check(slot)?;
            let t = &mut self.t;
            t.offsets[slot] = offset;
            t.sizes[slot] = size;
            t.flags[slot] = compressed;
            t.inner[slot] = inner;
            let framed = size != 0 && (inner != 0 || size != t.lengths[slot] || compressed);
            t.state[slot] = if framed { PACKED } else { PACK_WHOLE };
            Ok(())
        })
    }

    /// `(blob_offset, blob_size, compressed, inner_offset)` of a placed entry.
    fn entry(&self, slot: usize) -> PyResult<(u64, u64, bool, u64)> {
        super::guarded("the dedup index", || {
            self.check(slot)?;
            let t = &self.t;
            if matches!(t.state[slot], PENDING | CLOSED) {
                return Err(PyRuntimeError::new_err(
                    "a pack member was referenced before its pack was placed",
                ));
            }
            Ok((t.offsets[slot], t.sizes[slot], t.flags[slot], t.inner[slot]))
        })
    }

    /// Enter the seeded blobs not entered yet, in the order given (the lowest offset first):
    /// `digests` back to back; state `PACKED` where `inner` is non-zero.
    fn seed_rows(
        &mut self,
        digests: &[u8],
        sizes: Vec<u64>,
        offsets: Vec<u64>,
        stored: Vec<u64>,
        flags: Vec<bool>,
        inner: Vec<u64>,
    ) -> PyResult<()> {
        super::guarded("the dedup index", || {
            let n = digests.len() / 32;
            if [
                sizes.len(),
                offsets.len(),
                stored.len(),
                flags.len(),
                inner.len(),
            ] != [n; 5]
            {
                return Err(PyValueError::new_err("seeded columns of different lengths"));
            }
            for (i, d) in digests.chunks_exact(32).enumerate() {
                let d = digest_of(d)?;
                if self.t.find(&d).is_none() {
                    let state = if inner[i] != 0 { PACKED } else { WHOLE };
                    self.t.enter(
                        d, sizes[i], offsets[i], stored[i], flags[i], inner[i], state,
                    );
                }
            }
            Ok(())
        })
    }

    /// Where each chunk of a finished batch goes (`write/dedup.py` `DedupIndex.place`): per chunk
    /// `blob_offset`, `blob_size`, `compressed` and `inner_offset`, the `[start, end)` runs
    /// of the batch's buffer to write at `cursor`, and the new cursor.
    #[allow(clippy::type_complexity)]
    fn place_runs(
        &mut self,
        lengths: Vec<u64>,
        digests: &[u8],
        compressed: Vec<bool>,
        stored: Vec<u64>,
        mut cursor: u64,
    ) -> PyResult<(
        Vec<u64>,
        Vec<u64>,
        Vec<bool>,
        Vec<(u64, u64)>,
        u64,
        Vec<u64>,
    )> {
        super::guarded("the dedup index", || {
            let n = lengths.len();
            if compressed.len() != n || stored.len() != n || digests.len() != 32 * n {
                return Err(PyValueError::new_err(
                    "a batch's columns of different lengths",
                ));
            }
            let (mut offs, mut sizes) = (Vec::with_capacity(n), Vec::with_capacity(n));
            let (mut flags, mut inners) = (Vec::with_capacity(n), Vec::with_capacity(n));
            let mut runs = Vec::new();
            let (mut pos, mut run) = (0u64, 0u64); // the unwritten run of new blobs: [run, pos)
            for (i, &len) in lengths.iter().enumerate() {
                let s = stored[i];
                if len == 0 {
                    offs.push(cursor);
                    sizes.push(0);
                    flags.push(false);
                    inners.push(0);
                    continue;
                }
                let d = digest_of(&digests[32 * i..32 * i + 32])?;
                let slot = self.t.find(&d);
                let t = &self.t;
                if let Some(k) = slot.filter(|&k| {
                    t.lengths[k] == len && matches!(t.state[k], WHOLE | PACKED | PACK_WHOLE)
                }) {
                    if run < pos {
                        runs.push((run, pos));
                    }
                    pos += s;
                    run = pos;
                    offs.push(t.offsets[k]);
                    sizes.push(t.sizes[k]);
                    flags.push(t.flags[k]);
                    inners.push(t.inner[k]);
                    self.hits += 1;
                    if t.state[k] != PACKED {
                        self.saved += t.sizes[k]; // a slice of a pack saves no whole blob
                    }
                    continue;
                }
                if s == 0 {
                    return Err(PyRuntimeError::new_err(
                        "a chunk skipped as known has no blob in the index",
                    ));
                }
                let c = compressed[i];
                if slot.is_none() {
                    self.t.enter(d, len, cursor, s, c, 0, WHOLE);
                }
                offs.push(cursor);
                sizes.push(s);
                flags.push(c);
                inners.push(0);
                cursor += s;
                pos += s;
            }
            if run < pos {
                runs.push((run, pos));
            }
            Ok((offs, sizes, flags, runs, cursor, inners))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(i: u64) -> [u8; 32] {
        let mut x = [0u8; 32];
        x[..8].copy_from_slice(&(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & 0xFFFF).to_le_bytes());
        x[8..16].copy_from_slice(&i.to_le_bytes());
        x
    }

    #[test]
    fn every_entry_is_found_after_the_table_grows() {
        let mut t = Table::default();
        for i in 0..5000 {
            assert_eq!(t.enter(d(i), i, 0, 0, false, 0, WHOLE), i as usize);
        }
        for i in 0..5000 {
            assert_eq!(t.find(&d(i)), Some(i as usize));
            assert!(t.known(&d(i), i));
            assert!(!t.known(&d(i), i + 1));
        }
        assert_eq!(t.find(&d(5000)), None);
    }

    #[test]
    fn a_pending_member_is_not_known() {
        let mut t = Table::default();
        t.enter(d(1), 10, 0, 0, false, 0, PENDING);
        assert!(!t.known(&d(1), 10));
    }
}
