//! Sets of bitmap positions as sorted runs, written in Roaring's portable serialization.
//!
//! A commit's reachable set in the traversal order is a few runs (docs/git-sections.md,
//! "Positions"), so the sets are kept as runs while the layout is built. They are written as
//! pyroaring writes `BitMap(values)` after `run_optimize()`: per 2^16 chunk an array (at
//! most 4,096 values), else a bitset, turned into runs when that is strictly smaller
//! (CRoaring's `convert_run_optimize`: an array of c values takes 2c bytes, a bitset 8 KiB, n
//! runs 2 + 4n). So a stored bitmap's bytes depend on the set alone.

/// Disjoint, non-adjacent half-open runs `[start, end)`, ascending.
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct Runs(pub Vec<(u32, u32)>);

impl Runs {
    pub fn contains(&self, x: u32) -> bool {
        let i = self.0.partition_point(|r| r.1 <= x);
        i < self.0.len() && self.0[i].0 <= x
    }

    pub fn add(&mut self, x: u32) {
        self.add_range(x, x + 1);
    }

    pub fn add_range(&mut self, start: u32, end: u32) {
        if start >= end {
            return;
        }
        // runs touching or overlapping [start, end) are merged into one
        let lo = self.0.partition_point(|r| r.1 < start);
        let hi = self.0.partition_point(|r| r.0 <= end);
        if lo == hi {
            self.0.insert(lo, (start, end));
            return;
        }
        let s = start.min(self.0[lo].0);
        let e = end.max(self.0[hi - 1].1);
        self.0.splice(lo..hi, [(s, e)]);
    }

    pub fn union(&self, other: &Runs) -> Runs {
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(self.0.len() + other.0.len());
        let (mut i, mut j) = (0, 0);
        while i < self.0.len() || j < other.0.len() {
            let take_a = j >= other.0.len() || (i < self.0.len() && self.0[i].0 <= other.0[j].0);
            let r = if take_a {
                i += 1;
                self.0[i - 1]
            } else {
                j += 1;
                other.0[j - 1]
            };
            match out.last_mut() {
                Some(last) if r.0 <= last.1 => last.1 = last.1.max(r.1),
                _ => out.push(r),
            }
        }
        Runs(out)
    }

    /// Roaring's portable serialization (module doc).
    pub fn serialize(&self) -> Vec<u8> {
        // per chunk (high 16 bits): the runs clipped to it, as (low start, low end - 1)
        let mut chunks: Vec<(u16, Vec<(u16, u16)>)> = Vec::new();
        for &(s, e) in &self.0 {
            let mut a = s;
            while a < e {
                let key = (a >> 16) as u16;
                let stop = e.min((u32::from(key) + 1) << 16);
                let run = ((a & 0xFFFF) as u16, ((stop - 1) & 0xFFFF) as u16);
                match chunks.last_mut() {
                    Some((k, runs)) if *k == key => runs.push(run),
                    _ => chunks.push((key, vec![run])),
                }
                a = stop;
            }
        }
        enum Kind {
            Array,
            Bitset,
            Run,
        }
        type Plan<'a> = (u16, u32, Kind, &'a Vec<(u16, u16)>);
        let mut plan: Vec<Plan<'_>> = Vec::with_capacity(chunks.len());
        for (key, runs) in &chunks {
            let card: u32 = runs
                .iter()
                .map(|&(a, b)| u32::from(b) - u32::from(a) + 1)
                .sum();
            let as_run = 2 + 4 * runs.len() as u32;
            let kind = if card <= 4096 {
                if as_run < 2 * card {
                    Kind::Run
                } else {
                    Kind::Array
                }
            } else if as_run < 8192 {
                Kind::Run
            } else {
                Kind::Bitset
            };
            plan.push((*key, card, kind, runs));
        }
        let size = plan.len();
        let has_run = plan.iter().any(|p| matches!(p.2, Kind::Run));
        let mut out: Vec<u8> = Vec::new();
        let mut start;
        if has_run {
            out.extend_from_slice(&(12347u32 | ((size as u32 - 1) << 16)).to_le_bytes());
            let mut flags = vec![0u8; size.div_ceil(8)];
            for (i, p) in plan.iter().enumerate() {
                if matches!(p.2, Kind::Run) {
                    flags[i / 8] |= 1 << (i % 8);
                }
            }
            out.extend_from_slice(&flags);
            start = 4 + 4 * size + flags.len() + if size >= 4 { 4 * size } else { 0 };
        } else {
            out.extend_from_slice(&12346u32.to_le_bytes());
            out.extend_from_slice(&(size as u32).to_le_bytes());
            start = 8 + 8 * size;
        }
        for p in &plan {
            out.extend_from_slice(&p.0.to_le_bytes());
            out.extend_from_slice(&((p.1 - 1) as u16).to_le_bytes());
        }
        if !has_run || size >= 4 {
            for p in &plan {
                out.extend_from_slice(&(start as u32).to_le_bytes());
                start += match p.2 {
                    Kind::Array => 2 * p.1 as usize,
                    Kind::Bitset => 8192,
                    Kind::Run => 2 + 4 * p.3.len(),
                };
            }
        }
        for p in &plan {
            match p.2 {
                Kind::Array => {
                    for &(a, b) in p.3 {
                        for v in a..=b {
                            out.extend_from_slice(&v.to_le_bytes());
                        }
                    }
                }
                Kind::Bitset => {
                    let mut words = [0u64; 1024];
                    for &(a, b) in p.3 {
                        for v in a..=b {
                            words[usize::from(v) / 64] |= 1 << (v % 64);
                        }
                    }
                    for w in words {
                        out.extend_from_slice(&w.to_le_bytes());
                    }
                }
                Kind::Run => {
                    out.extend_from_slice(&(p.3.len() as u16).to_le_bytes());
                    for &(a, b) in p.3 {
                        out.extend_from_slice(&a.to_le_bytes());
                        out.extend_from_slice(&(b - a).to_le_bytes());
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs() {
        let mut r = Runs::default();
        r.add_range(10, 20);
        r.add(25);
        r.add(20);
        assert_eq!(r.0, vec![(10, 21), (25, 26)]);
        r.add_range(21, 25);
        assert_eq!(r.0, vec![(10, 26)]);
        assert!(r.contains(10) && r.contains(25) && !r.contains(26) && !r.contains(9));
        let u = Runs(vec![(0, 2), (30, 40)]).union(&r);
        assert_eq!(u.0, vec![(0, 2), (10, 26), (30, 40)]);
        assert_eq!(
            Runs(vec![(0, 5)]).union(&Runs(vec![(5, 9)])).0,
            vec![(0, 9)]
        );
    }

    #[test]
    fn empty_and_small() {
        assert_eq!(Runs::default().serialize(), [58, 48, 0, 0, 0, 0, 0, 0]);
        // {1, 2, 3}: a run (6 bytes) is not smaller than the array (6): an array, as
        // CRoaring keeps it; {1, .., 4}: a run
        let s = Runs(vec![(1, 4)]).serialize();
        assert_eq!(&s[..4], &(12346u32).to_le_bytes());
        let s = Runs(vec![(1, 5)]).serialize();
        assert_eq!(&s[..4], &(12347u32).to_le_bytes());
    }
}
