//! The commits and trees of a pack indexed from its `.idx`, inflated on two threads.
//!
//! A delta and its base have one type, and every delta of a commit or tree hangs, through
//! its chain, from one whole (non-delta) object: the objects fall into independent families
//! (a whole object and the deltas made from it). [`inflate_graph`] first lists the objects
//! in the order one thread would finish them (entry order, each delta chain base first:
//! the order of the graph's columns), then cuts the families into batches of about equal
//! compressed size, which two threads take one at a time (an atomic counter). Each batch
//! fills its own [`Graph`]; the graphs are then merged in the one-thread order, so the
//! columns are the same bytes whichever thread made which batch. A damaged object is
//! reported as one thread would report it: the first in that order.
//!
//! `std::thread::scope` and an atomic counter, not rayon: two threads over borrowed slices
//! of the mapped pack, a Ctrl-C flag shared with [`Ticker`], and no pool of threads kept
//! after the call (nor a crate) are all this needs.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use flate2::Decompress;

use super::index::{add_to_graph, pack_error, Fail};
use super::pack::{
    apply_delta, entry_header, hex, inflate_whole, object_id, COMMIT, OFS_DELTA, OID, TRAILER_LEN,
    TREE,
};
use super::parse::Graph;
use super::signals::Ticker;

/// Batches per thread: enough that a thread which started late (or was slowed by other
/// work on the machine) still gets its share.
const BATCHES_PER_THREAD: usize = 16;
/// Threads that inflate (the machine this is measured on has 2 cores).
const THREADS: usize = 2;

/// What the inflate reads: the pack, its `.idx` entries and their headers.
pub struct Entries<'a> {
    pub pack: &'a [u8],
    pub ids: &'a [[u8; OID]],
    pub offsets: &'a [u64],
    /// each entry's own kind (a delta's is OFS_DELTA or REF_DELTA)
    pub kinds: &'a [u8],
    /// each entry's real type (a delta's is its base's)
    pub types: &'a [u8],
    /// a delta's base (entry index)
    pub base: &'a [usize],
    /// where each entry's zlib stream starts
    pub data: &'a [usize],
    pub name: &'a str,
}

/// The one-thread order of the commits and trees and the batches cut from it.
struct Plan {
    /// entry indices, in the order one thread finishes them
    order: Vec<usize>,
    /// for each position of `order`: its batch
    batch_of: Vec<u32>,
    /// each batch's positions in `order`, ascending
    batches: Vec<Vec<u32>>,
    /// per entry: how many deltas of it are still to be made (only its batch's thread
    /// touches an entry, so relaxed order is enough)
    kids: Vec<AtomicU32>,
}

/// A batch's graph, or the first object (position in the order) that failed and why.
type Outcome = Result<Graph, (u32, Fail)>;

impl Entries<'_> {
    fn bound(&self, i: usize) -> usize {
        match self.offsets.get(i + 1) {
            Some(&next) => next as usize,
            None => self.pack.len() - TRAILER_LEN,
        }
    }

    fn size_of(&self, i: usize) -> u64 {
        let end = self.pack.len() - TRAILER_LEN;
        entry_header(self.pack, self.offsets[i] as usize, end).map_or(0, |h| h.1)
    }

    fn wanted(&self, i: usize) -> bool {
        matches!(self.types[i], COMMIT | TREE)
    }

    /// The order (module doc), each object's family, and the batches of families.
    fn plan(&self, parts: usize) -> Plan {
        let n = self.offsets.len();
        let mut done = vec![false; n];
        let mut family = vec![0u32; n];
        let mut cost: Vec<u64> = Vec::new();
        let mut order: Vec<usize> = Vec::new();
        let mut chain: Vec<usize> = Vec::new();
        let kids: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        for i in 0..n {
            if !self.wanted(i) || done[i] {
                continue;
            }
            chain.clear();
            let mut j = i;
            while !done[j] && self.kinds[j] >= OFS_DELTA {
                chain.push(j);
                j = self.base[j];
            }
            if !done[j] {
                done[j] = true;
                family[j] = cost.len() as u32;
                cost.push(0);
                order.push(j);
            }
            cost[family[j] as usize] += (self.bound(j) - self.offsets[j] as usize) as u64 + 64;
            for &k in chain.iter().rev() {
                done[k] = true;
                let f = family[self.base[k]];
                family[k] = f;
                cost[f as usize] += (self.bound(k) - self.offsets[k] as usize) as u64 + 64;
                kids[self.base[k]].fetch_add(1, Ordering::Relaxed);
                order.push(k);
            }
        }
        // families (numbered in order of their first object) cut into runs of about equal cost
        let total: u64 = cost.iter().sum();
        let share = total / parts.max(1) as u64 + 1;
        let mut batch_of_family = Vec::with_capacity(cost.len());
        let (mut b, mut filled) = (0u32, 0u64);
        for c in &cost {
            if filled >= share {
                b += 1;
                filled = 0;
            }
            batch_of_family.push(b);
            filled += c;
        }
        let count = if cost.is_empty() { 0 } else { b as usize + 1 };
        let mut batches: Vec<Vec<u32>> = vec![Vec::new(); count];
        let batch_of: Vec<u32> = order
            .iter()
            .enumerate()
            .map(|(pos, &k)| {
                let b = batch_of_family[family[k] as usize];
                batches[b as usize].push(pos as u32);
                b
            })
            .collect();
        Plan {
            order,
            batch_of,
            batches,
            kids,
        }
    }

    /// One batch's objects inflated (deltas applied to their bases, kept while deltas of
    /// them are still to be made), hashed against their ids and parsed, in order.
    fn run_batch(
        &self,
        plan: &Plan,
        positions: &[u32],
        d: &mut Decompress,
        tick: &mut Ticker,
    ) -> Outcome {
        let name = self.name;
        let mut graph = Graph::default();
        let mut made: HashMap<usize, Rc<Vec<u8>>> = HashMap::new();
        let bad_zlib = |i: usize| {
            Fail::Mismatch(format!(
                "pack {name}: object at offset {}: its zlib stream does not end with its entry",
                self.offsets[i]
            ))
        };
        for &pos in positions {
            let k = plan.order[pos as usize];
            let at = |e: Fail| (pos, e);
            let stream = &self.pack[self.data[k]..self.bound(k)];
            let raw = inflate_whole(d, stream, self.size_of(k)).ok_or_else(|| at(bad_zlib(k)))?;
            let content = if self.kinds[k] >= OFS_DELTA {
                let b = self.base[k];
                let base = made.get(&b).cloned().unwrap_or_default();
                let next = apply_delta(&base, &raw).map_err(|why| {
                    at(pack_error(format!(
                        "pack {name}: object at offset {}: delta does not apply ({why})",
                        self.offsets[k]
                    )))
                })?;
                if plan.kids[b].fetch_sub(1, Ordering::Relaxed) == 1 {
                    made.remove(&b);
                }
                next
            } else {
                raw
            };
            self.finish(k, &content, &mut graph).map_err(at)?;
            if plan.kids[k].load(Ordering::Relaxed) > 0 {
                made.insert(k, Rc::new(content));
            }
            tick.every(1).map_err(|e| at(Fail::Py(e)))?;
        }
        Ok(graph)
    }

    /// An inflated commit or tree: hashed against its `.idx` id, then parsed into the graph.
    fn finish(&self, i: usize, content: &[u8], graph: &mut Graph) -> Result<(), Fail> {
        let kind = self.types[i];
        if object_id(kind, content) != self.ids[i] {
            return Err(Fail::Mismatch(format!(
                "pack {}: object at offset {} does not hash to its .idx id {}",
                self.name,
                self.offsets[i],
                hex(&self.ids[i])
            )));
        }
        add_to_graph(kind, &self.ids[i], content, self.name, graph)
    }

    /// Batches taken from `next` until none is left (or this thread was interrupted).
    fn work(&self, plan: &Plan, next: &AtomicUsize, tick: &mut Ticker) -> Vec<(usize, Outcome)> {
        let mut d = Decompress::new(true);
        let mut out = Vec::new();
        loop {
            let b = next.fetch_add(1, Ordering::Relaxed);
            let Some(positions) = plan.batches.get(b) else {
                break;
            };
            let got = self.run_batch(plan, positions, &mut d, tick);
            let stop = matches!(got, Err((_, Fail::Py(_))));
            out.push((b, got));
            if stop {
                break;
            }
        }
        out
    }
}

/// The commits and trees of the pack (module doc): the graph one thread would make.
pub fn inflate_graph(entries: &Entries<'_>, tick: &mut Ticker) -> Result<Graph, Fail> {
    let plan = entries.plan(THREADS * BATCHES_PER_THREAD);
    tick.check()?;
    let next = AtomicUsize::new(0);
    let mut outcomes: Vec<Option<Outcome>> = (0..plan.batches.len()).map(|_| None).collect();
    std::thread::scope(|scope| -> Result<(), Fail> {
        let mut worker = tick.worker();
        let (plan, next) = (&plan, &next);
        let helper = scope.spawn(move || entries.work(plan, next, &mut worker));
        let mine = entries.work(plan, next, tick);
        let theirs = tick.join(helper)?.ok_or_else(|| {
            pack_error(format!("pack {}: an inflating thread failed", entries.name))
        })?;
        for (b, got) in mine.into_iter().chain(theirs) {
            outcomes[b] = Some(got);
        }
        Ok(())
    })?;
    let mut graphs = Vec::with_capacity(outcomes.len());
    let mut first: Option<(u32, Fail)> = None;
    for got in outcomes {
        match got {
            Some(Ok(g)) => graphs.push(g),
            Some(Err((_, Fail::Py(e)))) => return Err(Fail::Py(e)),
            Some(Err((pos, why))) => {
                if first.as_ref().is_none_or(|f| pos < f.0) {
                    first = Some((pos, why));
                }
                graphs.push(Graph::default());
            }
            // a batch no thread reached: only after an interrupt, which ends the work
            None => {
                return Err(Fail::Py(pyo3::exceptions::PyKeyboardInterrupt::new_err(
                    "interrupted",
                )))
            }
        }
    }
    if let Some((_, why)) = first {
        return Err(why);
    }
    Ok(merge(&plan, entries.types, &graphs))
}

/// The batches' graphs as one, in the one-thread order.
fn merge(plan: &Plan, types: &[u8], graphs: &[Graph]) -> Graph {
    let mut out = Graph::default();
    let (mut commits, mut trees) = (0usize, 0usize);
    for g in graphs {
        commits += g.times.len();
        trees += g.tree_ids.len() / OID;
    }
    out.commit_ids.reserve(commits * OID);
    out.tree_of.reserve(commits * OID);
    out.times.reserve(commits);
    out.parent_counts.reserve(commits);
    out.tree_ids.reserve(trees * OID);
    let edges: usize = graphs.iter().map(|g| g.edge_tree.len()).sum();
    out.edge_tree.reserve(edges);
    out.edge_sub.reserve(edges);
    out.edge_ids.reserve(edges * OID);
    // per batch: the next commit, parent byte, tree and edge to take
    let mut at = vec![(0usize, 0usize, 0usize, 0usize); graphs.len()];
    for (pos, &k) in plan.order.iter().enumerate() {
        let b = plan.batch_of[pos] as usize;
        let g = &graphs[b];
        let (c, p, t, e) = &mut at[b];
        if types[k] == COMMIT {
            let id = *c * OID..(*c + 1) * OID;
            out.commit_ids.extend_from_slice(&g.commit_ids[id.clone()]);
            out.tree_of.extend_from_slice(&g.tree_of[id]);
            let parents = g.parent_counts[*c];
            out.parent_counts.push(parents);
            let stop = *p + parents as usize * OID;
            out.parent_ids.extend_from_slice(&g.parent_ids[*p..stop]);
            out.times.push(g.times[*c]);
            *p = stop;
            *c += 1;
        } else {
            let tree = (out.tree_ids.len() / OID) as u32;
            out.tree_ids
                .extend_from_slice(&g.tree_ids[*t * OID..(*t + 1) * OID]);
            while *e < g.edge_tree.len() && g.edge_tree[*e] as usize == *t {
                out.edge_tree.push(tree);
                out.edge_sub.push(g.edge_sub[*e]);
                out.edge_ids
                    .extend_from_slice(&g.edge_ids[*e * OID..(*e + 1) * OID]);
                *e += 1;
            }
            *t += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::index::tests::zlib;
    use crate::git::pack::REF_DELTA;

    fn tree(names: &[u32]) -> Vec<u8> {
        let mut t = Vec::new();
        for &k in names {
            t.extend_from_slice(
                format!("{} f{k}\0", if k % 3 == 0 { "40000" } else { "100644" }).as_bytes(),
            );
            t.extend_from_slice(&[k as u8; OID]);
        }
        t
    }

    /// 40 trees, a commit, then a delta of each tree (last first, so the families'
    /// objects interleave in the order) and a delta of a delta: the graph two threads make
    /// from many batches is the one a single batch makes, in the same order.
    #[test]
    fn many_batches_merge_in_the_one_thread_order() {
        let mut pack = b"PACK\0\0\0\x02\0\0\0\0".to_vec();
        let (mut offsets, mut data, mut kinds, mut types, mut base, mut ids) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let mut push = |kind: u8, ty: u8, b: usize, stored: &[u8], content: &[u8]| {
            offsets.push(pack.len() as u64);
            let n = stored.len();
            pack.push((kind << 4) | 0x80 | (n & 15) as u8);
            pack.push(((n >> 4) & 0x7F) as u8 | 0x80);
            pack.push((n >> 11) as u8);
            data.push(pack.len());
            pack.extend(zlib(stored));
            kinds.push(kind);
            types.push(ty);
            base.push(b);
            ids.push(object_id(ty, content));
        };
        let trees: Vec<Vec<u8>> = (0..40).map(|i| tree(&[i, i + 1])).collect();
        for t in &trees {
            push(TREE, TREE, usize::MAX, t, t);
        }
        let commit = format!(
            "tree {}\ncommitter C <c> 7 +0000\n\nm\n",
            hex(&object_id(TREE, &trees[0]))
        );
        push(
            COMMIT,
            COMMIT,
            usize::MAX,
            commit.as_bytes(),
            commit.as_bytes(),
        );
        let mut grown = Vec::new();
        for i in (0..40).rev() {
            let extra = tree(&[200 + i]);
            let mut target = trees[i as usize].clone();
            target.extend_from_slice(&extra);
            let mut delta = vec![target.len() as u8 - extra.len() as u8, target.len() as u8];
            delta.extend_from_slice(&[0x90, (target.len() - extra.len()) as u8, extra.len() as u8]);
            delta.extend_from_slice(&extra);
            push(REF_DELTA, TREE, i as usize, &delta, &target);
            grown.push(target);
        }
        // a delta of the last delta: its first 5 bytes
        let last = grown.last().unwrap().clone();
        push(
            OFS_DELTA,
            TREE,
            80,
            &[last.len() as u8, 5, 0x90, 5],
            &last[..5],
        );
        pack.extend_from_slice(&[0; TRAILER_LEN]);
        let name = "t.pack";
        let e = Entries {
            pack: &pack,
            ids: &ids,
            offsets: &offsets,
            kinds: &kinds,
            types: &types,
            base: &base,
            data: &data,
            name,
        };
        assert!(e.plan(THREADS * BATCHES_PER_THREAD).batches.len() > 8);
        let two = match inflate_graph(&e, &mut Ticker::quiet()) {
            Ok(g) => g,
            Err(_) => panic!("the objects inflate"),
        };
        let mut one = Graph::default();
        let order: Vec<usize> = (0..41).chain(41..82).collect();
        for &k in &order {
            let content = if k < 40 {
                trees[k].clone()
            } else if k == 40 {
                commit.clone().into_bytes()
            } else if k < 81 {
                grown[k - 41].clone()
            } else {
                last[..5].to_vec()
            };
            add_to_graph(types[k], &ids[k], &content, name, &mut one)
                .ok()
                .unwrap();
        }
        assert_eq!(two.tree_ids, one.tree_ids);
        assert_eq!(two.edge_tree, one.edge_tree);
        assert_eq!(two.edge_sub, one.edge_sub);
        assert_eq!(two.edge_ids, one.edge_ids);
        assert_eq!(two.commit_ids, one.commit_ids);
        assert_eq!(two.tree_of, one.tree_of);
        assert_eq!(two.times, vec![7]);
        // a damaged object: the first in the order is named, as one thread names it
        let mut bad = ids.clone();
        bad[75][0] ^= 1;
        bad[50][0] ^= 1;
        let e = Entries { ids: &bad, ..e };
        match inflate_graph(&e, &mut Ticker::quiet()) {
            Err(Fail::Mismatch(why)) => {
                assert!(why.contains(&format!("offset {} ", offsets[50])), "{why}")
            }
            _ => panic!("a damaged object is a mismatch"),
        }
    }
}
