//! The three git sections' contents from the indexed packs (docs/git-sections.md):
//! every object once (the first pack that holds it wins) in oid order, the commit graph
//! (generation, corrected date), git's bitmap selection, the bitmap positions (traversal
//! order) and the stored reachability bitmaps. All iterative, over object ordinals; an id a
//! commit or tree names that the archive does not hold gets a negative code of its own
//! (`-2 - k`), so it is counted once as absent.

use std::collections::{HashMap, HashSet};

use super::bitmap::Runs;
use super::index::{Fail, Indexed};
use super::pack::OID;
use super::signals::Ticker;
use crate::errors::{Error, Kind};

type Id = [u8; OID];

/// What the sections are built from (columns, in oid order or graph-row order).
#[derive(Default, Debug)]
pub struct Sections {
    pub ids: Vec<u8>,
    pub pack_rows: Vec<u32>,
    pub offsets: Vec<u64>,
    pub types: Vec<u8>,
    /// `order[p]`: the ordinal at position p
    pub order: Vec<u32>,
    pub commit_ids: Vec<u8>,
    pub parent_offsets: Vec<i32>,
    pub parent_ids: Vec<u8>,
    pub tree_of: Vec<u8>,
    pub generation: Vec<u32>,
    pub times: Vec<i64>,
    pub corrected: Vec<i64>,
    pub position: Vec<u32>,
    pub block: Vec<u32>,
    pub absent: u64,
    pub irregular: u64,
    pub reach_ids: Vec<u8>,
    pub reach_offsets: Vec<i32>,
    pub reach_data: Vec<u8>,
}

fn id_of(raw: &[u8], i: usize) -> Id {
    let mut out = [0u8; OID];
    out.copy_from_slice(&raw[OID * i..OID * (i + 1)]);
    out
}

/// Hashes an object id by its first 8 bytes: ids are SHA-1s, already uniform (a map keyed
/// by id then costs one load, not SipHash over 20 bytes).
#[derive(Default)]
struct IdHash(u64);

impl std::hash::Hasher for IdHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        if bytes.len() >= 8 {
            self.0 = u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8]));
        } else {
            for &b in bytes {
                self.0 = self.0.rotate_left(8) ^ u64::from(b);
            }
        }
    }

    fn write_usize(&mut self, _: usize) {} // the slice length: always 20
}

type IdMap<V> = HashMap<Id, V, std::hash::BuildHasherDefault<IdHash>>;

/// Object ordinals by id; absent ids get `-2 - k`, one code per distinct id.
struct Table {
    ids: Vec<Id>,
    ordinal: IdMap<u32>,
    absent: IdMap<i64>,
}

impl Table {
    fn new(ids: Vec<Id>) -> Table {
        let mut ordinal = IdMap::with_capacity_and_hasher(ids.len(), Default::default());
        for (i, id) in ids.iter().enumerate() {
            ordinal.insert(*id, i as u32);
        }
        Table {
            ids,
            ordinal,
            absent: IdMap::default(),
        }
    }

    fn find(&mut self, id: &Id) -> i64 {
        match self.ordinal.get(id) {
            Some(&i) => i64::from(i),
            None => {
                let k = self.absent.len() as i64;
                *self.absent.entry(*id).or_insert(-2 - k)
            }
        }
    }
}

struct Commit {
    ordinal: usize,
    tree: i64,
    parents: Vec<i64>,
    time: i64,
    pack: usize,
    /// its row among the pack's commits, and where its parents start in the pack's list
    row: usize,
    index: usize,
}

fn cycle() -> Fail {
    Fail::Pack(Error::new(
        Kind::Format,
        "the commits' parent links form a cycle",
    ))
}

/// Depth-first post-order from `roots`, first parent first (iterative): every commit after
/// all its parents; a commit no root reaches is left out.
fn post_order(parents: &[Vec<usize>], roots: &[usize]) -> Vec<usize> {
    let mut seen = vec![false; parents.len()];
    let mut out = Vec::with_capacity(parents.len());
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for &root in roots {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        stack.push((root, 0));
        while let Some(top) = stack.last_mut() {
            let (k, mut i) = *top;
            let ps = &parents[k];
            while i < ps.len() && seen[ps[i]] {
                i += 1;
            }
            if i < ps.len() {
                top.1 = i + 1;
                seen[ps[i]] = true;
                stack.push((ps[i], 0));
            } else {
                stack.pop();
                out.push(k);
            }
        }
    }
    out
}

const MUST_REGION: usize = 100;
const MIN_REGION: usize = 20_000;
const MIN_COMMITS: usize = 100;
const MAX_COMMITS: usize = 5_000;

/// git's `next_commit_index`: how many commits to skip after the `idx`-th newest.
fn next_commit_index(idx: usize) -> usize {
    if idx <= MUST_REGION {
        0
    } else if idx <= MIN_REGION {
        (idx - MUST_REGION).min(MIN_COMMITS)
    } else {
        (idx - MIN_REGION).clamp(MIN_COMMITS, MAX_COMMITS)
    }
}

/// git's `bitmap_writer_select_commits` over commit indices (newest committer time first,
/// ties by ordinal); `merge[k]`: the commit names more than one parent.
fn select(times: &[i64], keys: &[usize], merge: &[bool], prefer: &HashSet<usize>) -> Vec<bool> {
    let n = keys.len();
    let mut ordered: Vec<usize> = (0..n).collect();
    ordered.sort_by_key(|&k| (std::cmp::Reverse(times[k]), keys[k]));
    let mut chosen = vec![n < MUST_REGION; n];
    if n < MUST_REGION {
        return chosen;
    }
    let mut i = 0;
    loop {
        let step = next_commit_index(i);
        if i + step >= n {
            break;
        }
        let pick = if step == 0 {
            ordered[i]
        } else {
            let mut pick = ordered[i + step];
            for j in 0..=step {
                let cm = ordered[i + j];
                if prefer.contains(&cm) {
                    pick = cm;
                    break;
                }
                if merge[cm] {
                    pick = cm;
                }
            }
            pick
        };
        chosen[pick] = true;
        i += step + 1;
    }
    chosen
}

/// Build the sections' columns from `packs` (in pack-ordinal order, with their lookup rows).
/// `prefer`: ids refs name; `walk_bound <= 0` stores every commit's bitmap.
pub fn build(
    packs: &[(&Indexed, u32)],
    prefer: &[Id],
    walk_bound: i64,
    tick: &mut Ticker,
) -> Result<Sections, Fail> {
    let mut out = Sections::default();
    // every object once, in oid order; the earliest pack wins a shared id
    let mut all: Vec<(Id, usize, usize)> = Vec::new();
    for (k, (p, _row)) in packs.iter().enumerate() {
        for i in 0..p.types.len() {
            all.push((id_of(&p.ids, i), k, i));
        }
    }
    all.sort_unstable();
    all.dedup_by(|b, a| a.0 == b.0);
    let count = all.len();
    for (id, k, i) in &all {
        out.ids.extend_from_slice(id);
        out.pack_rows.push(packs[*k].1);
        out.offsets.push(packs[*k].0.offsets[*i]);
        out.types.push(packs[*k].0.types[*i]);
    }
    let mut table = Table::new(all.iter().map(|a| a.0).collect());
    drop(all);
    tick.check()?;
    // commits, ascending ordinal (the first pack that holds one wins)
    let mut by_ordinal: Vec<Option<Commit>> = (0..count).map(|_| None).collect();
    for (k, (p, _row)) in packs.iter().enumerate() {
        let g = &p.graph;
        let mut at = 0usize;
        for c in 0..g.parent_counts.len() {
            let n = g.parent_counts[c] as usize;
            let o = table.find(&id_of(&g.commit_ids, c));
            let parents = (at..at + n)
                .map(|j| table.find(&id_of(&g.parent_ids, j)))
                .collect();
            let tree = table.find(&id_of(&g.tree_of, c));
            if o >= 0 && by_ordinal[o as usize].is_none() {
                by_ordinal[o as usize] = Some(Commit {
                    ordinal: o as usize,
                    tree,
                    parents,
                    time: g.times[c],
                    pack: k,
                    row: c,
                    index: at,
                });
            }
            at += n;
        }
    }
    let commits: Vec<Commit> = by_ordinal.into_iter().flatten().collect();
    let n = commits.len();
    // trees: ordinal -> (subtrees, blobs), entry order; the first pack wins
    let mut trees: Vec<Option<(Vec<i64>, Vec<i64>)>> = (0..count).map(|_| None).collect();
    for (p, _row) in packs {
        let g = &p.graph;
        let owners: Vec<i64> = (0..g.tree_ids.len() / OID)
            .map(|t| table.find(&id_of(&g.tree_ids, t)))
            .collect();
        let fresh: Vec<bool> = owners
            .iter()
            .map(|&o| o >= 0 && trees[o as usize].is_none())
            .collect();
        let mut made: Vec<Option<(Vec<i64>, Vec<i64>)>> = vec![None; owners.len()];
        for e in 0..g.edge_tree.len() {
            let t = g.edge_tree[e] as usize;
            if !fresh[t] {
                continue;
            }
            let code = table.find(&id_of(&g.edge_ids, e));
            let entry = made[t].get_or_insert_with(Default::default);
            if g.edge_sub[e] != 0 {
                entry.0.push(code);
            } else {
                entry.1.push(code);
            }
        }
        for (t, m) in made.into_iter().enumerate() {
            if fresh[t] {
                trees[owners[t] as usize] = Some(m.unwrap_or_default());
            }
        }
    }
    tick.check()?;
    // commit links: parents present (no repeats, in order), children counts, absent parents
    let mut index_of = vec![usize::MAX; count];
    for (k, c) in commits.iter().enumerate() {
        index_of[c.ordinal] = k;
    }
    let mut absent: HashSet<i64> = HashSet::new();
    let mut par: Vec<Vec<usize>> = Vec::with_capacity(n);
    let mut children = vec![0usize; n];
    for c in &commits {
        let mut got: Vec<usize> = Vec::with_capacity(c.parents.len());
        for &p in &c.parents {
            let k = if p >= 0 {
                index_of[p as usize]
            } else {
                usize::MAX
            };
            if k == usize::MAX {
                absent.insert(p);
            } else if !got.contains(&k) {
                got.push(k);
                children[k] += 1;
            }
        }
        par.push(got);
    }
    // generations over a post-order from the tips (by ordinal)
    let tips: Vec<usize> = (0..n).filter(|&k| children[k] == 0).collect();
    let topo = post_order(&par, &tips);
    if topo.len() != n {
        return Err(cycle());
    }
    let mut gen = vec![0u32; n];
    let mut corrected = vec![0i64; n];
    for &k in &topo {
        let (mut g, mut c) = (1u32, commits[k].time);
        for &p in &par[k] {
            g = g.max(gen[p] + 1);
            c = c.max(corrected[p] + 1);
        }
        gen[k] = g;
        corrected[k] = c;
    }
    // which commits get a stored bitmap
    let keys: Vec<usize> = commits.iter().map(|c| c.ordinal).collect();
    let times: Vec<i64> = commits.iter().map(|c| c.time).collect();
    let chosen = if walk_bound <= 0 {
        vec![true; n]
    } else {
        let prefer: HashSet<usize> = prefer
            .iter()
            .filter_map(|id| table.ids.binary_search(id).ok())
            .map(|o| index_of[o])
            .filter(|&k| k != usize::MAX)
            .collect();
        let merge: Vec<bool> = commits.iter().map(|c| c.parents.len() > 1).collect();
        select(&times, &keys, &merge, &prefer)
    };
    let bound = walk_bound.max(1) as u64;
    tick.check()?;
    // the layout: commits in post-order from the tips (largest generation first), each
    // followed by its block
    let mut roots = tips;
    roots.sort_by_key(|&k| (std::cmp::Reverse(gen[k]), keys[k]));
    let order = post_order(&par, &roots);
    if order.len() != n {
        return Err(cycle());
    }
    let mut where_ = vec![u32::MAX; count];
    let mut positions: Vec<u32> = Vec::with_capacity(count);
    let mut blocks = vec![(0u32, 0u32); n];
    let mut kept: Vec<(usize, Runs)> = Vec::new();
    let mut pending = children.clone();
    let mut sets: Vec<Option<Runs>> = vec![None; n];
    let mut est = vec![0u64; n];
    let mut irregular = 0u64;
    let mut todo: Vec<i64> = Vec::new();
    for (step, &k) in order.iter().enumerate() {
        if step % 256 == 255 {
            tick.check()?;
        }
        let oid = keys[k];
        let present = &par[k];
        let mut s = match present.len() {
            0 => Runs::default(),
            1 if pending[present[0]] == 1 => sets[present[0]].take().unwrap_or_default(),
            1 => sets[present[0]].clone().unwrap_or_default(),
            _ => {
                let mut u = Runs::default();
                for &p in present {
                    if let Some(sp) = &sets[p] {
                        u = u.union(sp);
                    }
                }
                u
            }
        };
        let start = positions.len() as u32;
        where_[oid] = start;
        positions.push(oid as u32);
        let mut odd = false;
        todo.clear();
        todo.push(commits[k].tree);
        while let Some(t) = todo.pop() {
            if t < 0 {
                absent.insert(t);
                continue;
            }
            let t = t as usize;
            let at = where_[t];
            if at == u32::MAX {
                where_[t] = positions.len() as u32;
                positions.push(t as u32);
            } else if at >= start || s.contains(at) {
                continue;
            } else {
                odd = true;
                s.add(at);
            }
            let Some((subtrees, blobs)) = &trees[t] else {
                continue;
            };
            for &b in blobs {
                if b < 0 {
                    absent.insert(b);
                    continue;
                }
                let at = where_[b as usize];
                if at == u32::MAX {
                    where_[b as usize] = positions.len() as u32;
                    positions.push(b as u32);
                } else if at < start && !s.contains(at) {
                    odd = true;
                    s.add(at);
                }
            }
            todo.extend(subtrees.iter().rev());
        }
        let end = positions.len() as u32;
        s.add_range(start, end);
        blocks[k] = (start, end - start);
        let mut walk = 1u64;
        for &p in present {
            walk += est[p];
            pending[p] -= 1;
            if pending[p] == 0 {
                sets[p] = None;
            }
        }
        if odd || chosen[k] || walk > bound {
            kept.push((k, s.clone()));
            walk = 0;
            irregular += u64::from(odd);
        }
        est[k] = walk;
        if pending[k] > 0 {
            sets[k] = Some(s);
        }
    }
    positions.extend((0..count as u32).filter(|&o| where_[o as usize] == u32::MAX));
    // the columns
    out.order = positions;
    out.absent = absent.len() as u64;
    out.irregular = irregular;
    out.parent_offsets.push(0);
    for (k, c) in commits.iter().enumerate() {
        let g = &packs[c.pack].0.graph;
        out.commit_ids.extend_from_slice(&table.ids[c.ordinal]);
        out.parent_ids
            .extend_from_slice(&g.parent_ids[OID * c.index..OID * (c.index + c.parents.len())]);
        out.parent_offsets.push((out.parent_ids.len() / OID) as i32);
        let row = c.row;
        out.tree_of
            .extend_from_slice(&g.tree_of[OID * row..OID * (row + 1)]);
        out.generation.push(gen[k]);
        out.times.push(c.time);
        out.corrected.push(corrected[k]);
        out.position.push(blocks[k].0);
        out.block.push(blocks[k].1);
    }
    kept.sort_unstable_by_key(|(k, _)| keys[*k]);
    out.reach_offsets.push(0);
    for (k, s) in &kept {
        out.reach_ids.extend_from_slice(&table.ids[keys[*k]]);
        out.reach_data.extend_from_slice(&s.serialize());
        out.reach_offsets.push(out.reach_data.len() as i32);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_selection_windows() {
        let got: Vec<usize> = [0, 100, 101, 150, 200, 20_000, 20_001, 30_000]
            .iter()
            .map(|&i| next_commit_index(i))
            .collect();
        assert_eq!(got, vec![0, 0, 1, 50, 100, 100, 100, 5000]);
    }

    #[test]
    fn post_order_puts_parents_first() {
        // 0 <- 1 <- 2, 0 <- 3 <- 2 (2 merges 1 and 3)
        let parents = vec![vec![], vec![0], vec![1, 3], vec![0]];
        assert_eq!(post_order(&parents, &[2]), vec![0, 1, 3, 2]);
    }
}
