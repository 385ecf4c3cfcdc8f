//! The workers: each takes the next unit, writes its files (or one run of a big file) and
//! reports every file's outcome.

use super::*;

impl Job {
    /// Write one file; its size.
    pub(super) fn write_file(&self, w: &mut Worker, item: &Item<'_>) -> Result<u64, Fail> {
        let rows = self.cols.file_rows(&item.path, item.row)?;
        let (rel, name) = match item.name.iter().rposition(|b| *b == b'/') {
            Some(at) => (&item.name[..at], &item.name[at + 1..]),
            None => (&b""[..], item.name),
        };
        let dir = self.dir(w, rel).map_err(write_fail)?;
        let final_name = cstr(name)?;
        let (file, tmp) = self.create(dir, name)?;
        let result = self
            .fill(w, item, rows, &file)
            .and_then(|n| self.finish(&file, item).map(|_| n))
            .and_then(|n| self.place(dir, &file, &tmp, &final_name).map(|_| n));
        drop(file);
        if result.is_err() && !tmp.is_empty() {
            // SAFETY: as above; nothing is left under either name (an unnamed file: gone)
            unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
        }
        result
    }

    pub(super) fn stopped(&self) -> bool {
        self.interrupt.load(Ordering::Relaxed)
    }

    /// Count a file's outcome; false when the extract must stop.
    pub(super) fn tally(&self, rep: &mut Reported, k: usize, got: Result<u64, Fail>) -> bool {
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

    /// One run of a big file; its outcome when it was the file's last run.
    pub(super) fn run(
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
                .and_then(|_| self.place(dir.as_raw_fd(), &file, &tmp, &name))
                .map(|_| bytes),
        };
        drop(file);
        if result.is_err() && !tmp.is_empty() {
            // SAFETY: NUL-terminated name relative to an open directory
            unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
        }
        Some(result)
    }

    pub(super) fn work(
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
            rbuf: Vec::new(),
            dbuf: Vec::new(),
            spare: Vec::new(),
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
