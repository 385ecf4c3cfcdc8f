//! Ctrl-C while the GIL is released: the work checks the clock between items and, every
//! 20 ms, takes the GIL for `Python::check_signals` (a pending KeyboardInterrupt then ends
//! the work as a Python error). Signals reach the main thread only, so a worker thread's
//! ticker watches a flag the caller's ticker raises when it is interrupted, and the caller
//! waits for its workers checking signals meanwhile ([`Ticker::join`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;

const EVERY: Duration = Duration::from_millis(20);

pub struct Ticker {
    last: Instant,
    items: u32,
    /// `false` for a worker thread's ticker and in Rust unit tests (no interpreter)
    python: bool,
    /// raised when the caller's thread was interrupted: every worker stops
    stop: Arc<AtomicBool>,
}

impl Ticker {
    pub fn new() -> Self {
        Ticker {
            last: Instant::now(),
            items: 0,
            python: true,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A ticker that never takes the GIL (the unit tests').
    #[cfg(test)]
    pub fn quiet() -> Self {
        Ticker {
            python: false,
            ..Ticker::new()
        }
    }

    /// A worker thread's ticker: it stops when this one was interrupted.
    pub fn worker(&self) -> Self {
        Ticker {
            last: Instant::now(),
            items: 0,
            python: false,
            stop: self.stop.clone(),
        }
    }

    /// The flag a worker that does not tick (a hash over a buffer) watches.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Check signals now if 20 ms passed since the last check.
    pub fn check(&mut self) -> PyResult<()> {
        self.items = 0;
        if self.stop.load(Ordering::Relaxed) {
            return Err(PyKeyboardInterrupt::new_err("interrupted"));
        }
        if !self.python || self.last.elapsed() < EVERY {
            return Ok(());
        }
        self.last = Instant::now();
        let got = Python::attach(|py| py.check_signals());
        if got.is_err() {
            self.stop.store(true, Ordering::Relaxed);
        }
        got
    }

    /// Count `n` items done; look at the clock every 64.
    pub fn every(&mut self, n: u32) -> PyResult<()> {
        self.items += n;
        if self.items >= 64 {
            self.check()?;
        }
        Ok(())
    }

    /// A worker's result, checking signals while it runs (an interrupt raises the flag, so
    /// the worker ends soon; its scope joins it).
    pub fn join<T>(&mut self, handle: ScopedJoinHandle<'_, T>) -> PyResult<Option<T>> {
        while !handle.is_finished() {
            self.check()?;
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(handle.join().ok())
    }
}
