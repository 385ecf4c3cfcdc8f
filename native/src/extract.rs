//! `Archive.extract`'s per-file work (issue 33, item 3; docs/design.md, "The native core"):
//! Python plans which files go where and hands their first lookup rows over; the core checks
//! each file's rows, reads its blobs (`pread` of a local archive, or a Python callable for a
//! remote or relaid source), decodes the frames (a pack once per unit, members sliced at
//! `inner_offset`; a big chunk streamed in pieces), checks every chunk's BLAKE3 and writes
//! the file through directory-relative opens into `.NAME.znippy-part-PID`, renamed over NAME
//! only when complete (`read/partfile.py` describes the temporaries).
//!
//! Per-file failures come back as their problem, worded as the Python reader words them; a
//! write the destination refuses for good (disk full, read-only) stops the extract.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::frame::{self, Shape};
use crate::lookup::{py_repr, MAX_CHUNK_BYTES};

/// A compressed chunk that decodes to more than this is streamed (`codec.STREAM_BYTES`).
const STREAM_BYTES: u64 = 64 << 20;
/// Pieces of a streamed chunk, or of a raw one (`codec.PIECE_BYTES`).
const PIECE_BYTES: usize = 8 << 20;
/// A worker keeps its last decoded packs up to this many bytes (and the one in use).
const PACK_CACHE_BYTES: usize = 64 << 20;
/// `partfile.SUFFIX`
const SUFFIX: &str = ".znippy-part-";
const NAME_MAX: usize = 255;
/// `posix.PRESERVED_BITS`: never setuid/setgid
const PRESERVED_BITS: u32 = 0o1777;
const FATAL: [i32; 4] = [libc::ENOSPC, libc::EROFS, libc::EDQUOT, libc::EFBIG];
/// outcome of a file not attempted (the extract stopped first)
const NOT_DONE: i64 = -2;
const FAILED: i64 = -1;

/// Why a file was not written.
enum Fail {
    /// its problem (a damaged row, blob or frame, a write refused): reported, the rest goes on
    File(String),
    /// a write the destination refuses for good: the extract stops
    Fatal(String),
    /// Ctrl-C
    Stopped,
}

fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

fn write_fail(e: std::io::Error) -> Fail {
    let why = format!("cannot write: {}", strerror(&e));
    match e.raw_os_error() {
        Some(code) if FATAL.contains(&code) => Fail::Fatal(why),
        _ => Fail::File(why),
    }
}

fn last_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn cstr(b: &[u8]) -> Result<CString, Fail> {
    CString::new(b).map_err(|_| Fail::File("cannot write: a NUL byte in its name".into()))
}

fn le64(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

fn le64i(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

/// The lookup's columns, copied once per extract.
struct Cols {
    n: usize,
    seq: Vec<u64>,
    fdata: Vec<u64>,
    compressed: Vec<u8>,
    size: Vec<u64>,
    blob_offset: Vec<u64>,
    blob_size: Vec<u64>,
    inner: Vec<u64>,
    checksum: Vec<u8>,
    path_offsets: Vec<u64>,
    path_data: Vec<u8>,
}

impl Cols {
    fn path(&self, row: usize) -> &[u8] {
        let (a, b) = (
            self.path_offsets[row] as usize,
            self.path_offsets[row + 1] as usize,
        );
        self.path_data.get(a..b).unwrap_or(b"")
    }

    fn next_first(&self, row: usize) -> usize {
        let mut r = row + 1;
        while r < self.n && self.seq[r] != 0 {
            r += 1;
        }
        r
    }

    /// `Columns.file_at`: the rows of the file whose first row is `row`, each checked
    /// against the one before.
    fn file_rows(&self, path: &str, row: usize) -> Result<std::ops::Range<usize>, Fail> {
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

/// Where the blobs come from.
enum Source {
    /// a local archive, read with `pread`
    Local(File),
    /// `fetch(offsets, sizes) -> list of buffers`: a unit's blobs at once (a remote source
    /// prefetches them coalesced)
    Python(Py<PyAny>),
}

/// A unit's blobs fetched by Python: blob offset → bytes.
type Fetched = HashMap<(u64, u64), Vec<u8>>;

fn py_problem(py: Python<'_>, e: PyErr) -> String {
    let v = e.value(py);
    match v.getattr("problem").and_then(|p| p.extract::<String>()) {
        Ok(p) => p,
        Err(_) => v.to_string(),
    }
}

fn buffer_vec(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    PyBuffer::<u8>::get(obj)?.to_vec(obj.py())
}

/// One extract's shared state.
struct Job {
    cols: Cols,
    tail: u64,
    packed: bool,
    source: Source,
    /// `decode(frame, n) -> buffer`: a frame of another shape (n = -1: as it declares)
    decode: Py<PyAny>,
    root: OwnedFd,
    replace: bool,
    pid: u32,
    interrupt: AtomicBool,
    halt: AtomicBool,
    bytes_read: AtomicU64,
    done_files: AtomicU64,
    done_bytes: AtomicU64,
    /// what the Python source raised: the extract ends with it
    raised: Mutex<Option<PyErr>>,
}

/// One file to write.
struct Item<'a> {
    /// its place in the caller's list (the items are worked in blob order)
    k: usize,
    path: String,
    name: &'a [u8],
    row: usize,
    mode: i64,
    mtime: i64,
}

/// A worker's state: its open directory and its last decoded pack.
/// A worker's zstd context, made at its first frame.
type Dctx = Option<zstd::bulk::Decompressor<'static>>;

struct Worker {
    dctx: Dctx,
    dir: Option<(Vec<u8>, OwnedFd)>,
    /// the last decoded packs, newest last (the members of a pack need not be neighbours in
    /// path order: a directory pack's jars between another pack's POMs)
    packs: Vec<((u64, u64), Vec<u8>)>,
    fetched: Fetched,
}

fn open_dir_at(parent: RawFd, comp: &[u8]) -> std::io::Result<OwnedFd> {
    let c = CString::new(comp).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    for _ in 0..2 {
        // SAFETY: `c` is a NUL-terminated name, `parent` an open directory descriptor.
        let fd = unsafe { libc::openat(parent, c.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: `fd` was just opened and is owned by nothing else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = last_error();
        if e.raw_os_error() != Some(libc::ENOENT) {
            return Err(e);
        }
        // SAFETY: as above; a missing directory is made (0o777 under umask, as makedirs)
        if unsafe { libc::mkdirat(parent, c.as_ptr(), 0o777) } != 0 {
            let e = last_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(e);
            }
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::ENOENT))
}

impl Job {
    fn read(&self, w: &Worker, offset: u64, size: u64) -> Result<Vec<u8>, String> {
        match &self.source {
            Source::Local(f) => {
                let mut buf = vec![0u8; size as usize];
                f.read_exact_at(&mut buf, offset)
                    .map_err(|e| format!("cannot read the archive: {}", strerror(&e)))?;
                self.bytes_read.fetch_add(size, Ordering::Relaxed);
                Ok(buf)
            }
            Source::Python(_) => w
                .fetched
                .get(&(offset, size))
                .cloned()
                .ok_or_else(|| format!("blob [{offset}, {}) was not fetched", offset + size)),
        }
    }

    /// Decode `frame` (a chunk of `n` bytes, or, `n` None, what the frame declares).
    /// Decode `frame` (a chunk of `n` bytes, or, `n` None, what the frame declares); a zstd
    /// frame of our shape with the worker's context `dctx` (made once: a context per frame
    /// would allocate and clear its window each time).
    fn decode(
        &self,
        dctx: Option<&mut Dctx>,
        frame: Vec<u8>,
        n: Option<u64>,
    ) -> Result<Vec<u8>, String> {
        let want = n.or_else(|| frame::declared(&frame));
        if let Some(want) = want {
            let head = &frame[..frame.len().min(64)];
            match (frame::parse(head, frame.len(), want), dctx) {
                (Some(Shape::Zstd(pos)), Some(dctx)) => {
                    if dctx.is_none() {
                        *dctx = Some(
                            zstd::bulk::Decompressor::new()
                                .map_err(|e| format!("no zstd context ({e})"))?,
                        );
                    }
                    let out = dctx
                        .as_mut()
                        .ok_or("no zstd context")?
                        .decompress(&frame[pos..], want as usize)
                        .map_err(|e| format!("not a valid zstd frame ({e})"))?;
                    if out.len() as u64 != want {
                        return Err(format!("decoded {} bytes, index says {want}", out.len()));
                    }
                    return Ok(out);
                }
                (Some(shape), _) => return frame::decode(&frame, shape, want, u64::MAX),
                (None, _) => {}
            }
        }
        Python::attach(|py| {
            let got = self
                .decode
                .call1(
                    py,
                    (PyBytes::new(py, &frame), n.map_or(-1i64, |v| v as i64)),
                )
                .map_err(|e| py_problem(py, e))?;
            buffer_vec(got.bind(py)).map_err(|e| py_problem(py, e))
        })
    }

    fn dir(&self, w: &mut Worker, rel: &[u8]) -> std::io::Result<RawFd> {
        if let Some((r, fd)) = &w.dir {
            if r == rel {
                return Ok(fd.as_raw_fd());
            }
        }
        w.dir = None;
        let mut cur: Option<OwnedFd> = None;
        if !rel.is_empty() {
            for comp in rel.split(|b| *b == b'/') {
                let parent = cur
                    .as_ref()
                    .map_or(self.root.as_raw_fd(), |f| f.as_raw_fd());
                cur = Some(open_dir_at(parent, comp)?);
            }
        }
        let fd = match cur {
            Some(fd) => fd,
            None => self.root.try_clone()?,
        };
        let raw = fd.as_raw_fd();
        w.dir = Some((rel.to_vec(), fd));
        Ok(raw)
    }

    fn tmp_name(&self, name: &[u8]) -> Vec<u8> {
        let suffix = format!("{SUFFIX}{}", self.pid);
        let mut out = vec![b'.'];
        if name.len() + suffix.len() + 1 > NAME_MAX {
            // a name too long for the file system gets a short hashed one, still recognisable
            out.extend(blake3::hash(name).to_hex().as_bytes()[..32].iter());
        } else {
            out.extend(name);
        }
        out.extend(suffix.as_bytes());
        out
    }

    /// A new temporary `tmp` in `dir` (`O_EXCL`, never through a symlink); one of this
    /// process left by an earlier failure is replaced.
    fn create(&self, dir: RawFd, tmp: &CString) -> Result<File, Fail> {
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: NUL-terminated names relative to an open directory descriptor.
        let mut fd = unsafe { libc::openat(dir, tmp.as_ptr(), flags, 0o644 as libc::c_uint) };
        if fd < 0 && last_error().raw_os_error() == Some(libc::EEXIST) {
            unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
            fd = unsafe { libc::openat(dir, tmp.as_ptr(), flags, 0o644 as libc::c_uint) };
        }
        if fd < 0 {
            return Err(write_fail(last_error()));
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Write one file; its size.
    fn write_file(&self, w: &mut Worker, item: &Item<'_>) -> Result<u64, Fail> {
        let rows = self.cols.file_rows(&item.path, item.row)?;
        let (rel, name) = match item.name.iter().rposition(|b| *b == b'/') {
            Some(at) => (&item.name[..at], &item.name[at + 1..]),
            None => (&b""[..], item.name),
        };
        let dir = self.dir(w, rel).map_err(write_fail)?;
        let tmp = cstr(&self.tmp_name(name))?;
        let final_name = cstr(name)?;
        let file = self.create(dir, &tmp)?;
        let result = self
            .fill(w, item, rows, &file)
            .and_then(|n| self.finish(&file, item).map(|_| n));
        drop(file);
        let result = result.and_then(|n| self.place(dir, &tmp, &final_name).map(|_| n));
        if result.is_err() {
            // SAFETY: as above; nothing is left under either name
            unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
        }
        result
    }

    /// Mode and mtime (`--preserve`) on the descriptor, before the rename.
    fn finish(&self, file: &File, item: &Item<'_>) -> Result<(), Fail> {
        if item.mode >= 0 {
            // SAFETY: an open descriptor
            if unsafe { libc::fchmod(file.as_raw_fd(), item.mode as u32 & PRESERVED_BITS) } != 0 {
                return Err(write_fail(last_error()));
            }
        }
        if item.mtime != i64::MIN {
            let t = libc::timespec {
                tv_sec: item.mtime.div_euclid(1_000_000_000) as libc::time_t,
                tv_nsec: item.mtime.rem_euclid(1_000_000_000) as libc::c_long,
            };
            let times = [t, t];
            // SAFETY: an open descriptor and two timespecs
            if unsafe { libc::futimens(file.as_raw_fd(), times.as_ptr()) } != 0 {
                return Err(write_fail(last_error()));
            }
        }
        Ok(())
    }

    /// The temporary under its final name: replacing what is there, or (`replace` false)
    /// never (a hard link, atomic; a file system without them: a check and a rename).
    fn place(&self, dir: RawFd, tmp: &CString, name: &CString) -> Result<(), Fail> {
        // SAFETY (every call here): NUL-terminated names relative to an open directory.
        if self.replace {
            if unsafe { libc::renameat(dir, tmp.as_ptr(), dir, name.as_ptr()) } != 0 {
                return Err(write_fail(last_error()));
            }
            return Ok(());
        }
        if unsafe { libc::linkat(dir, tmp.as_ptr(), dir, name.as_ptr(), 0) } == 0 {
            unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
            return Ok(());
        }
        let e = last_error();
        if e.raw_os_error() == Some(libc::EEXIST) {
            return Err(write_fail(e));
        }
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        if unsafe {
            libc::fstatat(
                dir,
                name.as_ptr(),
                st.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        } == 0
        {
            return Err(write_fail(std::io::Error::from_raw_os_error(libc::EEXIST)));
        }
        if unsafe { libc::renameat(dir, tmp.as_ptr(), dir, name.as_ptr()) } != 0 {
            return Err(write_fail(last_error()));
        }
        Ok(())
    }

    fn stopped(&self) -> bool {
        self.interrupt.load(Ordering::Relaxed)
    }

    /// Every chunk of the file, decoded, checked and written in order; the bytes written.
    fn fill(
        &self,
        w: &mut Worker,
        item: &Item<'_>,
        rows: std::ops::Range<usize>,
        file: &File,
    ) -> Result<u64, Fail> {
        let c = &self.cols;
        let p = py_repr(&item.path);
        let mut total = 0u64;
        let out = &mut Out {
            file,
            buf: Vec::new(),
            at: 0,
        };
        for r in rows {
            if self.stopped() {
                return Err(Fail::Stopped);
            }
            let here = format!("{p} chunk {}: ", c.seq[r]);
            let mut pos = c.fdata[r];
            let bad = |m: String| Fail::File(format!("{here}{m}"));
            let (b, s, u) = (c.blob_offset[r], c.blob_size[r], c.size[r]);
            let end = b.checked_add(s);
            if end.is_none_or(|e| e > self.tail) {
                return Err(bad(format!(
                    "blob [{b}, {}) runs into the index tail at {}",
                    b as u128 + s as u128,
                    self.tail
                )));
            }
            let sum = &c.checksum[r * 32..r * 32 + 32];
            let compressed = c.compressed[r] != 0;
            let mut hasher = blake3::Hasher::new();
            if compressed && self.packed {
                let key = (b, s);
                if let Some(at) = w.packs.iter().position(|(k, _)| *k == key) {
                    let hit = w.packs.remove(at);
                    w.packs.push(hit);
                } else {
                    let frame = self.read(w, b, s).map_err(&bad)?;
                    let declared = match frame::declared(&frame) {
                        Some(n)
                            if frame::parse(&frame[..frame.len().min(64)], frame.len(), n)
                                .is_some() =>
                        {
                            Some(n)
                        }
                        _ => None,
                    };
                    if let Some(n) = declared.filter(|n| *n > MAX_CHUNK_BYTES) {
                        return Err(bad(format!(
                            "blob declares {n} bytes, more than the {MAX_CHUNK_BYTES}-byte limit"
                        )));
                    }
                    let data = self
                        .decode(Some(&mut w.dctx), frame, declared)
                        .map_err(&bad)?;
                    // bounded: at most PACK_CACHE_BYTES of decoded packs besides this one
                    let mut held = 0;
                    for i in (0..w.packs.len()).rev() {
                        held += w.packs[i].1.len();
                        if held > PACK_CACHE_BYTES {
                            w.packs.drain(..=i);
                            break;
                        }
                    }
                    w.packs.push((key, data));
                }
                let data = &w
                    .packs
                    .last()
                    .map(|(_, d)| d)
                    .ok_or_else(|| bad("no pack".into()))?;
                let inner = c.inner[r];
                let stop = inner.saturating_add(u);
                if stop > data.len() as u64 {
                    return Err(bad(format!(
                        "slice [{inner}, {stop}) lies outside its decoded blob of {} bytes",
                        data.len()
                    )));
                }
                let piece = &data[inner as usize..stop as usize];
                hasher.update(piece);
                if hasher.finalize().as_bytes() != sum {
                    return Err(Fail::File(format!("{here}BLAKE3 mismatch")));
                }
                out.put(piece, &mut pos)?;
            } else if compressed {
                if u > MAX_CHUNK_BYTES {
                    return Err(bad(format!(
                        "size {u} exceeds the {MAX_CHUNK_BYTES}-byte chunk limit"
                    )));
                }
                if u > STREAM_BYTES && matches!(self.source, Source::Local(_)) {
                    self.stream(r, &mut hasher, out, &mut pos, &bad)?;
                    if hasher.finalize().as_bytes() != sum {
                        return Err(Fail::File(format!("{here}BLAKE3 mismatch")));
                    }
                } else {
                    let frame = self.read(w, b, s).map_err(&bad)?;
                    let data = self
                        .decode(Some(&mut w.dctx), frame, Some(u))
                        .map_err(&bad)?;
                    if data.len() as u64 != u {
                        return Err(bad(format!("decoded {} bytes, index says {u}", data.len())));
                    }
                    hasher.update(&data);
                    if hasher.finalize().as_bytes() != sum {
                        return Err(Fail::File(format!("{here}BLAKE3 mismatch")));
                    }
                    out.put(&data, &mut pos)?;
                }
            } else {
                if s != u {
                    return Err(bad(format!("raw blob is {s} bytes, index says {u}")));
                }
                let mut at = 0u64;
                while at < s {
                    if self.stopped() {
                        return Err(Fail::Stopped);
                    }
                    let n = (s - at).min(PIECE_BYTES as u64);
                    let piece = self.read(w, b + at, n).map_err(&bad)?;
                    hasher.update(&piece);
                    out.put(&piece, &mut pos)?;
                    at += n;
                }
                if hasher.finalize().as_bytes() != sum {
                    return Err(Fail::File(format!("{here}BLAKE3 mismatch")));
                }
            }
            total += u;
        }
        out.flush()?;
        Ok(total)
    }

    /// A big compressed chunk of a local archive decoded in pieces (memory bounded by a
    /// piece and the zstd window), its BLAKE3 checked after the last: the file is a
    /// temporary until then.
    fn stream(
        &self,
        r: usize,
        hasher: &mut blake3::Hasher,
        out: &mut Out<'_>,
        pos: &mut u64,
        bad: &dyn Fn(String) -> Fail,
    ) -> Result<(), Fail> {
        let c = &self.cols;
        let (b, s, u) = (c.blob_offset[r], c.blob_size[r], c.size[r]);
        let Source::Local(f) = &self.source else {
            return Err(bad("not a local archive".into()));
        };
        let mut head = vec![0u8; s.min(64) as usize];
        f.read_exact_at(&mut head, b)
            .map_err(|e| bad(format!("cannot read the archive: {}", strerror(&e))))?;
        let shape = frame::parse(&head, s as usize, u);
        let start = match shape {
            Some(Shape::Zstd(pos)) => pos as u64,
            Some(Shape::Stored(pos)) => pos as u64,
            None => {
                // another shape: decoded whole by the binding (as big as the chunk)
                let frame = self.read_plain(b, s).map_err(bad)?;
                let data = self.decode(None, frame, Some(u)).map_err(bad)?;
                hasher.update(&data);
                out.put(&data, pos)?;
                return Ok(());
            }
        };
        let reader = Ranged {
            file: f,
            at: b + start,
            end: b + s,
        };
        let mut input: Box<dyn Read> = match shape {
            Some(Shape::Zstd(_)) => Box::new(
                zstd::stream::read::Decoder::new(reader)
                    .map_err(|e| bad(format!("not a valid zstd frame ({e})")))?,
            ),
            _ => Box::new(reader),
        };
        let mut buf = vec![0u8; PIECE_BYTES];
        let mut got = 0u64;
        loop {
            if self.stopped() {
                return Err(Fail::Stopped);
            }
            let mut filled = 0;
            while filled < buf.len() {
                let n = input
                    .read(&mut buf[filled..])
                    .map_err(|e| bad(format!("not a valid zstd frame ({e})")))?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            if filled == 0 {
                break;
            }
            got += filled as u64;
            if got > u {
                return Err(bad(format!(
                    "decoded more than the {u} bytes the index says"
                )));
            }
            hasher.update(&buf[..filled]);
            out.put(&buf[..filled], pos)?;
        }
        self.bytes_read.fetch_add(s, Ordering::Relaxed);
        if got != u {
            return Err(bad(format!("decoded {got} bytes, index says {u}")));
        }
        Ok(())
    }

    fn read_plain(&self, offset: u64, size: u64) -> Result<Vec<u8>, String> {
        let Source::Local(f) = &self.source else {
            return Err("not a local archive".into());
        };
        let mut buf = vec![0u8; size as usize];
        f.read_exact_at(&mut buf, offset)
            .map_err(|e| format!("cannot read the archive: {}", strerror(&e)))?;
        self.bytes_read.fetch_add(size, Ordering::Relaxed);
        Ok(buf)
    }
}

/// Many small chunks (a jar cut into its entries) are written in one `pwrite` of up to
/// this many bytes.
const WRITE_BYTES: usize = 1 << 20;

/// A file's bytes written at their positions (runs of one file are written by several
/// workers), neighbouring small pieces gathered into one write.
struct Out<'f> {
    file: &'f File,
    buf: Vec<u8>,
    at: u64,
}

impl Out<'_> {
    /// `data` written at `*pos`, `*pos` moved past it.
    fn put(&mut self, data: &[u8], pos: &mut u64) -> Result<(), Fail> {
        let next = self.at + self.buf.len() as u64;
        if !self.buf.is_empty() && (next != *pos || self.buf.len() + data.len() > WRITE_BYTES) {
            self.flush()?;
        }
        if data.len() >= WRITE_BYTES {
            self.file.write_all_at(data, *pos).map_err(write_fail)?;
        } else {
            if self.buf.is_empty() {
                self.at = *pos;
            }
            self.buf.extend_from_slice(data);
        }
        *pos += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Fail> {
        if !self.buf.is_empty() {
            self.file
                .write_all_at(&self.buf, self.at)
                .map_err(write_fail)?;
            self.buf.clear();
        }
        Ok(())
    }
}

/// `[at, end)` of a local file as a reader.
struct Ranged<'f> {
    file: &'f File,
    at: u64,
    end: u64,
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

/// What one worker reports: each file's outcome and the problems.
#[derive(Default)]
struct Reported {
    outcomes: Vec<(usize, i64)>,
    problems: Vec<(usize, String)>,
    fatal: Option<(usize, String)>,
}

/// A unit of work: consecutive files `[a, b)`, or a run of chunks (lookup rows) of one big
/// file `k`, which several workers fill with positioned writes.
#[derive(Clone, Copy)]
enum Unit {
    Files(usize, usize),
    Run(usize, usize, usize),
}

/// A file written in runs: its temporary (made by the first run to start), the runs still
/// to finish, the first problem, the bytes written.
#[derive(Default)]
struct Split {
    file: Option<(Arc<File>, OwnedFd, CString, CString)>,
    tried: bool,
    closed: bool,
    left: usize,
    problem: Option<Fail>,
    bytes: u64,
}

/// Units of consecutive files: about `unit_bytes` (each file counted 4 KiB more) or
/// `unit_files` files, never cut between two files of one packed blob (decoded once). With
/// `split`, a file above `unit_bytes` of several chunks is cut into runs of chunks instead.
fn units(
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Job {
    /// The blobs of a unit's files, fetched by Python at once (a remote source).
    fn fetch(
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

    /// Count a file's outcome; false when the extract must stop.
    fn tally(&self, rep: &mut Reported, k: usize, got: Result<u64, Fail>) -> bool {
        match got {
            Ok(n) => {
                rep.outcomes.push((k, n as i64));
                self.done_files.fetch_add(1, Ordering::Relaxed);
                self.done_bytes.fetch_add(n, Ordering::Relaxed);
            }
            Err(Fail::File(why)) => {
                rep.outcomes.push((k, FAILED));
                rep.problems.push((k, why));
                self.done_files.fetch_add(1, Ordering::Relaxed);
            }
            Err(Fail::Fatal(why)) => {
                rep.outcomes.push((k, FAILED));
                rep.problems.push((k, why.clone()));
                rep.fatal = Some((k, why));
                self.halt.store(true, Ordering::Relaxed);
                return false;
            }
            Err(Fail::Stopped) => return false,
        }
        true
    }

    /// The temporary a big file's runs fill: its rows checked, created empty.
    fn create_split(
        &self,
        w: &mut Worker,
        item: &Item<'_>,
    ) -> Result<(Arc<File>, OwnedFd, CString, CString), Fail> {
        self.cols.file_rows(&item.path, item.row)?;
        let (rel, name) = match item.name.iter().rposition(|b| *b == b'/') {
            Some(at) => (&item.name[..at], &item.name[at + 1..]),
            None => (&b""[..], item.name),
        };
        let raw = self.dir(w, rel).map_err(write_fail)?;
        let dir = w
            .dir
            .as_ref()
            .filter(|(_, fd)| fd.as_raw_fd() == raw)
            .map(|(_, fd)| fd.try_clone())
            .ok_or_else(|| Fail::File("cannot write: its directory went".into()))?
            .map_err(write_fail)?;
        let tmp = cstr(&self.tmp_name(name))?;
        let file = self.create(dir.as_raw_fd(), &tmp)?;
        Ok((Arc::new(file), dir, tmp, cstr(name)?))
    }

    /// One run of a big file; its outcome when it was the file's last run.
    fn run(
        &self,
        w: &mut Worker,
        item: &Item<'_>,
        rows: std::ops::Range<usize>,
        split: &Mutex<Split>,
    ) -> Option<Result<u64, Fail>> {
        let file = {
            let mut st = lock(split);
            if !st.tried {
                st.tried = true;
                match self.create_split(w, item) {
                    Ok(f) => st.file = Some(f),
                    Err(e) => st.problem = Some(e),
                }
            }
            match &st.problem {
                None => st.file.as_ref().map(|f| f.0.clone()),
                Some(_) => None,
            }
        };
        let got = file.map(|f| self.fill(w, item, rows, &f));
        let mut st = lock(split);
        if st.closed {
            return None; // its outcome was given already (a run stopped or failed for good)
        }
        st.left = st.left.saturating_sub(1);
        match got {
            Some(Ok(n)) => st.bytes += n,
            Some(Err(e)) if st.problem.is_none() => st.problem = Some(e),
            _ => {}
        }
        if st.left > 0 && !matches!(st.problem, Some(Fail::Fatal(_) | Fail::Stopped)) {
            return None;
        }
        st.closed = true;
        let problem = st.problem.take().map(Err);
        let done = st.file.take();
        let bytes = st.bytes;
        drop(st);
        let (file, dir, tmp, name) = match done {
            Some(d) => d,
            None => return Some(problem.unwrap_or(Err(Fail::Stopped))),
        };
        let result = match problem {
            Some(e) => e,
            None => self
                .finish(&file, item)
                .and_then(|_| self.place(dir.as_raw_fd(), &tmp, &name))
                .map(|_| bytes),
        };
        drop(file);
        if result.is_err() {
            // SAFETY: NUL-terminated name relative to an open directory
            unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
        }
        Some(result)
    }

    fn work(
        &self,
        items: &[Item<'_>],
        units: &[Unit],
        splits: &HashMap<usize, Mutex<Split>>,
        next: &AtomicUsize,
    ) -> Reported {
        let mut w = Worker {
            dctx: None,
            dir: None,
            packs: Vec::new(),
            fetched: HashMap::new(),
        };
        let mut rep = Reported::default();
        loop {
            if self.halt.load(Ordering::Relaxed) || self.stopped() {
                return rep;
            }
            let u = next.fetch_add(1, Ordering::Relaxed);
            let (a, b, run) = match units.get(u) {
                None => return rep,
                Some(Unit::Files(a, b)) => (*a, *b, None),
                Some(Unit::Run(k, from, to)) => (*k, *k + 1, Some(*from..*to)),
            };
            if let Err(why) = self.fetch(&mut w, &items[a..b], run.clone()) {
                if lock(&self.raised).is_some() {
                    return rep;
                }
                for item in &items[a..b] {
                    rep.outcomes.push((item.k, FAILED));
                    rep.problems.push((item.k, why.clone()));
                }
                continue;
            }
            if let (Some(rows), Some(split)) = (run, splits.get(&a)) {
                if let Some(got) = self.run(&mut w, &items[a], rows, split) {
                    if !self.tally(&mut rep, items[a].k, got) {
                        return rep;
                    }
                }
            } else {
                for item in &items[a..b] {
                    let got = self.write_file(&mut w, item);
                    if !self.tally(&mut rep, item.k, got) {
                        return rep;
                    }
                }
            }
            w.fetched.clear();
        }
    }
}

/// What [`extract_files`] returns: each file's outcome (little-endian i64: bytes written,
/// -1 failed, -2 not attempted), the problems `(file, why)`, the first fatal one, the bytes
/// read from the archive, whether Ctrl-C stopped it and how many files were written in runs
/// by several workers.
type Outcome = (
    Py<PyBytes>,
    Vec<(usize, String)>,
    Option<(usize, String)>,
    u64,
    bool,
    usize,
);

/// Extract the files `rows` (each file's first lookup row) under `root` as `names`
/// (joined UTF-8, `name_offsets` little-endian u64), with `modes`/`mtimes` (i64; -1 and
/// i64::MIN: none) when given. `cols`: the lookup's columns as little-endian buffers
/// (`chunk_seq`, `fdata_offset`, `uncompressed_size`, `blob_offset`, `blob_size`,
/// `inner_offset` as u64; `compressed` as u8; `checksum` 32 bytes a row; the path offsets as
/// u64 and the path bytes). `local`: the archive file to read; else `fetch(offsets, sizes)`
/// gives a unit's blobs. `decode(frame, n)`: a frame of another shape. `progress(files,
/// bytes)` is called about every 100 ms and at the end.
#[pyfunction]
#[pyo3(signature = (cols, tail, packed, local, fetch, decode, root, rows, names, name_offsets,
                    modes, mtimes, replace, workers, unit_bytes, unit_files, progress=None))]
#[allow(clippy::too_many_arguments)]
fn extract_files(
    py: Python<'_>,
    cols: Vec<Bound<'_, PyAny>>,
    tail: u64,
    packed: bool,
    local: Option<&str>,
    fetch: Option<Py<PyAny>>,
    decode: Py<PyAny>,
    root: &str,
    rows: &Bound<'_, PyAny>,
    names: &Bound<'_, PyAny>,
    name_offsets: &Bound<'_, PyAny>,
    modes: Option<&Bound<'_, PyAny>>,
    mtimes: Option<&Bound<'_, PyAny>>,
    replace: bool,
    workers: usize,
    unit_bytes: u64,
    unit_files: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<Outcome> {
    let mut bufs = Vec::with_capacity(cols.len());
    for c in &cols {
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
    let rows = le64(&buffer_vec(rows)?);
    let names = buffer_vec(names)?;
    let name_offsets = le64(&buffer_vec(name_offsets)?);
    let modes = modes
        .map(|m| buffer_vec(m).map(|b| le64i(&b)))
        .transpose()?;
    let mtimes = mtimes
        .map(|m| buffer_vec(m).map(|b| le64i(&b)))
        .transpose()?;
    if name_offsets.len() != rows.len() + 1
        || name_offsets.windows(2).any(|w| w[0] > w[1])
        || name_offsets
            .last()
            .is_some_and(|e| *e as usize > names.len())
    {
        return Err(
            crate::errors::Error::new(crate::errors::Kind::Format, "extract_files: names").into(),
        );
    }
    let source = match local {
        Some(path) => Source::Local(File::open(path).map_err(|e| {
            crate::errors::Error::new(
                crate::errors::Kind::Io,
                format!("cannot open: {}", strerror(&e)),
            )
            .at(path)
        })?),
        None => Source::Python(fetch.ok_or_else(|| {
            crate::errors::Error::new(crate::errors::Kind::Format, "extract_files: no source")
        })?),
    };
    let root_fd = {
        let c = CString::new(root)?;
        // SAFETY: a NUL-terminated path
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = last_error();
            return Err(crate::errors::Error::new(
                crate::errors::Kind::Io,
                format!("cannot open the destination: {}", strerror(&e)),
            )
            .at(root)
            .into());
        }
        // SAFETY: just opened, owned by nothing else
        unsafe { OwnedFd::from_raw_fd(fd) }
    };
    let job = Job {
        cols,
        tail,
        packed,
        source,
        decode,
        root: root_fd,
        replace,
        pid: std::process::id(),
        interrupt: AtomicBool::new(false),
        halt: AtomicBool::new(false),
        bytes_read: AtomicU64::new(0),
        done_files: AtomicU64::new(0),
        done_bytes: AtomicU64::new(0),
        raised: Mutex::new(None),
    };
    let mut items: Vec<Item<'_>> = (0..rows.len())
        .map(|k| {
            let row = rows[k] as usize;
            let path = if row < job.cols.n {
                String::from_utf8_lossy(job.cols.path(row)).into_owned()
            } else {
                String::new()
            };
            Item {
                k,
                path,
                name: &names[name_offsets[k] as usize..name_offsets[k + 1] as usize],
                row,
                mode: modes.as_ref().and_then(|m| m.get(k).copied()).unwrap_or(-1),
                mtime: mtimes
                    .as_ref()
                    .and_then(|m| m.get(k).copied())
                    .unwrap_or(i64::MIN),
            }
        })
        .collect();
    if job.packed {
        // blob order: the members of a pack are written one after the other, so it is decoded
        // once (in path order a directory pack's jars lie between another pack's POMs)
        let c = &job.cols;
        items.sort_by_key(|i| (c.blob_offset.get(i.row).copied().unwrap_or(u64::MAX), i.k));
    }
    let (outcomes, problems, fatal, interrupted, split) = py.detach(|| {
        let (plan, splits) = units(&job, &items, unit_bytes.max(1), unit_files.max(1), workers);
        let next = AtomicUsize::new(0);
        let threads = workers.clamp(1, plan.len().max(1));
        let mut out = vec![NOT_DONE; items.len()];
        let mut problems = Vec::new();
        let mut fatal: Option<(usize, String)> = None;
        let interrupted = Mutex::new(false);
        let tell = |files: u64, bytes: u64| {
            if let Some(p) = &progress {
                Python::attach(|py| {
                    if let Err(e) = p.call1(py, (files, bytes)) {
                        if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                            job.interrupt.store(true, Ordering::Relaxed);
                            *interrupted.lock().unwrap_or_else(|p| p.into_inner()) = true;
                        }
                    }
                });
            }
        };
        let reports: Vec<Reported> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|_| scope.spawn(|| job.work(&items, &plan, &splits, &next)))
                .collect();
            let mut told = Instant::now();
            let mut last = (u64::MAX, u64::MAX);
            while !handles.iter().all(|h| h.is_finished()) {
                std::thread::sleep(Duration::from_millis(5));
                if !job.stopped() && Python::attach(|py| py.check_signals()).is_err() {
                    job.interrupt.store(true, Ordering::Relaxed);
                    *interrupted.lock().unwrap_or_else(|p| p.into_inner()) = true;
                }
                if told.elapsed() >= Duration::from_millis(100) && !job.stopped() {
                    told = Instant::now();
                    let now = (
                        job.done_files.load(Ordering::Relaxed),
                        job.done_bytes.load(Ordering::Relaxed),
                    );
                    if now != last {
                        last = now;
                        tell(now.0, now.1);
                    }
                }
            }
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        for split in splits.values() {
            // runs never started (Ctrl-C, a fatal write): their file goes
            if let Some((_, dir, tmp, _)) = lock(split).file.take() {
                // SAFETY: NUL-terminated name relative to an open directory
                unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
            }
        }
        let split = splits.len();
        for rep in reports {
            for (k, v) in rep.outcomes {
                out[k] = v;
            }
            problems.extend(rep.problems);
            if let Some((k, why)) = rep.fatal {
                if fatal.as_ref().is_none_or(|(f, _)| k < *f) {
                    fatal = Some((k, why));
                }
            }
        }
        problems.sort_by_key(|(k, _)| *k);
        let stopped = *interrupted.lock().unwrap_or_else(|p| p.into_inner());
        if !stopped {
            tell(
                job.done_files.load(Ordering::Relaxed),
                job.done_bytes.load(Ordering::Relaxed),
            );
        }
        (out, problems, fatal, stopped, split)
    });
    if let Some(e) = lock(&job.raised).take() {
        return Err(e);
    }
    let bytes: Vec<u8> = outcomes.iter().flat_map(|v| v.to_le_bytes()).collect();
    Ok((
        PyBytes::new(py, &bytes).unbind(),
        problems,
        fatal,
        job.bytes_read.load(Ordering::Relaxed),
        interrupted,
        split,
    ))
}

/// What [`check_targets`] returns.
type Checked = (Option<(usize, String)>, Py<PyBytes>, Vec<String>);

/// `paths.Targets.target` of every name under `root` (`dest` as the caller gave it, for
/// messages): each directory on the way and the target itself `lstat`-ed once, a symlink
/// there refused. Returns the first problem `(name, why)`, whether each target exists
/// (u8 each), and the parent directories that exist (absolute, with a trailing `/`).
#[pyfunction]
fn check_targets(
    py: Python<'_>,
    dest: &str,
    root: &str,
    names: &Bound<'_, PyAny>,
    name_offsets: &Bound<'_, PyAny>,
) -> PyResult<Checked> {
    let names = buffer_vec(names)?;
    let offs = le64(&buffer_vec(name_offsets)?);
    let (problem, exists, dirs) = py.detach(|| {
        let base = std::path::Path::new(root);
        let lstat = |rel: &[u8]| std::fs::symlink_metadata(base.join(std::ffi::OsStr::from_bytes(rel)));
        let mut known: HashMap<Vec<u8>, bool> = HashMap::new();
        let mut parents: HashMap<Vec<u8>, bool> = HashMap::new();
        let mut order: Vec<Vec<u8>> = Vec::new();
        let mut exists = vec![0u8; offs.len().saturating_sub(1)];
        for k in 0..exists.len() {
            let (a, b) = (offs[k] as usize, offs[k + 1] as usize);
            let Some(name) = names.get(a..b) else { break };
            let shown = || py_repr(&String::from_utf8_lossy(name));
            let rel = match name.iter().rposition(|c| *c == b'/') {
                Some(at) => &name[..at],
                None => &b""[..],
            };
            let there = match parents.get(rel) {
                Some(t) => *t,
                None => {
                    let mut there = true;
                    if !rel.is_empty() {
                        let mut at = 0;
                        loop {
                            let end = rel[at..].iter().position(|c| *c == b'/').map_or(rel.len(), |p| at + p);
                            let prefix = &rel[..end];
                            let t = match known.get(prefix) {
                                Some(t) => *t,
                                None => {
                                    let t = match lstat(prefix) {
                                        Err(_) => false,
                                        Ok(m) if m.file_type().is_symlink() => {
                                            return (
                                                Some((k, format!(
                                                    "entry path {} resolves outside {dest} (through the symlink {})",
                                                    shown(),
                                                    py_repr(&String::from_utf8_lossy(prefix))
                                                ))),
                                                exists,
                                                Vec::new(),
                                            );
                                        }
                                        Ok(m) => m.is_dir(),
                                    };
                                    known.insert(prefix.to_vec(), t);
                                    t
                                }
                            };
                            there = t;
                            if end == rel.len() {
                                break;
                            }
                            at = end + 1;
                        }
                    }
                    parents.insert(rel.to_vec(), there);
                    order.push(rel.to_vec());
                    there
                }
            };
            if !there {
                continue;
            }
            if let Ok(m) = lstat(name) {
                if m.file_type().is_symlink() {
                    return (
                        Some((k, format!("entry path {} points at an existing symlink", shown()))),
                        exists,
                        Vec::new(),
                    );
                }
                exists[k] = 1;
            }
        }
        let dirs = order
            .into_iter()
            .filter(|r| parents.get(r).copied().unwrap_or(false))
            .map(|r| {
                let mut p = base.join(std::ffi::OsStr::from_bytes(&r)).to_string_lossy().into_owned();
                if !p.ends_with('/') {
                    p.push('/');
                }
                p
            })
            .collect();
        (None, exists, dirs)
    });
    Ok((problem, PyBytes::new(py, &exists).unbind(), dirs))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(extract_files, m)?)?;
    m.add_function(wrap_pyfunction!(check_targets, m)?)?;
    m.add_function(wrap_pyfunction!(extract_plan, m)?)?;
    m.add_function(wrap_pyfunction!(remove_leftovers, m)?)?;
    Ok(())
}

/// What [`extract_plan`] gives: the lookup's columns as [`extract_files`] takes them, the tail
/// offset, packed or not, each file's first row, the names joined and their offsets, and the
/// recorded directories.
type Plan = (
    Vec<Py<PyBytes>>,
    u64,
    bool,
    Py<PyBytes>,
    Py<PyBytes>,
    Py<PyBytes>,
    Vec<String>,
);

/// [`plan`]'s answer, before the buffers become `bytes`.
type Planned = (
    Vec<Vec<u8>>,
    u64,
    bool,
    Vec<u8>,
    Vec<u8>,
    Vec<u8>,
    Vec<String>,
);

/// The plan of `extract ARCHIVE -o DIR` read by the core without pyarrow (`cli/fast.py`):
/// every file, each under its own path. None for anything the Python extract must answer or
/// word: a failure reading the tail or the lookup, a section other than the lookup, the trie
/// and `__meta__`, a symbolic link, a path that is not plain or not in order.
fn plan(archive: &str) -> Option<Planned> {
    use crate::ipc;
    use crate::lookup::{lookup_fields, lookup_problem, meta_schema, rows_problem, Rows};
    use crate::tail::{Tail, LOOKUP, META, TRIE};

    let tail = Tail::open(archive).ok()?;
    if tail
        .rows
        .iter()
        .any(|r| r.reserved() && ![LOOKUP, TRIE, META].contains(&r.module.as_str()))
    {
        return None;
    }
    let mut dirs = Vec::new();
    if let Some(row) = tail.section(META) {
        let bytes = tail.range(row, META).ok()?;
        let (schema, batches) = ipc::read_all(&bytes).ok()?;
        if !meta_schema(&schema) {
            return None;
        }
        for cols in &batches {
            if cols[1].null_count() + cols[2].null_count() > 0 {
                return None;
            }
            for i in 0..cols[0].len {
                let key = cols[1].bytes(i);
                if cols[0].is_null(i) {
                    continue; // a fact of the archive (created_at, source, ...)
                }
                if key == b"posix.symlink" {
                    return None;
                }
                let value = cols[2].str(i);
                let dir = key == b"posix.mode"
                    && value.starts_with('4')
                    && u32::from_str_radix(value, 8).is_ok_and(|m| m & 0o170000 == 0o040000);
                if dir {
                    dirs.push(cols[0].str(i).to_string());
                }
            }
        }
    }
    dirs.sort();
    let lrow = tail.section(LOOKUP)?;
    let bytes = tail.range(lrow, LOOKUP).ok()?;
    let stream = ipc::walk(&bytes).ok()?;
    let packed = lookup_fields(&stream.schema.fields)?;
    if stream.rows() != lrow.count {
        return None;
    }
    let mut parts = Vec::new();
    for b in &stream.batches {
        let cols = ipc::decode(&bytes, &stream.schema, b).ok()?;
        if rows_problem(&cols, tail.tail_offset).is_some() {
            return None;
        }
        parts.push(cols);
    }
    let rows = Rows::new(0, parts);
    if lookup_problem(&rows).is_some() {
        return None;
    }
    let n = rows.n;
    let mut cols: Vec<Vec<u8>> = (0..6).map(|_| Vec::with_capacity(8 * n)).collect();
    let (mut compressed, mut checksum) = (Vec::with_capacity(n), Vec::with_capacity(32 * n));
    let (mut offsets, mut data) = (vec![0u8; 8], Vec::new());
    let (mut firsts, mut names, mut name_offsets) = (Vec::new(), Vec::new(), vec![0u8; 8]);
    let mut last: Option<&[u8]> = None;
    for i in 0..n {
        let c = rows.chunk(i);
        let p = rows.path(i);
        for (col, v) in cols.iter_mut().zip([
            c.seq as u64,
            c.fdata_offset,
            c.size,
            c.blob_offset,
            c.blob_size,
            c.inner,
        ]) {
            col.extend(v.to_le_bytes());
        }
        compressed.push(c.compressed as u8);
        checksum.extend(c.checksum);
        data.extend(p);
        offsets.extend((data.len() as u64).to_le_bytes());
        if c.seq == 0 {
            if last.is_some_and(|l| l >= p) || !crate::verify::safe(p) {
                return None; // out of order, twice, or not plain: the Python extract says so
            }
            last = Some(p);
            firsts.extend((i as u64).to_le_bytes());
            names.extend(p);
            name_offsets.extend((names.len() as u64).to_le_bytes());
        }
    }
    cols.push(compressed);
    cols.push(checksum);
    cols.push(offsets);
    cols.push(data);
    Some((
        cols,
        tail.tail_offset,
        packed,
        firsts,
        names,
        name_offsets,
        dirs,
    ))
}

#[pyfunction]
fn extract_plan(py: Python<'_>, archive: &str) -> Option<Plan> {
    let (cols, tail, packed, firsts, names, offsets, dirs) = py.detach(|| plan(archive))?;
    Some((
        cols.iter().map(|c| PyBytes::new(py, c).unbind()).collect(),
        tail,
        packed,
        PyBytes::new(py, &firsts).unbind(),
        PyBytes::new(py, &names).unbind(),
        PyBytes::new(py, &offsets).unbind(),
        dirs,
    ))
}

/// The sweep of `read/extract.py`: the temporaries (`.NAME.znippy-part-PID`) of extracts no longer
/// running removed from these existing directories; how many.
#[pyfunction]
fn remove_leftovers(py: Python<'_>, directories: Vec<String>) -> usize {
    py.detach(|| {
        let me = std::process::id();
        let mut n = 0;
        for d in directories {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.as_bytes();
                let Some(at) = name
                    .windows(SUFFIX.len())
                    .rposition(|w| w == SUFFIX.as_bytes())
                else {
                    continue;
                };
                let digits = &name[at + SUFFIX.len()..];
                if name.first() != Some(&b'.')
                    || at < 1
                    || digits.is_empty()
                    || !digits.iter().all(u8::is_ascii_digit)
                {
                    continue;
                }
                let alive = match std::str::from_utf8(digits)
                    .ok()
                    .and_then(|s| s.parse::<i32>().ok())
                {
                    None => false, // beyond any pid
                    Some(pid) if pid as u32 == me || pid == 0 => true,
                    // SAFETY: signal 0 only asks whether the process exists
                    Some(pid) => {
                        (unsafe { libc::kill(pid, 0) } == 0
                            || last_error().raw_os_error() == Some(libc::EPERM))
                    }
                };
                let plain = entry
                    .file_type()
                    .is_ok_and(|t| t.is_file() || t.is_symlink());
                if !alive && plain && std::fs::remove_file(entry.path()).is_ok() {
                    n += 1;
                }
            }
        }
        n
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of files `a` (3 chunks), `b` (1 chunk); `mangle` edits them first.
    fn cols(mangle: impl Fn(&mut Cols)) -> Cols {
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

    fn problem(c: &Cols, path: &str, row: usize) -> String {
        match c.file_rows(path, row) {
            Err(Fail::File(why)) => why,
            Ok(r) => format!("rows {r:?}"),
            Err(_) => "another failure".into(),
        }
    }

    #[test]
    fn a_files_rows_are_checked_as_file_at_checks_them() {
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
