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

mod decode;
mod fast;
mod memory;
mod plan;
mod source;
mod targets;
mod work;

use fast::*;
use plan::*;
use source::*;
use targets::*;

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

/// One extract's shared state.
struct Job {
    cols: Cols,
    tail: u64,
    packed: bool,
    source: Source,
    /// `decode(frame, n) -> buffer`: a frame of another shape (n = -1: as it declares)
    decode: Py<PyAny>,
    /// check every chunk's BLAKE3 (`read_many(verify=False)` does not)
    check: bool,
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
    /// the last blob read (kept: see [`Job::read`])
    rbuf: Vec<u8>,
    /// the last chunk decoded outside a pack
    dbuf: Vec<u8>,
    /// decode buffers of packs that left the cache, for the next ones
    spare: Vec<Vec<u8>>,
}

/// What one worker reports: each file's outcome and the problems.
#[derive(Default)]
struct Reported {
    outcomes: Vec<(usize, i64)>,
    problems: Vec<(usize, String)>,
    fatal: Option<(usize, String)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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

/// The archive to read: `local` by `pread`, else `fetch(offsets, sizes)` (a unit's blobs).
fn open_source(local: Option<&str>, fetch: Option<Py<PyAny>>) -> PyResult<Source> {
    Ok(match local {
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
    })
}

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
    let cols = Cols::from_buffers(&cols)?;
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
    let source = open_source(local, fetch)?;
    let root_fd = open_root(root)?;
    let job = Job {
        cols,
        tail,
        packed,
        source,
        decode,
        check: true,
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(extract_files, m)?)?;
    m.add_function(wrap_pyfunction!(check_targets, m)?)?;
    m.add_function(wrap_pyfunction!(extract_plan, m)?)?;
    m.add_function(wrap_pyfunction!(remove_leftovers, m)?)?;
    m.add_class::<memory::ReadMany>()?;
    Ok(())
}
