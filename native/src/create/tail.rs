//! The `__trie__` of a write (`write/tail.py` `build_trie`): the fst map relative_path →
//! first lookup row, built from the lookup's columns in one call (no Python object per
//! key). The `fst` crate is the one `ducer` wraps, so the bytes are those `ducer.Map.build`
//! gave (`tests/test_create_native.py` compares them).

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{Error, Kind};

/// The fst map of the keys `data[offsets[r]..offsets[r + 1]]` → `r` for each row `r` of
/// `rows` (little-endian i32 offsets, one more than the lookup's rows; little-endian u64
/// rows, their keys in sorted order).
pub fn build(data: &[u8], offsets: &[u8], rows: &[u8]) -> Result<Vec<u8>, Error> {
    let bad = |m: String| Error::new(Kind::Format, m);
    let offset = |i: usize| -> Result<usize, Error> {
        let b = offsets
            .get(4 * i..4 * i + 4)
            .ok_or_else(|| bad(format!("lookup row {i} has no offset")))?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]).max(0) as usize)
    };
    let mut map = fst::MapBuilder::memory();
    for r in rows.chunks_exact(8) {
        let mut le = [0u8; 8];
        le.copy_from_slice(r);
        let row = u64::from_le_bytes(le);
        let i = usize::try_from(row).map_err(|_| bad(format!("lookup row {row}")))?;
        let (start, end) = (offset(i)?, offset(i + 1)?);
        let key = data
            .get(start..end)
            .ok_or_else(|| bad(format!("lookup row {i}'s path is outside its column")))?;
        map.insert(key, row)
            .map_err(|e| bad(format!("building __trie__ failed: {e}")))?;
    }
    map.into_inner()
        .map_err(|e| bad(format!("building __trie__ failed: {e}")))
}

/// `build`, without the GIL.
#[pyfunction]
pub fn trie_build<'py>(
    py: Python<'py>,
    data: &[u8],
    offsets: &[u8],
    rows: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    let out = py.detach(|| build(data, offsets, rows))?;
    Ok(PyBytes::new(py, &out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_their_rows_and_order_is_checked() {
        let data = b"aabbc";
        let offs: Vec<u8> = [0i32, 2, 4, 5]
            .iter()
            .flat_map(|o| o.to_le_bytes())
            .collect();
        let rows: Vec<u8> = [0u64, 2].iter().flat_map(|r| r.to_le_bytes()).collect();
        let map = fst::Map::new(build(data, &offs, &rows).unwrap()).unwrap();
        assert_eq!(map.get(b"aa"), Some(0));
        assert_eq!(map.get(b"c"), Some(2));
        assert_eq!(map.get(b"bb"), None);
        let back: Vec<u8> = [2u64, 0].iter().flat_map(|r| r.to_le_bytes()).collect();
        assert!(build(data, &offs, &back).is_err());
        let far: Vec<u8> = 7u64.to_le_bytes().to_vec();
        assert!(build(data, &offs, &far).is_err());
    }
}
