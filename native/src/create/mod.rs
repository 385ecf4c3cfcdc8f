//! The per-file loop of create: the walk, `lstat`, read and BLAKE3 of the files the routing
//! rule packs whole (`walk.rs`, on a thread of its own), and the rule itself (`route.rs`).
//! Python reaches these through `znippy_sql/corelib.py` (`# -- create`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::errors::{Error, Kind};

pub mod dedup;
pub mod frame;
pub mod pack;
pub mod route;
pub mod tail;
pub mod turn;
pub mod walk;

/// A batch is sent once it holds this many entries or bytes read ahead ...
const BATCH_ITEMS: usize = 256;
const BATCH_BYTES: usize = 1 << 20;
/// ... and at most this many batches wait ...
const BATCHES_AHEAD: usize = 16;
/// ... holding at most this many bytes read ahead (plus one file, when it alone is bigger:
/// a directory-pack member, at most `DIR_MEMBER_MAX`): the forked read-ahead's ring size
const READ_AHEAD_BYTES: usize = 32 << 20;
/// how often a waiting caller looks at its signals (Ctrl-C stops a create within this)
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// The routing rule with its settings (`write/ingest.py` `Ingest._route`).
#[pyclass(module = "znippy_sql._native", frozen)]
pub struct Router {
    rules: route::Rules,
}

#[pymethods]
impl Router {
    #[new]
    fn new(
        skip: Vec<String>,
        zip: Vec<String>,
        packing: bool,
        dedup: bool,
        pack_max: u64,
        dir_max: u64,
    ) -> Self {
        let rules = route::Rules {
            skip: skip.into_iter().collect(),
            zip: zip.into_iter().collect(),
            packing,
            dedup,
            pack_max,
            dir_max,
        };
        Router { rules }
    }

    /// Where a file of `size` bytes at `path` goes (0 directory pack, 1 zip spans,
    /// 2 small pack, 3 chunks of its own).
    fn route(&self, path: std::ffi::OsString, size: u64) -> PyResult<u8> {
        guarded("the routing rule", || {
            Ok(self.rules.route(path.as_bytes(), size))
        })
    }
}

enum Msg {
    Batch(Vec<walk::Found>),
    End(walk::Summary),
    Panic(String),
}

/// A directory walked (and its small-pack files read and hashed) by a thread ahead of the
/// caller, handed over in batches of tuples by `next`.
#[pyclass(module = "znippy_sql._native")]
pub struct Walker {
    rx: Mutex<Option<Receiver<Msg>>>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    summary: Mutex<Option<walk::Summary>>,
    budget: Arc<Budget>,
    /// the routing rule the walk reads ahead for: each file's route goes with it
    rules: Option<route::Rules>,
}

/// `_create_panic_for_test(n)`: the `n`th guarded call from now panics inside its guard
/// (-1: none).
static PANIC_AT: AtomicI64 = AtomicI64::new(-1);

/// One per-file call of create, guarded: a panic in it becomes a `ZnippyError` saying
/// `what` (PyO3 would raise a `PanicException`, a `BaseException` that `except Exception`
/// does not see). The object it ran on may be left half-changed: the write stops there.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if PANIC_AT.load(Ordering::Relaxed) >= 0 && PANIC_AT.fetch_sub(1, Ordering::Relaxed) == 0 {
            panic!("forced by _create_panic_for_test");
        }
        f()
    }));
    run.unwrap_or_else(|panic| {
        let why = panic_text(panic);
        Err(Error::new(
            Kind::Io,
            format!("{what}: the native core panicked ({why})"),
        )
        .into())
    })
}

/// The `n`th guarded call of create from now panics (-1: none): the boundary test.
#[pyfunction]
fn _create_panic_for_test(n: i64) {
    PANIC_AT.store(n, Ordering::Relaxed);
}

fn panic_text(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string())
}

/// The walk's own thread: entries in batches of `BATCH_ITEMS`, then the summary.
fn walk_stage(opts: &walk::Options, stop: &AtomicBool, tx: SyncSender<Msg>) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut batch = Vec::new();
        let summary = walk::walk(opts, stop, |found| {
            batch.push(found);
            if batch.len() >= BATCH_ITEMS {
                return tx.send(Msg::Batch(std::mem::take(&mut batch))).is_ok();
            }
            true
        });
        if !batch.is_empty() && tx.send(Msg::Batch(batch)).is_err() {
            return;
        }
        let _ = tx.send(Msg::End(summary));
    }));
    if let Err(panic) = outcome {
        let _ = tx.send(Msg::Panic(panic_text(panic)));
    }
}

/// The bytes read ahead and not yet handed to the caller.
#[derive(Default)]
struct Budget {
    used: Mutex<usize>,
    freed: Condvar,
}

impl Budget {
    /// Whether `n` more bytes may be read now.
    fn fits(&self, n: usize) -> bool {
        let used = self.used.lock().map_or(0, |u| *u);
        used == 0 || used + n <= READ_AHEAD_BYTES
    }

    /// Waits until `n` more bytes fit (or `stop`), then counts them.
    fn take(&self, n: usize, stop: &AtomicBool) {
        let Ok(mut used) = self.used.lock() else {
            return;
        };
        while *used > 0 && *used + n > READ_AHEAD_BYTES && !stop.load(Ordering::Relaxed) {
            match self.freed.wait_timeout(used, SIGNAL_POLL) {
                Ok((u, _)) => used = u,
                Err(_) => return,
            }
        }
        *used += n;
    }

    fn give(&self, n: usize) {
        if let Ok(mut used) = self.used.lock() {
            *used = used.saturating_sub(n);
        }
        self.freed.notify_all();
    }
}

/// The reader: walked batches in, the small-pack files read and hashed, batches of at most
/// `BATCH_ITEMS` entries or `BATCH_BYTES` read out to the caller (two threads, as the two
/// forked children before them: each gets its share of a loaded machine's cores).
fn run(opts: walk::Options, stop: Arc<AtomicBool>, budget: Arc<Budget>, tx: SyncSender<Msg>) {
    let opts = Arc::new(opts);
    let (wtx, wrx) = sync_channel(BATCHES_AHEAD);
    let walker = {
        let (opts, stop) = (opts.clone(), stop.clone());
        std::thread::Builder::new()
            .name("znippy-walk-list".into())
            .spawn(move || walk_stage(&opts, &stop, wtx))
    };
    let Ok(walker) = walker else {
        let _ = tx.send(Msg::Panic("cannot start the walk's thread".into()));
        return;
    };
    let mut base = opts.root.clone();
    if !base.ends_with(b"/") {
        base.push(b'/');
    }
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for msg in wrx.iter() {
            match msg {
                Msg::Batch(items) => {
                    for mut found in items {
                        let wanted = opts
                            .rules
                            .as_ref()
                            .and_then(|r| walk::packed_size(&found, r));
                        if let Some(size) = wanted {
                            let n = usize::try_from(size).unwrap_or(usize::MAX);
                            if !budget.fits(n) && !out.is_empty() {
                                // what waits here must reach the caller before it can free
                                bytes = 0;
                                if tx.send(Msg::Batch(std::mem::take(&mut out))).is_err() {
                                    return;
                                }
                            }
                            budget.take(n, &stop);
                            walk::read_ahead(&mut found, &base, size);
                            if found.data.is_none() {
                                budget.give(n);
                            }
                        }
                        bytes += found.data.as_ref().map_or(0, |d| d.0.len());
                        out.push(found);
                        if out.len() >= BATCH_ITEMS || bytes >= BATCH_BYTES {
                            bytes = 0;
                            if tx.send(Msg::Batch(std::mem::take(&mut out))).is_err() {
                                return;
                            }
                        }
                    }
                }
                end => {
                    if !out.is_empty() && tx.send(Msg::Batch(std::mem::take(&mut out))).is_err() {
                        return;
                    }
                    let _ = tx.send(end);
                    return;
                }
            }
        }
    }));
    if let Err(panic) = outcome {
        let _ = tx.send(Msg::Panic(panic_text(panic)));
    }
    stop.store(true, Ordering::Relaxed);
    drop(wrx);
    let _ = walker.join();
}

fn text<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    Ok(OsStr::from_bytes(bytes).into_pyobject(py)?.into_any())
}

/// A batch as Python takes it, in columns (`write/source.py` `Batch`): the files and links
/// in walk order as `rels`, `sizes`, `modes`, `mtimes`, `targets` (a link's; None for a
/// file), `datas` and `digests` (read ahead), `routes` (where `rules` send a file: None
/// without them, or for a link or a file of unknown size), `unplain` (the indexes of the
/// paths `walk::plain` does not pass: the writer checks those one by one); then the
/// directories `(rel, mode, mtime_ns)` (with `posix`) and the directory that cannot be
/// listed, `(rel, errno, why)`, or None.
fn as_columns<'py>(
    py: Python<'py>,
    items: &[walk::Found],
    rules: Option<&route::Rules>,
) -> PyResult<Bound<'py, PyTuple>> {
    let (rels, sizes, modes, mtimes) = (
        PyList::empty(py),
        PyList::empty(py),
        PyList::empty(py),
        PyList::empty(py),
    );
    let (targets, datas, digests, routes) = (
        PyList::empty(py),
        PyList::empty(py),
        PyList::empty(py),
        PyList::empty(py),
    );
    let (unplain, dirs) = (PyList::empty(py), PyList::empty(py));
    let mut fail = None;
    for f in items {
        let (mode, mtime) = match f.meta {
            Some((m, t)) => (Some(m), Some(t)),
            None => (None, None),
        };
        match f.kind {
            walk::DIR => {
                if let Some((m, t)) = f.meta {
                    dirs.append((text(py, &f.rel)?, m, t))?;
                }
                continue;
            }
            walk::FAIL => {
                let why = f.target.as_deref().map(|t| text(py, t)).transpose()?;
                fail = Some((text(py, &f.rel)?, mode, why));
                continue;
            }
            _ => {}
        }
        if !walk::plain(&f.rel) {
            unplain.append(rels.len())?;
        }
        let route = match (rules, f.kind, f.size) {
            (Some(r), walk::FILE, Some(size)) => Some(r.route(&f.rel, size)),
            _ => None,
        };
        let target = match &f.target {
            Some(t) => Some(text(py, t)?),
            None => None,
        };
        let (data, digest) = match &f.data {
            Some((d, h)) => (Some(PyBytes::new(py, d)), Some(PyBytes::new(py, h))),
            None => (None, None),
        };
        rels.append(text(py, &f.rel)?)?;
        sizes.append(f.size)?;
        modes.append(mode)?;
        mtimes.append(mtime)?;
        targets.append(target)?;
        datas.append(data)?;
        digests.append(digest)?;
        routes.append(route)?;
    }
    (
        rels, sizes, modes, mtimes, targets, datas, digests, routes, unplain, dirs, fail,
    )
        .into_pyobject(py)
}

#[pymethods]
impl Walker {
    /// `root` and the `exclude`d relative paths and `prefixes` as bytes (`os.fsencode`);
    /// `router`: read ahead the files it sends to a small pack.
    #[new]
    #[pyo3(signature = (root, posix, skip_unreadable, exclude, prefixes, router=None))]
    fn new(
        root: Vec<u8>,
        posix: bool,
        skip_unreadable: bool,
        exclude: Vec<Vec<u8>>,
        prefixes: Vec<Vec<u8>>,
        router: Option<PyRef<'_, Router>>,
    ) -> PyResult<Self> {
        let opts = walk::Options {
            root,
            posix,
            skip_unreadable,
            exclude: exclude.into_iter().collect(),
            prefixes,
            rules: router.map(|r| r.rules.clone()),
        };
        let rules = opts.rules.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = sync_channel(BATCHES_AHEAD);
        let flag = stop.clone();
        let budget = Arc::new(Budget::default());
        let shared = budget.clone();
        let thread = std::thread::Builder::new()
            .name("znippy-walk".into())
            .spawn(move || run(opts, flag, shared, tx))
            .map_err(|e| Error::new(Kind::Io, format!("cannot start the walk: {e}")))?;
        Ok(Walker {
            rx: Mutex::new(Some(rx)),
            stop,
            thread: Mutex::new(Some(thread)),
            summary: Mutex::new(None),
            budget,
            rules,
        })
    }

    /// The next batch, in columns (`as_columns`), or None at the end. Waits without the
    /// GIL, looking at signals every 50 ms.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        guarded("the walk", || self.next_batch(py))
    }

    /// `(unreadable [(path, why)], links left out, special files left out [rel])`, once
    /// `next` said the walk is over.
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        guarded("the walk", || self.summary_of(py))
    }

    /// Stops the walk and waits for its thread.
    fn close(&self, py: Python<'_>) {
        self.stop.store(true, Ordering::Relaxed);
        if let Ok(mut rx) = self.rx.lock() {
            rx.take(); // a thread blocked on a full channel sees it closed
        }
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(thread) = thread {
            py.detach(|| {
                let _ = thread.join();
            });
        }
    }
}

impl Walker {
    fn next_batch<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let mut guard = self
            .rx
            .lock()
            .map_err(|_| Error::new(Kind::Io, "the walk failed"))?;
        loop {
            // the receiver crosses into the GIL-free closure and back (it is Send, not Sync)
            let Some(rx) = guard.take() else {
                return Ok(None);
            };
            let (got, rx) = py.detach(move || (rx.recv_timeout(SIGNAL_POLL), rx));
            *guard = Some(rx);
            match got {
                Ok(Msg::Batch(items)) => {
                    self.budget.give(
                        items
                            .iter()
                            .map(|f| f.data.as_ref().map_or(0, |d| d.0.len()))
                            .sum(),
                    );
                    return as_columns(py, &items, self.rules.as_ref()).map(Some);
                }
                Ok(Msg::End(summary)) => {
                    if let Ok(mut s) = self.summary.lock() {
                        *s = Some(summary);
                    }
                    return Ok(None);
                }
                Ok(Msg::Panic(what)) => {
                    return Err(Error::new(Kind::Io, format!("the walk failed: {what}")).into())
                }
                Err(RecvTimeoutError::Timeout) => py.check_signals()?,
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
            }
        }
    }

    fn summary_of<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let guard = self
            .summary
            .lock()
            .map_err(|_| Error::new(Kind::Io, "the walk failed"))?;
        let empty = walk::Summary::default();
        let s = guard.as_ref().unwrap_or(&empty);
        let unreadable = PyList::empty(py);
        for (path, why) in &s.unreadable {
            unreadable.append((text(py, path)?, why))?;
        }
        let special = PyList::empty(py);
        for rel in &s.special_left_out {
            special.append(text(py, rel)?)?;
        }
        (unreadable, s.links_left_out, special).into_pyobject(py)
    }
}

impl Drop for Walker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Ok(mut rx) = self.rx.lock() {
            rx.take();
        }
    }
}

thread_local! {
    /// this thread's encoders, by level and parameters (a zstd context is reused)
    static ENCODERS: std::cell::RefCell<Vec<(i32, frame::Params, frame::Encoder)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// frames back to back, where each chunk's ends, and whether it has one
type Encoded = (Vec<u8>, Vec<usize>, Vec<bool>);

fn encode_all(level: i32, params: frame::Params, chunks: &[&[u8]]) -> Result<Encoded, String> {
    ENCODERS.with(|cell| {
        let mut encoders = cell.borrow_mut();
        let at = match encoders
            .iter()
            .position(|(l, p, _)| *l == level && *p == params)
        {
            Some(at) => at,
            None => {
                encoders.push((level, params, frame::Encoder::new(level, params)?));
                encoders.len() - 1
            }
        };
        let enc = &mut encoders[at].2;
        let mut out = Vec::new();
        let mut ends = Vec::with_capacity(chunks.len());
        let mut framed = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            framed.push(enc.frame_if_smaller(chunk, &mut out)?);
            ends.push(out.len());
        }
        Ok((out, ends, framed))
    })
}

/// The OpenZL frame of each chunk (`format/zlframe.py`'s zstd shape), or None where it would
/// not be smaller than the chunk; all of them compressed without the GIL. `hash_log` and
/// `chain_log`: packed blobs' tables; `window_log`: a directory pack's long window.
#[pyfunction]
#[pyo3(signature = (chunks, level, hash_log=None, chain_log=None, window_log=None))]
fn frames<'py>(
    py: Python<'py>,
    chunks: Vec<PyBuffer<u8>>,
    level: i32,
    hash_log: Option<u32>,
    chain_log: Option<u32>,
    window_log: Option<u32>,
) -> PyResult<Bound<'py, PyList>> {
    guarded("zstd", || {
        frames_of(py, chunks, level, hash_log, chain_log, window_log)
    })
}

fn frames_of<'py>(
    py: Python<'py>,
    chunks: Vec<PyBuffer<u8>>,
    level: i32,
    hash_log: Option<u32>,
    chain_log: Option<u32>,
    window_log: Option<u32>,
) -> PyResult<Bound<'py, PyList>> {
    let params = match (hash_log, chain_log, window_log) {
        (_, _, Some(window_log)) => frame::Params::Long { window_log },
        (Some(hash_log), Some(chain_log), None) => frame::Params::Tables {
            hash_log,
            chain_log,
        },
        _ => frame::Params::Level,
    };
    for buf in &chunks {
        if !buf.is_c_contiguous() {
            return Err(Error::new(Kind::Codec, "a chunk is not one contiguous buffer").into());
        }
    }
    let done = py.detach(|| {
        let slices: Vec<&[u8]> = chunks
            .iter()
            // SAFETY: each buffer is C-contiguous (checked above) and its PyBuffer keeps
            // the exporting object alive and its memory in place until this call returns;
            // the writer never changes a chunk's bytes while it is being compressed.
            .map(|b| unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, b.len_bytes()) })
            .collect();
        encode_all(level, params, &slices)
    });
    let (out, ends, framed) = done.map_err(|m| Error::new(Kind::Codec, m))?;
    let list = PyList::empty(py);
    let mut start = 0;
    for (end, ok) in ends.into_iter().zip(framed) {
        if ok {
            list.append(PyBytes::new(py, &out[start..end]))?;
        } else {
            list.append(py.None())?;
        }
        start = end;
    }
    Ok(list)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(frames, m)?)?;
    m.add_function(wrap_pyfunction!(_create_panic_for_test, m)?)?;
    m.add_function(wrap_pyfunction!(tail::trie_build, m)?)?;
    m.add_class::<Router>()?;
    m.add_class::<dedup::DedupTable>()?;
    m.add_class::<turn::Turns>()?;
    m.add_class::<pack::Packs>()?;
    m.add_class::<Walker>()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_bounds_what_is_read_ahead() {
        let budget = Budget::default();
        let stop = AtomicBool::new(false);
        assert!(budget.fits(READ_AHEAD_BYTES * 2)); // nothing read: one big file may go
        budget.take(READ_AHEAD_BYTES - 10, &stop);
        assert!(budget.fits(10) && !budget.fits(11));
        budget.give(READ_AHEAD_BYTES - 10);
        assert!(budget.fits(READ_AHEAD_BYTES));
        budget.take(READ_AHEAD_BYTES, &stop);
        stop.store(true, Ordering::Relaxed); // a stopped walk does not wait for room
        budget.take(1, &stop);
        assert_eq!(*budget.used.lock().unwrap(), READ_AHEAD_BYTES + 1);
    }
}
