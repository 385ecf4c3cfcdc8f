//! Ctrl-C while the GIL is released: the work checks the clock between items and, every
//! 20 ms, takes the GIL for `Python::check_signals` (a pending KeyboardInterrupt then ends
//! the work as a Python error).

use std::time::{Duration, Instant};

use pyo3::prelude::*;

const EVERY: Duration = Duration::from_millis(20);

pub struct Ticker {
    last: Instant,
    items: u32,
    /// `false` in Rust unit tests (no interpreter)
    python: bool,
}

impl Ticker {
    pub fn new() -> Self {
        Ticker {
            last: Instant::now(),
            items: 0,
            python: true,
        }
    }

    /// A ticker that never takes the GIL: a worker thread's (signals reach the main thread
    /// only) and the unit tests'.
    pub fn quiet() -> Self {
        Ticker {
            last: Instant::now(),
            items: 0,
            python: false,
        }
    }

    /// Check signals now if 20 ms passed since the last check.
    pub fn check(&mut self) -> PyResult<()> {
        self.items = 0;
        if !self.python || self.last.elapsed() < EVERY {
            return Ok(());
        }
        self.last = Instant::now();
        Python::attach(|py| py.check_signals())
    }

    /// Count `n` items done; look at the clock every 64.
    pub fn every(&mut self, n: u32) -> PyResult<()> {
        self.items += n;
        if self.items >= 64 {
            self.check()?;
        }
        Ok(())
    }
}
