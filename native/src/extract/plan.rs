//! Plan: from the lookup's rows to an ordered work list. The lookup's columns (each file's
//! rows checked as `Columns.file_at` checks them), the units of work (files in blob order, a
//! big file cut into runs of chunks; `fast.rs` plans `extract ARCHIVE -o DIR` itself).

use super::*;

pub(super) fn le64(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

pub(super) fn le64i(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

/// The lookup's columns, copied once per extract.
pub(super) struct Cols {
    pub(super) n: usize,
    pub(super) seq: Vec<u64>,
    pub(super) fdata: Vec<u64>,
    pub(super) compressed: Vec<u8>,
    pub(super) size: Vec<u64>,
    pub(super) blob_offset: Vec<u64>,
    pub(super) blob_size: Vec<u64>,
    pub(super) inner: Vec<u64>,
    pub(super) checksum: Vec<u8>,
    pub(super) path_offsets: Vec<u64>,
    pub(super) path_data: Vec<u8>,
}

impl Cols {
    pub(super) fn path(&self, row: usize) -> &[u8] {
        let (a, b) = (
            self.path_offsets[row] as usize,
            self.path_offsets[row + 1] as usize,
        );
        self.path_data.get(a..b).unwrap_or(b"")
    }

    pub(super) fn next_first(&self, row: usize) -> usize {
        let mut r = row + 1;
        while r < self.n && self.seq[r] != 0 {
            r += 1;
        }
        r
    }

    /// `Columns.file_at`: the rows of the file whose first row is `row`, each checked
    /// against the one before.
    pub(super) fn file_rows(&self, path: &str, row: usize) -> Result<std::ops::Range<usize>, Fail> {
        let bad = |m: String| Err(Fail::File(m));
        let p = py_repr(path);
        if row >= self.n {
            return bad(format!("__trie__ points {p} at row {row}, past the lookup"));
        }
        if self.seq[row] != 0 {
            return bad(format!(
                "__trie__ points {p} at row {row}, not a first chunk"
            ));
        }
        let key = self.path(row);
        if row > 0 && self.path(row - 1) == key {
            return bad(format!(
                "{p}: lookup row {} before its first chunk belongs to it too (chunks out of order)",
                row - 1
            ));
        }
        let mut end = self.next_first(row);
        while end < self.n && self.path(end) == key {
            end = self.next_first(end);
        }
        if (row..end).any(|r| self.path(r) != key) {
            return bad(format!("__trie__ points {p} at rows of another file"));
        }
        let mut offset = 0u64;
        for r in row..end {
            let (seq, at) = (self.seq[r], self.fdata[r]);
            if seq != (r - row) as u64 || at != offset {
                return bad(format!(
                    "{p}: chunk {seq} at {at}, expected chunk {} at {offset}",
                    r - row
                ));
            }
            if self.size[r] == 0 && end - row > 1 {
                return bad(format!("{p}: chunk {seq} of {} is empty", end - row));
            }
            offset = offset.saturating_add(self.size[r]);
        }
        Ok(row..end)
    }
}

impl Cols {
    /// The columns as `extract_files` takes them (little-endian buffers: `chunk_seq`,
    /// `fdata_offset`, `uncompressed_size`, `blob_offset`, `blob_size`, `inner_offset` as u64;
    /// `compressed` as u8; `checksum` 32 bytes a row; the path offsets as u64 and the path
    /// bytes), their lengths checked.
    pub(super) fn from_buffers(cols: &[Bound<'_, PyAny>]) -> PyResult<Cols> {
        let mut bufs = Vec::with_capacity(cols.len());
        for c in cols {
            bufs.push(buffer_vec(c)?);
        }
        if bufs.len() != 10 {
            return Err(crate::errors::Error::new(
                crate::errors::Kind::Format,
                "extract_files: ten columns expected",
            )
            .into());
        }
        let [seq, fdata, size, blob_offset, blob_size, inner, compressed, checksum, path_offsets, path_data]: [Vec<u8>; 10] =
            bufs.try_into().map_err(|_| crate::errors::Error::new(crate::errors::Kind::Format, "columns"))?;
        let n = compressed.len();
        let cols = Cols {
            n,
            seq: le64(&seq),
            fdata: le64(&fdata),
            compressed,
            size: le64(&size),
            blob_offset: le64(&blob_offset),
            blob_size: le64(&blob_size),
            inner: le64(&inner),
            checksum,
            path_offsets: le64(&path_offsets),
            path_data,
        };
        let sound = [
            &cols.seq,
            &cols.fdata,
            &cols.size,
            &cols.blob_offset,
            &cols.blob_size,
            &cols.inner,
        ]
        .iter()
        .all(|v| v.len() == n)
            && cols.checksum.len() == 32 * n
            && cols.path_offsets.len() == n + 1
            && cols.path_offsets.windows(2).all(|w| w[0] <= w[1])
            && cols
                .path_offsets
                .last()
                .is_some_and(|e| *e as usize <= cols.path_data.len());
        if !sound {
            return Err(crate::errors::Error::new(
                crate::errors::Kind::Format,
                "extract_files: the lookup's columns disagree in length",
            )
            .into());
        }
        Ok(cols)
    }
}

/// A unit of work: consecutive files `[a, b)`, or a run of chunks (lookup rows) of one big
/// file `k`, which several workers fill with positioned writes.
#[derive(Clone, Copy)]
pub(super) enum Unit {
    Files(usize, usize),
    Run(usize, usize, usize),
}

/// A file written in runs: its temporary (made by the first run to start), the runs still
/// to finish, the first problem, the bytes written.
#[derive(Default)]
pub(super) struct Split {
    pub(super) file: Option<(Arc<File>, OwnedFd, CString, CString)>,
    pub(super) tried: bool,
    pub(super) closed: bool,
    pub(super) left: usize,
    pub(super) problem: Option<Fail>,
    pub(super) bytes: u64,
}

/// Units of consecutive files: about `unit_bytes` (each file counted 4 KiB more) or
/// `unit_files` files, never cut between two files of one packed blob (decoded once). With
/// `split`, a file above `unit_bytes` of several chunks is cut into runs of chunks instead.
pub(super) fn units(
    job: &Job,
    items: &[Item<'_>],
    unit_bytes: u64,
    unit_files: usize,
    workers: usize,
) -> (Vec<Unit>, HashMap<usize, Mutex<Split>>) {
    let c = &job.cols;
    let pack_of = |row: usize| (row < c.n && c.compressed[row] != 0).then(|| c.blob_offset[row]);
    let sizes: Vec<u64> = items
        .iter()
        .map(|item| match item.row < c.n {
            true => c.size[item.row..c.next_first(item.row)].iter().sum(),
            false => 0,
        })
        .collect();
    // Two threads writing runs of one file wait for its inode lock: big files are cut only
    // when there are too few of them to keep every worker busy.
    let big = sizes.iter().filter(|s| **s > unit_bytes).count();
    let split = workers > 1 && big < workers;
    let mut out = Vec::new();
    let mut splits = HashMap::new();
    let (mut start, mut size) = (0usize, 0u64);
    for (k, item) in items.iter().enumerate() {
        let rows = match split && sizes[k] > unit_bytes {
            true => c
                .file_rows(&item.path, item.row)
                .ok()
                .filter(|r| r.len() > 1),
            false => None,
        };
        if let Some(rows) = rows {
            if k > start {
                out.push(Unit::Files(start, k));
            }
            let (mut from, mut held, mut runs) = (rows.start, 0u64, 0usize);
            for r in rows.clone() {
                held += c.size[r];
                if held >= unit_bytes || r + 1 == rows.end {
                    out.push(Unit::Run(k, from, r + 1));
                    runs += 1;
                    from = r + 1;
                    held = 0;
                }
            }
            let state = Split {
                left: runs,
                ..Split::default()
            };
            splits.insert(k, Mutex::new(state));
            start = k + 1;
            size = 0;
            continue;
        }
        if k > start {
            let full = size >= unit_bytes || k - start >= unit_files;
            let same = job.packed
                && pack_of(item.row).is_some()
                && pack_of(item.row) == pack_of(items[k - 1].row);
            if full && !same {
                out.push(Unit::Files(start, k));
                start = k;
                size = 0;
            }
        }
        size += sizes[k] + 4096;
    }
    if start < items.len() {
        out.push(Unit::Files(start, items.len()));
    }
    (out, splits)
}

#[cfg(test)]
mod tests {
    //! Plan: from the lookup's rows to an ordered work list. The lookup's columns (each file's
    //! rows checked as `Columns.file_at` checks them), the units of work (files in blob order, a
    //! big file cut into runs of chunks) and the plan of `extract ARCHIVE -o DIR` read without
    //! pyarrow (`cli/fast.py`).

    use super::*;

    /// Rows of files `a` (3 chunks), `b` (1 chunk); `mangle` edits them first.
    pub(super) fn cols(mangle: impl Fn(&mut Cols)) -> Cols {
        let paths: [&[u8]; 4] = [b"a", b"a", b"a", b"b"];
        let mut offsets = vec![0u64];
        let mut data = Vec::new();
        for p in paths {
            data.extend(p);
            offsets.push(data.len() as u64);
        }
        let mut c = Cols {
            n: 4,
            seq: vec![0, 1, 2, 0],
            fdata: vec![0, 10, 20, 0],
            compressed: vec![0; 4],
            size: vec![10, 10, 5, 7],
            blob_offset: vec![0, 10, 20, 25],
            blob_size: vec![10, 10, 5, 7],
            inner: vec![0; 4],
            checksum: vec![0; 128],
            path_offsets: offsets,
            path_data: data,
        };
        mangle(&mut c);
        c
    }

    pub(super) fn problem(c: &Cols, path: &str, row: usize) -> String {
        match c.file_rows(path, row) {
            Err(Fail::File(why)) => why,
            Ok(r) => format!("rows {r:?}"),
            Err(_) => "another failure".into(),
        }
    }

    #[test]
    pub(super) fn a_files_rows_are_checked_as_file_at_checks_them() {
        let good = cols(|_| {});
        assert_eq!(good.file_rows("a", 0).ok(), Some(0..3));
        assert_eq!(good.file_rows("b", 3).ok(), Some(3..4));
        assert_eq!(
            problem(&good, "a", 1),
            "__trie__ points 'a' at row 1, not a first chunk"
        );
        assert_eq!(
            problem(&good, "b", 9),
            "__trie__ points 'b' at row 9, past the lookup"
        );
        let gap = cols(|c| c.fdata[2] = 21);
        assert_eq!(
            problem(&gap, "a", 0),
            "'a': chunk 2 at 21, expected chunk 2 at 20"
        );
        let restart = cols(|c| c.seq[1] = 0); // a chunk_seq wrongly 0 inside `a`
        assert_eq!(
            problem(&restart, "a", 0),
            "'a': chunk 0 at 10, expected chunk 1 at 10"
        );
        let empty = cols(|c| c.size[1] = 0);
        assert_eq!(problem(&empty, "a", 0), "'a': chunk 1 of 3 is empty");
    }
}
