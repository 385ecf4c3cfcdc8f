//! FORMAT §4's digests of many files at once (issue 33, item 5), without the GIL: each file's
//! digest from its chunks' BLAKE3s (`format/files.py` `file_digests`: the `files` view,
//! signing, the catalog's `add`) and the root over every path and file digest
//! (`root_digest`). The columns come in as the Arrow arrays' own buffers; the digests go out as
//! one `bytes` of 32 bytes a file, which pyarrow wraps as a `binary(32)` array.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{Error, Kind};
use crate::git::Bytes;

/// Paths as an Arrow (large) binary column: `data[offsets[i]..offsets[i + 1]]`.
struct Paths<'a> {
    offsets: Vec<i64>,
    data: &'a [u8],
}

fn bad(what: impl Into<String>) -> Error {
    Error::new(Kind::Format, what)
}

fn int64s(buf: &[u8], what: &str) -> Result<Vec<i64>, Error> {
    if !buf.len().is_multiple_of(8) {
        return Err(bad(format!("{what}: not 64-bit integers")));
    }
    Ok(buf
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect())
}

impl<'a> Paths<'a> {
    fn new(offsets: &[u8], data: &'a [u8], n: usize) -> Result<Paths<'a>, Error> {
        let offsets = int64s(offsets, "path offsets")?;
        let sound = offsets.len() == n + 1
            && offsets.windows(2).all(|w| 0 <= w[0] && w[0] <= w[1])
            && offsets
                .last()
                .is_none_or(|e| *e as u64 <= data.len() as u64);
        if !sound {
            return Err(bad("path offsets do not fit the path bytes"));
        }
        Ok(Paths { offsets, data })
    }

    fn get(&self, i: usize) -> &'a [u8] {
        &self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

/// Each file's digest: file `i` is rows `starts[i]..starts[i + 1]` (the last up to `rows`);
/// `seqs` the rows' `chunk_seq` (None: each row's place in its file), `sums` 32 bytes a row.
fn file_digests(
    prefix: &[u8],
    paths: &Paths<'_>,
    sums: &[u8],
    starts: &[i64],
    seqs: Option<&[i64]>,
) -> Result<Vec<u8>, Error> {
    let rows = sums.len() / 32;
    let n = starts.len();
    let sound = sums.len().is_multiple_of(32)
        && seqs.is_none_or(|s| s.len() == rows)
        && starts.windows(2).all(|w| w[0] <= w[1])
        && starts.first().is_none_or(|s| *s >= 0)
        && starts.last().is_none_or(|s| *s as u64 <= rows as u64);
    if !sound {
        return Err(bad("file starts do not fit the chunk rows"));
    }
    let mut out = Vec::with_capacity(32 * n);
    let mut msg = Vec::with_capacity(256);
    for i in 0..n {
        let (a, b) = (
            starts[i] as usize,
            starts.get(i + 1).map_or(rows, |e| *e as usize),
        );
        msg.clear();
        msg.extend_from_slice(prefix);
        msg.extend_from_slice(paths.get(i));
        msg.push(0);
        msg.extend_from_slice(&((b - a) as u32).to_le_bytes());
        for r in a..b {
            let seq = seqs.map_or((r - a) as i64, |s| s[r]);
            msg.extend_from_slice(&(seq as u32).to_le_bytes());
            msg.extend_from_slice(&sums[32 * r..32 * r + 32]);
        }
        out.extend_from_slice(blake3::hash(&msg).as_bytes());
    }
    Ok(out)
}

/// BLAKE3 over `tag`, then every path, NUL and file digest.
fn root(tag: &[u8], paths: &Paths<'_>, digests: &[u8]) -> Result<[u8; 32], Error> {
    let n = paths.offsets.len() - 1;
    if digests.len() != 32 * n {
        return Err(bad("not one 32-byte digest a path"));
    }
    // one contiguous message: BLAKE3 hashes it many chunks at a time (SIMD), where small
    // updates would go one chunk at a time
    let mut all = Vec::with_capacity(tag.len() + paths.data.len() + 33 * n);
    all.extend_from_slice(tag);
    for i in 0..n {
        all.extend_from_slice(paths.get(i));
        all.push(0);
        all.extend_from_slice(&digests[32 * i..32 * i + 32]);
    }
    Ok(*blake3::hash(&all).as_bytes())
}

/// `format/files.py` `file_digests`: the digest of each file, concatenated. Buffers: path
/// offsets (int64 LE, one more than the files), path bytes, checksums (32 bytes a row),
/// starts (int64 LE, a file's first row), seqs (int64 LE a row, or None).
#[pyfunction]
#[pyo3(signature = (prefix, offsets, data, sums, starts, seqs=None))]
pub fn file_digests_many<'py>(
    py: Python<'py>,
    prefix: &[u8],
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    sums: &Bound<'py, PyAny>,
    starts: &Bound<'py, PyAny>,
    seqs: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let held = [offsets, data, sums, starts]
        .into_iter()
        .map(Bytes::of)
        .collect::<PyResult<Vec<_>>>()?;
    let seqs = seqs.map(Bytes::of).transpose()?;
    let prefix = prefix.to_vec();
    let out = py.detach(|| -> Result<Vec<u8>, Error> {
        let starts = int64s(held[3].as_slice(), "file starts")?;
        let paths = Paths::new(held[0].as_slice(), held[1].as_slice(), starts.len())?;
        let seqs = seqs
            .as_ref()
            .map(|s| int64s(s.as_slice(), "chunk_seq"))
            .transpose()?;
        file_digests(
            &prefix,
            &paths,
            held[2].as_slice(),
            &starts,
            seqs.as_deref(),
        )
    })?;
    Ok(PyBytes::new(py, &out))
}

/// `format/files.py` `root_digest` of paths (offsets and bytes, as above) and their digests.
#[pyfunction]
pub fn root_digest<'py>(
    py: Python<'py>,
    tag: &[u8],
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    digests: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let held = [offsets, data, digests]
        .into_iter()
        .map(Bytes::of)
        .collect::<PyResult<Vec<_>>>()?;
    let tag = tag.to_vec();
    let out = py.detach(|| -> Result<[u8; 32], Error> {
        let n = held[0].as_slice().len() / 8;
        let paths = Paths::new(held[0].as_slice(), held[1].as_slice(), n.saturating_sub(1))?;
        root(&tag, &paths, held[2].as_slice())
    })?;
    Ok(PyBytes::new(py, &out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(file_digests_many, m)?)?;
    m.add_function(wrap_pyfunction!(root_digest, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(v: &[i64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn a_file_digest_is_format_4s() {
        let offsets = le(&[0, 1, 3]);
        let paths = Paths::new(&offsets, b"abc", 2).unwrap();
        let sums: Vec<u8> = (0..3u8).flat_map(|i| [i; 32]).collect();
        let got = file_digests(b"P", &paths, &sums, &[0, 1], None).unwrap();
        let mut one = b"Pa\0".to_vec();
        one.extend_from_slice(&1u32.to_le_bytes());
        one.extend_from_slice(&0u32.to_le_bytes());
        one.extend_from_slice(&[0; 32]);
        let mut two = b"Pbc\0".to_vec();
        two.extend_from_slice(&2u32.to_le_bytes());
        for (k, s) in [(0u32, 1u8), (1, 2)] {
            two.extend_from_slice(&k.to_le_bytes());
            two.extend_from_slice(&[s; 32]);
        }
        let want: Vec<u8> = [one, two]
            .iter()
            .flat_map(|m| *blake3::hash(m).as_bytes())
            .collect();
        assert_eq!(got, want);
        let seqs = [0, 0, 7];
        let other = file_digests(b"P", &paths, &sums, &[0, 1], Some(&seqs)).unwrap();
        assert_eq!(other[..32], got[..32]);
        assert_ne!(other[32..], got[32..]);
        assert!(file_digests(b"P", &paths, &sums, &[0, 4], None).is_err());
        assert!(Paths::new(&le(&[0, 4]), b"abc", 1).is_err());
        let r = root(b"T", &paths, &got).unwrap();
        let mut all = b"Ta\0".to_vec();
        all.extend_from_slice(&got[..32]);
        all.extend_from_slice(b"bc\0");
        all.extend_from_slice(&got[32..]);
        assert_eq!(r, *blake3::hash(&all).as_bytes());
        assert!(root(b"T", &paths, &got[..32]).is_err());
    }
}
