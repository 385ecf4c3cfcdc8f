//! `Archive.read_many`'s per-file work (issue 33, item 3; `read/many.py` says what it
//! promises): the paths found in the lookup by binary search over its first rows, put in
//! blob order (or kept in the given order), cut into units, each unit's files read, decoded
//! and checked by worker threads into memory ([`Job::fill_into`], the extract's reader) and
//! handed out by [`ReadMany`], an iterator whose `__next__` is C: no Python call a file.
//!
//! At most `workers + 1` units are decoded ahead of the consumer (memory bounded as
//! before). A unit with a failed file calls `fail(k)` for it before yielding any of its files:
//! the Python reader reads that one file again, raising its error as it words it.

use std::collections::VecDeque;
use std::sync::Condvar;
use std::thread::JoinHandle;

use pyo3::types::PyTuple;

use super::*;

/// A file's buffer is reserved up to this size at once (it grows past it as it is filled).
const RESERVE_BYTES: u64 = 64 << 20;

/// A unit's files: `(k, bytes or the problem)`.
type Got = Vec<(usize, Result<Vec<u8>, String>)>;

#[derive(Default)]
struct State {
    /// units handed to workers so far
    started: usize,
    /// units the consumer took
    taken: usize,
    stop: bool,
    done: HashMap<usize, Got>,
}

struct Shared {
    state: Mutex<State>,
    ready: Condvar,
}

/// The files of one `read_many`, read ahead by worker threads, yielded as `(path, bytes)`.
#[pyclass(module = "znippy_sql._native")]
pub(super) struct ReadMany {
    job: Arc<Job>,
    /// the given paths (yielded as given)
    paths: Vec<Py<PyAny>>,
    /// each given path's first lookup row (`u64::MAX`: not found or its rows fail a check)
    rows: Vec<u64>,
    ordered: bool,
    unit_bytes: u64,
    unit_files: usize,
    workers: usize,
    /// `fail(k) -> bytes`: the Python reader's answer for file `k` the core could not read
    fail: Py<PyAny>,
    /// `done(bytes read)`: told once, when the iteration ends (a local archive's count)
    done: Option<Py<PyAny>>,
    /// the work, made at the first `__next__`: files in reading order and units of them
    items: Option<Arc<Vec<Item<'static>>>>,
    units: Arc<Vec<(usize, usize)>>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    current: VecDeque<(usize, Vec<u8>)>,
}

impl Job {
    /// Each given path's first lookup row, its rows checked; `u64::MAX` where the Python
    /// reader must answer (not there, a row that fails a check, a lookup out of order).
    fn first_rows(&self, paths: &[Py<PyAny>], py: Python<'_>) -> Vec<u64> {
        let c = &self.cols;
        let firsts: Vec<usize> = (0..c.n).filter(|r| c.seq[*r] == 0).collect();
        let sorted = firsts.windows(2).all(|w| c.path(w[0]) < c.path(w[1]));
        paths
            .iter()
            .map(|p| {
                let Ok(path) = p.bind(py).extract::<&str>() else {
                    return u64::MAX;
                };
                if !sorted {
                    return u64::MAX;
                }
                let key = path.as_bytes();
                match firsts.binary_search_by(|r| c.path(*r).cmp(key)) {
                    Ok(at) if c.file_rows(path, firsts[at]).is_ok() => firsts[at] as u64,
                    _ => u64::MAX,
                }
            })
            .collect()
    }

    /// One unit's files read into memory (the extract's reader: `fill_into`).
    fn read_unit(&self, w: &mut Worker, items: &[Item<'_>]) -> Got {
        if let Err(why) = self.fetch(w, items, None) {
            return items.iter().map(|i| (i.k, Err(why.clone()))).collect();
        }
        let got = items
            .iter()
            .map(|item| {
                let read = self.cols.file_rows(&item.path, item.row).and_then(|rows| {
                    let n: u64 = self.cols.size[rows.clone()].iter().sum();
                    // (a forged size must not reserve memory: the bytes decoded are checked)
                    let mut data = Vec::with_capacity(n.min(RESERVE_BYTES) as usize);
                    self.fill_into(w, item, rows, &mut data).map(|_| data)
                });
                let read = read.map_err(|e| match e {
                    Fail::File(why) | Fail::Fatal(why) => why,
                    Fail::Stopped => "stopped".to_string(),
                });
                (item.k, read)
            })
            .collect();
        w.fetched.clear();
        got
    }
}

/// A worker: the next unit not too far ahead of the consumer, until none is left.
fn work(
    job: Arc<Job>,
    items: Arc<Vec<Item<'static>>>,
    units: Arc<Vec<(usize, usize)>>,
    shared: Arc<Shared>,
    ahead: usize,
) {
    let mut w = Worker {
        dctx: None,
        dir: None,
        packs: Vec::new(),
        fetched: HashMap::new(),
        rbuf: Vec::new(),
        dbuf: Vec::new(),
        spare: Vec::new(),
    };
    loop {
        let u = {
            let mut st = lock(&shared.state);
            loop {
                if st.stop || st.started >= units.len() {
                    return;
                }
                if st.started < st.taken + ahead {
                    break;
                }
                st = shared.ready.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            st.started += 1;
            st.started - 1
        };
        let (a, b) = units[u];
        let got = job.read_unit(&mut w, &items[a..b]);
        lock(&shared.state).done.insert(u, got);
        shared.ready.notify_all();
    }
}

impl ReadMany {
    /// The files in reading order and their units (`read/many.py`: up to `unit_bytes` of
    /// original bytes or `unit_files` files; a bigger file is a unit of its own); the
    /// workers started.
    fn start(&mut self, py: Python<'_>) -> PyResult<()> {
        let c = &self.job.cols;
        let size = |row: u64| -> u64 {
            let row = row as usize;
            match row < c.n {
                true => c.size[row..c.next_first(row)].iter().sum(),
                false => 0,
            }
        };
        let mut order: Vec<usize> = (0..self.rows.len()).collect();
        if !self.ordered {
            let blob = |k: usize| c.blob_offset.get(self.rows[k] as usize).copied();
            order.sort_by_key(|k| (blob(*k), *k));
        }
        let mut items = Vec::with_capacity(order.len());
        let mut units = Vec::new();
        let (mut start, mut held) = (0usize, 0u64);
        for k in order {
            let row = self.rows[k];
            let n = size(row);
            let len = items.len();
            if len > start && (held + n > self.unit_bytes || len - start >= self.unit_files) {
                units.push((start, len));
                (start, held) = (len, 0);
            }
            held += n;
            let path = self.paths[k]
                .bind(py)
                .extract::<String>()
                .unwrap_or_default();
            items.push(Item {
                k,
                path,
                name: b"",
                row: row as usize,
                mode: -1,
                mtime: i64::MIN,
            });
        }
        if items.len() > start {
            units.push((start, items.len()));
        }
        let items = Arc::new(items);
        let units = Arc::new(units);
        let threads = self.workers.clamp(1, units.len().max(1));
        for _ in 0..threads {
            let (job, items, units, shared) = (
                self.job.clone(),
                items.clone(),
                units.clone(),
                self.shared.clone(),
            );
            let spawned = std::thread::Builder::new()
                .name("znippy-read".into())
                .spawn(move || work(job, items, units, shared, threads + 1));
            match spawned {
                Ok(handle) => self.threads.push(handle),
                Err(e) if self.threads.is_empty() => {
                    return Err(crate::errors::Error::new(
                        crate::errors::Kind::Io,
                        format!("cannot start a reading thread: {e}"),
                    )
                    .into());
                }
                Err(_) => break, // fewer workers: the ones started read every unit
            }
        }
        self.items = Some(items);
        self.units = units;
        Ok(())
    }

    /// The next unit's files, waited for without the GIL (Ctrl-C looked at every 50 ms).
    fn take(&mut self, py: Python<'_>) -> PyResult<Option<Got>> {
        let u = lock(&self.shared.state).taken;
        if u >= self.units.len() {
            return Ok(None);
        }
        loop {
            let got = py.detach(|| {
                let mut st = lock(&self.shared.state);
                if !st.done.contains_key(&u) {
                    st = self
                        .shared
                        .ready
                        .wait_timeout(st, Duration::from_millis(50))
                        .map(|(g, _)| g)
                        .unwrap_or_else(|p| p.into_inner().0);
                }
                let got = st.done.remove(&u);
                if got.is_some() {
                    st.taken += 1;
                }
                got
            });
            if let Some(got) = got {
                self.shared.ready.notify_all();
                return Ok(Some(got));
            }
            py.check_signals()?;
        }
    }

    /// Stop the workers and wait for them (the units not started are dropped).
    fn stop(&mut self, py: Python<'_>) {
        lock(&self.shared.state).stop = true;
        self.shared.ready.notify_all();
        let threads = std::mem::take(&mut self.threads);
        // without the GIL: a worker may be waiting for it (a remote unit's fetch)
        py.detach(|| {
            for t in threads {
                let _ = t.join();
            }
        });
        if let Some(done) = self.done.take() {
            let _ = done.call1(py, (self.job.bytes_read.load(Ordering::Relaxed),));
        }
        // over: the next `__next__` ends the iteration, as a generator's after it raised
        self.units = Arc::new(Vec::new());
        self.items.get_or_insert_with(|| Arc::new(Vec::new()));
        self.current.clear();
    }
}

#[pymethods]
impl ReadMany {
    /// `cols`, `tail`, `packed`, `local`, `fetch`, `decode` as `extract_files` takes them;
    /// `paths` the files to read, each `fail(k)` answered by Python; `check`: every chunk's
    /// BLAKE3; `done(bytes read)` told at the end.
    #[new]
    #[pyo3(signature = (cols, tail, packed, local, fetch, decode, paths, fail, check, ordered,
                        unit_bytes, unit_files, workers, done=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        cols: Vec<Bound<'_, PyAny>>,
        tail: u64,
        packed: bool,
        local: Option<&str>,
        fetch: Option<Py<PyAny>>,
        decode: Py<PyAny>,
        paths: Vec<Py<PyAny>>,
        fail: Py<PyAny>,
        check: bool,
        ordered: bool,
        unit_bytes: u64,
        unit_files: usize,
        workers: usize,
        done: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        // a memory read opens no file: the root is never used
        let root = OwnedFd::from(File::open("/").map_err(|e| {
            crate::errors::Error::new(crate::errors::Kind::Io, strerror(&e)).at("/")
        })?);
        let job = Job {
            cols: Cols::from_buffers(&cols)?,
            tail,
            packed,
            source: open_source(local, fetch)?,
            decode,
            check,
            root,
            replace: false,
            pid: std::process::id(),
            interrupt: AtomicBool::new(false),
            halt: AtomicBool::new(false),
            bytes_read: AtomicU64::new(0),
            done_files: AtomicU64::new(0),
            done_bytes: AtomicU64::new(0),
            raised: Mutex::new(None),
        };
        let rows = job.first_rows(&paths, py);
        Ok(ReadMany {
            job: Arc::new(job),
            paths,
            rows,
            ordered,
            unit_bytes: unit_bytes.max(1),
            unit_files: unit_files.max(1),
            workers: workers.max(1),
            fail,
            done,
            items: None,
            units: Arc::new(Vec::new()),
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                ready: Condvar::new(),
            }),
            threads: Vec::new(),
            current: VecDeque::new(),
        })
    }

    /// The given files the Python reader must find (their indexes, in the given order).
    fn suspects(&self) -> Vec<usize> {
        (0..self.rows.len())
            .filter(|k| self.rows[*k] == u64::MAX)
            .collect()
    }

    /// File `k`'s first lookup row, as the Python reader found it.
    fn set_row(&mut self, k: usize, row: u64) {
        if let Some(r) = self.rows.get_mut(k) {
            *r = row;
        }
    }

    /// The number of files in each unit, in reading order (plans them first).
    fn unit_files(&mut self, py: Python<'_>) -> PyResult<Vec<usize>> {
        if self.items.is_none() {
            self.start(py)?;
        }
        Ok(self.units.iter().map(|(a, b)| b - a).collect())
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyTuple>>> {
        if self.items.is_none() {
            self.start(py)?;
        }
        while self.current.is_empty() {
            let Some(got) = self.take(py)? else {
                self.stop(py);
                return Ok(None);
            };
            if got.iter().any(|(_, r)| r.is_err()) {
                let raised = lock(&self.job.raised).take();
                if let Some(e) = raised {
                    self.stop(py);
                    return Err(e); // the source failed: as the Python reader raised it
                }
            }
            for (k, read) in got {
                let data = match read {
                    Ok(data) => data,
                    Err(_) => match self.fail.call1(py, (k,)) {
                        Ok(obj) => buffer_vec(obj.bind(py))?,
                        Err(e) => {
                            self.stop(py);
                            return Err(e);
                        }
                    },
                };
                self.current.push_back((k, data));
            }
        }
        let Some((k, data)) = self.current.pop_front() else {
            return Ok(None);
        };
        let pair = (self.paths[k].clone_ref(py), PyBytes::new(py, &data));
        Ok(Some(
            PyTuple::new(py, [pair.0.into_bound(py), pair.1.into_any()])?.unbind(),
        ))
    }

    /// Stop early: the units not started are dropped, the running ones waited for.
    fn close(&mut self, py: Python<'_>) {
        self.stop(py);
    }
}

impl Drop for ReadMany {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            Python::attach(|py| self.stop(py));
        }
    }
}
