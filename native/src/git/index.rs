//! One pack indexed: every object's id, real type and entry offset, and its commits and
//! trees parsed (docs/git-sections.md, "`git import`").
//!
//! [`index_with_idx`] takes ids and offsets from the pack's checked `.idx` and inflates only
//! the commits and trees (hashing each against its `.idx` id); any mismatch between the
//! `.idx` and the pack sends the caller to [`parse_whole`], which inflates and hashes every
//! object and names the damaged one.

use std::collections::HashMap;
use std::rc::Rc;

use std::sync::atomic::{AtomicBool, Ordering};

use flate2::Decompress;
use pyo3::exceptions::PyKeyboardInterrupt;
use sha1::{Digest, Sha1};

use super::pack::{
    apply_delta, bytes_repr, entry_header, hex, inflate, object_id, ofs_distance, sha1, COMMIT,
    HEADER_LEN, OFS_DELTA, OID, REF_DELTA, TRAILER_LEN, TREE,
};
use super::parse::Graph;
use super::signals::Ticker;
use super::spread::{inflate_graph, Entries};
use crate::errors::{Error, Kind};

/// A failure of the indexing: a damaged pack (a `PackError`), a `.idx` that does not describe
/// the pack (the caller parses the pack whole), or an interrupt / a Python error raised by an
/// external-base callback.
pub enum Fail {
    Pack(Error),
    Mismatch(String),
    Py(pyo3::PyErr),
}

impl From<pyo3::PyErr> for Fail {
    fn from(e: pyo3::PyErr) -> Self {
        Fail::Py(e)
    }
}

pub fn pack_error(message: String) -> Fail {
    Fail::Pack(Error::new(Kind::Pack, message))
}

/// Every object of one pack, in entry order, and its commits and trees.
#[derive(Default, Debug)]
pub struct Indexed {
    pub ids: Vec<u8>,
    pub types: Vec<u8>,
    pub offsets: Vec<u64>,
    pub external_bases: u64,
    pub graph: Graph,
}

/// `(type, content)` of an object outside this pack, by id (a thin pack's REF base).
pub type External<'a> = dyn FnMut(&[u8; OID]) -> Result<Option<(u8, Vec<u8>)>, pyo3::PyErr> + 'a;

/// The object count, after checking length, magic and version.
pub fn check_header(pack: &[u8], name: &str) -> Result<u32, Fail> {
    if pack.len() < HEADER_LEN + TRAILER_LEN {
        return Err(pack_error(format!(
            "pack {name}: {} bytes, too short for a pack",
            pack.len()
        )));
    }
    if &pack[..4] != b"PACK" {
        return Err(pack_error(format!(
            "pack {name}: wrong magic {} (not a git pack)",
            bytes_repr(&pack[..4])
        )));
    }
    let version = u32::from_be_bytes([pack[4], pack[5], pack[6], pack[7]]);
    if version != 2 && version != 3 {
        return Err(pack_error(format!(
            "pack {name}: unsupported pack version {version}"
        )));
    }
    Ok(u32::from_be_bytes([pack[8], pack[9], pack[10], pack[11]]))
}

/// Whether the pack's trailing SHA-1 is the SHA-1 of everything before it (hashed 4 MiB at
/// a time; `None` when `stop` was raised meanwhile).
pub fn trailer_ok(pack: &[u8], stop: &AtomicBool) -> Option<bool> {
    let end = pack.len() - TRAILER_LEN;
    let mut h = Sha1::new();
    for part in pack[..end].chunks(4 << 20) {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        h.update(part);
    }
    let sum: [u8; OID] = h.finalize().into();
    Some(sum[..] == pack[end..])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn id_at(b: &[u8], at: usize) -> [u8; OID] {
    let mut out = [0u8; OID];
    out.copy_from_slice(&b[at..at + OID]);
    out
}

/// `(ids, offsets, crc32s)` of a `.idx`, in pack order.
type IdxEntries = (Vec<[u8; OID]>, Vec<u64>, Vec<u32>);

/// The `.idx` entries in pack order: `(ids, offsets, crc32s)`, checked (docs/git-sections.md:
/// trailer, pack checksum, count, fanout, ascending ids, offsets tiling the pack).
fn idx_entries(idx: &[u8], pack: &[u8], count: u32) -> Result<IdxEntries, String> {
    if idx.len() < 8 + 1024 + 40 || &idx[..4] != b"\xfftOc" || idx[4..8] != [0, 0, 0, 2] {
        return Err("is not a version-2 pack index".into());
    }
    let body = idx.len() - 20;
    if sha1(&idx[..body])[..] != idx[body..] {
        return Err("does not match its own SHA-1 trailer (damaged)".into());
    }
    if idx[idx.len() - 40..body] != pack[pack.len() - 20..] {
        return Err("belongs to another pack (its pack checksum differs)".into());
    }
    let mut fanout = [0u32; 256];
    for (b, f) in fanout.iter_mut().enumerate() {
        *f = be32(idx, 8 + 4 * b);
    }
    let n = fanout[255];
    if n != count || fanout.windows(2).any(|w| w[1] < w[0]) {
        return Err(format!("lists {n} objects, the pack holds {count}"));
    }
    let n = n as usize;
    let names = 8 + 1024;
    let crcs = names + OID * n;
    let small = crcs + 4 * n;
    let large = small + 4 * n;
    if idx.len() < large + 40 {
        return Err("has the wrong size for its object count".into());
    }
    let wide = (0..n)
        .filter(|&i| be32(idx, small + 4 * i) >= 0x8000_0000)
        .count();
    if idx.len() != large + 8 * wide + 40 {
        return Err("has the wrong size for its object count".into());
    }
    let mut entries: Vec<(u64, usize)> = Vec::with_capacity(n);
    for i in 0..n {
        let v = be32(idx, small + 4 * i);
        let offset = if v >= 0x8000_0000 {
            let k = (v & 0x7FFF_FFFF) as usize;
            if k >= wide {
                return Err("names a large offset past its table".into());
            }
            let at = large + 8 * k;
            u64::from_be_bytes(idx[at..at + 8].try_into().unwrap_or([0; 8]))
        } else {
            u64::from(v)
        };
        entries.push((offset, i));
    }
    let mut counted = [0u32; 256];
    for i in 0..n {
        let id = &idx[names + OID * i..names + OID * (i + 1)];
        counted[usize::from(id[0])] += 1;
        if i > 0 && idx[names + OID * (i - 1)..names + OID * i] >= *id {
            return Err("lists ids that are not strictly ascending".into());
        }
    }
    let mut total = 0u32;
    for b in 0..256 {
        total += counted[b];
        if n > 0 && total != fanout[b] {
            return Err("has a fanout that does not match its ids".into());
        }
    }
    entries.sort_unstable();
    let end = (pack.len() - TRAILER_LEN) as u64;
    if n > 0
        && (entries[0].0 != HEADER_LEN as u64
            || entries.windows(2).any(|w| w[0].0 == w[1].0)
            || entries[n - 1].0 >= end)
    {
        return Err("has offsets that are not the pack's entries".into());
    }
    let ids = entries
        .iter()
        .map(|&(_, i)| id_at(idx, names + OID * i))
        .collect();
    let crc = entries
        .iter()
        .map(|&(_, i)| be32(idx, crcs + 4 * i))
        .collect();
    Ok((ids, entries.iter().map(|e| e.0).collect(), crc))
}

/// The pack indexed from its `.idx` (module doc). `Fail::Mismatch`: the `.idx` does not
/// describe these bytes (or the pack's SHA-1 differs): parse the pack whole. The pack's
/// SHA-1 and the entries' CRC32s are checked on a thread of their own while the commits
/// and trees are inflated (on two: git/spread.rs); a failed check outranks any other
/// failure but an interrupt, as when it was made first.
pub fn index_with_idx(
    pack: &[u8],
    idx: &[u8],
    name: &str,
    tick: &mut Ticker,
) -> Result<Indexed, Fail> {
    let count = check_header(pack, name)?;
    let mismatch = |why: String| Fail::Mismatch(format!("pack {name}: its .idx {why}"));
    let (ids, offsets, crcs) = idx_entries(idx, pack, count).map_err(mismatch)?;
    let (types, graph) = std::thread::scope(|scope| {
        let stop = tick.stop_flag();
        let (offs, sums) = (&offsets, &crcs);
        let checks = scope.spawn(move || checksums(pack, offs, sums, name, &stop));
        let got = idx_index(pack, &ids, &offsets, name, tick);
        if let Err(Fail::Py(e)) = got {
            return Err(Fail::Py(e));
        }
        match tick.join(checks)?.flatten() {
            Some(Ok(())) => got,
            Some(Err(why)) => Err(Fail::Mismatch(why)),
            None => Err(Fail::Mismatch(format!(
                "pack {name}: trailing SHA-1 does not match its bytes (damaged)"
            ))),
        }
    })?;
    Ok(Indexed {
        ids: ids.concat(),
        types,
        offsets,
        external_bases: 0,
        graph,
    })
}

/// The pack's trailing SHA-1, then every entry's CRC32 against the `.idx`: `Err` says which
/// failed; `None`: `stop` was raised meanwhile.
fn checksums(
    pack: &[u8],
    offsets: &[u64],
    crcs: &[u32],
    name: &str,
    stop: &AtomicBool,
) -> Option<Result<(), String>> {
    if !trailer_ok(pack, stop)? {
        return Some(Err(format!(
            "pack {name}: trailing SHA-1 does not match its bytes (damaged)"
        )));
    }
    let end = pack.len() - TRAILER_LEN;
    for (i, &at) in offsets.iter().enumerate() {
        if i % 1024 == 0 && stop.load(Ordering::Relaxed) {
            return None;
        }
        let stop_at = offsets.get(i + 1).map_or(end, |&o| o as usize);
        if crc32fast::hash(&pack[at as usize..stop_at]) != crcs[i] {
            return Some(Err(format!(
                "pack {name}: its .idx has a CRC32 that does not match the entry at offset {at}"
            )));
        }
    }
    Some(Ok(()))
}

/// The entries' types and the commits and trees (inflated, hashed against the `.idx` ids,
/// parsed).
fn idx_index(
    pack: &[u8],
    ids: &[[u8; OID]],
    offsets: &[u64],
    name: &str,
    tick: &mut Ticker,
) -> Result<(Vec<u8>, Graph), Fail> {
    let n = ids.len();
    let end = pack.len() - TRAILER_LEN;
    let bound = |i: usize| {
        if i + 1 < n {
            offsets[i + 1] as usize
        } else {
            end
        }
    };
    // entry headers: kind, delta base (entry index), where the zlib data starts
    let header_past = |at: u64| {
        pack_error(format!(
            "pack {name}: object at offset {at}: entry header runs past the end"
        ))
    };
    let no_base = |at: u64| {
        pack_error(format!(
            "pack {name}: object at offset {at}: its delta base is not in this pack"
        ))
    };
    let mut kinds = vec![0u8; n];
    let mut base = vec![usize::MAX; n];
    let mut data = vec![0usize; n];
    let mut by_id: Option<HashMap<[u8; OID], usize>> = None;
    for i in 0..n {
        tick.every(1)?;
        let at = offsets[i] as usize;
        let limit = bound(i);
        let (kind, _size, mut pos) =
            entry_header(pack, at, limit).ok_or_else(|| header_past(offsets[i]))?;
        match kind {
            OFS_DELTA => {
                let (dist, p) =
                    ofs_distance(pack, pos, limit).ok_or_else(|| header_past(offsets[i]))?;
                let target = (at as u64).checked_sub(dist).filter(|_| dist > 0);
                let k = target.and_then(|t| offsets[..i].binary_search(&t).ok());
                base[i] = k.ok_or_else(|| no_base(offsets[i]))?;
                pos = p;
            }
            REF_DELTA => {
                if pos + OID > limit {
                    return Err(no_base(offsets[i]));
                }
                let map = by_id
                    .get_or_insert_with(|| ids.iter().enumerate().map(|(k, o)| (*o, k)).collect());
                base[i] = *map
                    .get(&id_at(pack, pos))
                    .ok_or_else(|| no_base(offsets[i]))?;
                pos += OID;
            }
            0 | 5 => {
                return Err(pack_error(format!(
                    "pack {name}: object at offset {}: unknown type {kind}",
                    offsets[i]
                )))
            }
            _ => {}
        }
        kinds[i] = kind;
        data[i] = pos;
    }
    // a delta takes its base's type (bases may come later for REF deltas)
    let mut types: Vec<u8> = kinds
        .iter()
        .map(|&k| if k < OFS_DELTA { k } else { 0 })
        .collect();
    for i in 0..n {
        let mut j = i;
        let mut steps = 0usize;
        while types[j] == 0 {
            j = base[j];
            steps += 1;
            if steps > n {
                return Err(pack_error(format!(
                    "pack {name}: object at offset {}: its delta chain loops",
                    offsets[i]
                )));
            }
        }
        types[i] = types[j];
    }
    tick.check()?;
    // commits and trees inflated, deltas applied, hashed against the .idx ids, parsed
    let entries = Entries {
        pack,
        ids,
        offsets,
        kinds: &kinds,
        types: &types,
        base: &base,
        data: &data,
        name,
    };
    let graph = inflate_graph(&entries, tick)?;
    Ok((types, graph))
}

pub(super) fn add_to_graph(
    kind: u8,
    oid: &[u8; OID],
    content: &[u8],
    name: &str,
    graph: &mut Graph,
) -> Result<(), Fail> {
    if kind == COMMIT {
        graph.add_commit(oid, content).map_err(|why| {
            pack_error(format!(
                "pack {name}: commit {} is malformed: {why}",
                hex(oid)
            ))
        })?;
    } else if kind == TREE {
        graph.add_tree(oid, content);
    }
    Ok(())
}

/// Parse and check a whole pack: every entry inflated (its stream must give exactly the size
/// its header says), the trailer checked, deltas resolved base first along each chain, every
/// object hashed; REF bases not in the pack are asked of `external`.
pub fn parse_whole(
    pack: &[u8],
    name: &str,
    external: &mut External<'_>,
    tick: &mut Ticker,
) -> Result<Indexed, Fail> {
    let count = check_header(pack, name)? as usize;
    let end = pack.len() - TRAILER_LEN;
    let fail = |i: usize, at: usize, why: String| {
        pack_error(format!("pack {name}: object {i} at offset {at}: {why}"))
    };
    let mut d = Decompress::new(true);
    let mut offsets: Vec<u64> = Vec::with_capacity(count.min(pack.len() / 2));
    let mut kinds: Vec<u8> = Vec::with_capacity(offsets.capacity());
    let mut contents: Vec<Option<Vec<u8>>> = Vec::with_capacity(offsets.capacity());
    let mut by_offset: HashMap<u64, usize> = HashMap::new();
    let mut ofs_children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut ref_children: HashMap<[u8; OID], Vec<usize>> = HashMap::new();
    let mut ref_base: HashMap<usize, [u8; OID]> = HashMap::new();
    let mut oids: Vec<Option<[u8; OID]>> = Vec::with_capacity(offsets.capacity());
    let mut types: Vec<u8> = Vec::with_capacity(offsets.capacity());
    let mut graph = Graph::default();
    let mut pos = HEADER_LEN;
    for i in 0..count {
        let at = pos;
        if pos >= end {
            return Err(fail(
                i,
                at,
                format!("the pack ends before it (truncated: the header says {count} objects)"),
            ));
        }
        let truncated = || {
            fail(
                i,
                at,
                "entry header runs past the end of the pack (truncated)".into(),
            )
        };
        let (kind, size, mut p) = entry_header(pack, pos, end).ok_or_else(truncated)?;
        let mut ofs_base = None;
        let mut ref_id = None;
        match kind {
            OFS_DELTA => {
                let (dist, q) = ofs_distance(pack, p, end).ok_or_else(truncated)?;
                ofs_base = Some((at as u64).wrapping_sub(dist));
                p = q;
            }
            REF_DELTA => {
                if p + OID > end {
                    return Err(truncated());
                }
                ref_id = Some(id_at(pack, p));
                p += OID;
            }
            1..=4 => {}
            _ => return Err(fail(i, at, format!("unknown object type {kind}"))),
        }
        let (content, used) =
            inflate(&mut d, &pack[p..end], size).map_err(|e| fail(i, at, e.to_string()))?;
        pos = p + used;
        by_offset.insert(at as u64, i);
        offsets.push(at as u64);
        kinds.push(kind);
        if let Some(b) = ofs_base {
            let k = by_offset.get(&b).filter(|_| b < at as u64).copied();
            let k = k.ok_or_else(|| {
                fail(
                    i,
                    at,
                    format!(
                        "its delta base offset {} is not an object before it in this pack",
                        b as i64
                    ),
                )
            })?;
            ofs_children.entry(k).or_default().push(i);
            contents.push(Some(content));
            oids.push(None);
            types.push(0);
        } else if let Some(b) = ref_id {
            ref_children.entry(b).or_default().push(i);
            ref_base.insert(i, b);
            contents.push(Some(content));
            oids.push(None);
            types.push(0);
        } else {
            let oid = object_id(kind, &content);
            add_to_graph(kind, &oid, &content, name, &mut graph)?;
            oids.push(Some(oid));
            types.push(kind);
            contents.push(None); // re-inflated when a delta needs it as its base
        }
        tick.every(1)?;
    }
    if pos != end {
        return Err(pack_error(format!(
            "pack {name}: {} bytes after its last object (the header says {count} objects)",
            end - pos
        )));
    }
    if !trailer_ok(pack, &tick.stop_flag()).ok_or(PyKeyboardInterrupt::new_err("interrupted"))? {
        return Err(pack_error(format!(
            "pack {name}: trailing SHA-1 does not match its bytes (damaged)"
        )));
    }
    // deltas, depth first from each full base; `contents[c]` holds a delta's instructions
    let mut resolve = |seeds: Vec<(usize, u8, Rc<Vec<u8>>)>,
                       oids: &mut Vec<Option<[u8; OID]>>,
                       types: &mut Vec<u8>,
                       ofs_children: &mut HashMap<usize, Vec<usize>>,
                       ref_children: &mut HashMap<[u8; OID], Vec<usize>>,
                       graph: &mut Graph,
                       tick: &mut Ticker|
     -> Result<(), Fail> {
        let mut todo = seeds;
        while let Some((c, kind, base)) = todo.pop() {
            let delta = contents[c].take().unwrap_or_default();
            let out = apply_delta(&base, &delta).map_err(|why| {
                fail(
                    c,
                    offsets[c] as usize,
                    format!("delta does not apply to its base ({why})"),
                )
            })?;
            let oid = object_id(kind, &out);
            add_to_graph(kind, &oid, &out, name, graph)?;
            oids[c] = Some(oid);
            types[c] = kind;
            let out = Rc::new(out);
            let mut kids = ofs_children.remove(&c).unwrap_or_default();
            if let Some(more) = ref_children.remove(&oid) {
                kids.extend(more);
            }
            todo.extend(kids.into_iter().map(|g| (g, kind, out.clone())));
            tick.every(1)?;
        }
        Ok(())
    };
    for i in 0..count {
        if kinds[i] >= OFS_DELTA {
            continue;
        }
        let oid = oids[i].unwrap_or([0; OID]);
        if !ofs_children.contains_key(&i) && !ref_children.contains_key(&oid) {
            continue;
        }
        let (_k, size, start) = entry_header(pack, offsets[i] as usize, end).unwrap_or((0, 0, 0));
        let base = inflate(&mut d, &pack[start..end], size)
            .map(|x| x.0)
            .unwrap_or_default();
        let base = Rc::new(base);
        let mut kids = ofs_children.remove(&i).unwrap_or_default();
        if let Some(more) = ref_children.remove(&oid) {
            kids.extend(more);
        }
        let seeds = kids
            .into_iter()
            .map(|c| (c, kinds[i], base.clone()))
            .collect();
        resolve(
            seeds,
            &mut oids,
            &mut types,
            &mut ofs_children,
            &mut ref_children,
            &mut graph,
            tick,
        )?;
    }
    let mut external_bases = 0u64;
    let mut waiting: Vec<[u8; OID]> = ref_children.keys().copied().collect();
    waiting.sort_unstable();
    for base_oid in waiting {
        if !ref_children.contains_key(&base_oid) {
            continue; // resolved meanwhile, as a delta of an external base
        }
        let Some((kind, content)) = external(&base_oid)? else {
            continue;
        };
        let kids = ref_children.remove(&base_oid).unwrap_or_default();
        external_bases += kids.len() as u64;
        let base = Rc::new(content);
        let seeds = kids.into_iter().map(|c| (c, kind, base.clone())).collect();
        resolve(
            seeds,
            &mut oids,
            &mut types,
            &mut ofs_children,
            &mut ref_children,
            &mut graph,
            tick,
        )?;
    }
    if let Some(i) = oids.iter().position(|o| o.is_none()) {
        let why = match ref_base.get(&i) {
            Some(b) if ref_children.contains_key(b) => {
                format!(
                    "its delta base {} is in neither this pack nor an earlier one",
                    hex(b)
                )
            }
            _ => "its delta chain never reaches a full object".to_string(),
        };
        return Err(fail(i, offsets[i] as usize, why));
    }
    let mut ids = Vec::with_capacity(OID * count);
    for o in oids.iter().flatten() {
        ids.extend_from_slice(o);
    }
    Ok(Indexed {
        ids,
        types,
        offsets,
        external_bases,
        graph,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::git::pack::BLOB;
    use flate2::write::ZlibEncoder;
    use flate2::Compression;
    use std::io::Write;

    /// `data` deflated as a pack entry's zlib stream (the tests of `spread.rs` too).
    pub(crate) fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn header(kind: u8, mut size: usize) -> Vec<u8> {
        let mut out = vec![(kind << 4) | (size & 15) as u8];
        size >>= 4;
        while size > 0 {
            *out.last_mut().unwrap() |= 0x80;
            out.push((size & 0x7F) as u8);
            size >>= 7;
        }
        out
    }

    /// A pack of `entries` (header bytes after the type+size varint, content to deflate).
    fn pack_of(entries: &[(u8, Vec<u8>, Vec<u8>)]) -> (Vec<u8>, Vec<usize>) {
        let mut p = b"PACK\0\0\0\x02".to_vec();
        p.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        let mut at = Vec::new();
        for (kind, extra, content) in entries {
            at.push(p.len());
            p.extend(header(*kind, content.len()));
            p.extend_from_slice(extra);
            p.extend(zlib(content));
        }
        let sum = sha1(&p);
        p.extend_from_slice(&sum);
        (p, at)
    }

    fn no_external(_: &[u8; OID]) -> Result<Option<(u8, Vec<u8>)>, pyo3::PyErr> {
        Ok(None)
    }

    #[test]
    fn whole_parse_resolves_deltas() {
        let blob = b"hello hello hello\n".to_vec();
        let blob_id = object_id(BLOB, &blob);
        let mut tree = b"100644 a\0".to_vec();
        tree.extend_from_slice(&blob_id);
        let tree_id = object_id(TREE, &tree);
        let commit =
            format!("tree {}\ncommitter C <c> 42 +0000\n\nm\n", hex(&tree_id)).into_bytes();
        // target "hello!\n" from the blob: copy 0..5, insert "!\n"
        let delta = vec![18, 7, 0x90, 5, 2, b'!', b'\n'];
        // entries: blob at 12, tree, commit, then an OFS delta on the blob, a REF delta on it
        let mut entries = vec![
            (BLOB, vec![], blob.clone()),
            (TREE, vec![], tree.clone()),
            (COMMIT, vec![], commit.clone()),
        ];
        let (first, offs) = pack_of(&entries);
        let delta_at = first.len() - TRAILER_LEN;
        let dist = delta_at - offs[0];
        assert!(dist < 128 * 129);
        let enc = if dist < 128 {
            vec![dist as u8]
        } else {
            vec![0x80 | ((dist >> 7) - 1) as u8, (dist & 0x7F) as u8]
        };
        entries.push((OFS_DELTA, enc, delta.clone()));
        entries.push((REF_DELTA, blob_id.to_vec(), delta.clone()));
        let (pack, _) = pack_of(&entries);
        let mut tick = Ticker::quiet();
        let got = match parse_whole(&pack, "t.pack", &mut no_external, &mut tick) {
            Ok(g) => g,
            Err(_) => panic!("the pack parses"),
        };
        assert_eq!(got.types, vec![BLOB, TREE, COMMIT, BLOB, BLOB]);
        let target = object_id(BLOB, b"hello!\n");
        assert_eq!(&got.ids[3 * OID..4 * OID], &target);
        assert_eq!(&got.ids[4 * OID..], &target);
        assert_eq!(got.graph.commit_ids, object_id(COMMIT, &commit));
        assert_eq!(got.graph.tree_of, tree_id);
        assert_eq!(got.graph.times, vec![42]);
        assert_eq!(got.graph.edge_ids, blob_id);
        // a damaged trailer, a cut pack: PackErrors naming the pack
        let mut bad = pack.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let why = |p: &[u8]| match parse_whole(p, "t.pack", &mut no_external, &mut Ticker::quiet())
        {
            Err(Fail::Pack(e)) => e.message,
            _ => String::from("no error"),
        };
        assert_eq!(
            why(&bad),
            "pack t.pack: trailing SHA-1 does not match its bytes (damaged)"
        );
        let cut = &pack[..pack.len() - 40];
        assert!(
            why(cut).starts_with("pack t.pack: object ") && why(cut).contains("truncated"),
            "{}",
            why(cut)
        );
        assert!(why(b"PACX").contains("too short"));
    }
}
