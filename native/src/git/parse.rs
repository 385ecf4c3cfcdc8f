//! Commits and trees: what the graph and the bitmaps need, as columns.
//!
//! A commit: git's header order, `tree <hex>`, the `parent <hex>` lines, and the `committer`
//! line's time (the field before the zone); no committer line in the header: time 0. A tree:
//! `<octal mode> SP <name> NUL <20-byte id>` entries; subtrees (`40000`) and blobs, gitlinks
//! (`160000`) left out as `git rev-list --objects` leaves them. A tree whose bytes do not line
//! up is read the lenient way (the regular expression `([0-7]+) [^\0]*\0(.{20})` of the
//! Python reader, `git/pack.py` `tree_links`), so both readers list the same entries.

use super::pack::OID;

/// The commits and trees of one pack, as columns (ids joined, 20 bytes each).
#[derive(Default, Debug, Clone)]
pub struct Graph {
    pub commit_ids: Vec<u8>,
    pub tree_of: Vec<u8>,
    pub parent_counts: Vec<u32>,
    pub parent_ids: Vec<u8>,
    pub times: Vec<i64>,
    pub tree_ids: Vec<u8>,
    /// per edge: which tree (index into `tree_ids`), a subtree or a blob, the child's id
    pub edge_tree: Vec<u32>,
    pub edge_sub: Vec<u8>,
    pub edge_ids: Vec<u8>,
}

fn unhex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// 40 hex digits at `text[..40]` as 20 bytes.
fn hex_id(text: &[u8]) -> Option<[u8; OID]> {
    if text.len() < 2 * OID {
        return None;
    }
    let mut out = [0u8; OID];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (unhex(text[2 * i])? << 4) | unhex(text[2 * i + 1])?;
    }
    Some(out)
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Python's `int()` of the committer time field (an optional sign, digits; spaces around).
fn parse_time(field: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(field).ok()?.trim();
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// A commit's tree, parents and committer time.
pub type CommitLinks = ([u8; OID], Vec<[u8; OID]>, i64);

/// A commit's `(tree, parents, committer time)`; `Err` says why it is malformed.
pub fn parse_commit(content: &[u8]) -> Result<CommitLinks, &'static str> {
    let no_tree = "commit has no tree line";
    if !content.starts_with(b"tree ") || content.get(45) != Some(&b'\n') {
        return Err(no_tree);
    }
    let tree = hex_id(&content[5..45]).ok_or(no_tree)?;
    let mut pos = 46;
    let mut parents = Vec::new();
    while content[pos..].starts_with(b"parent ") && content.get(pos + 47) == Some(&b'\n') {
        match hex_id(&content[pos + 7..pos + 47]) {
            Some(p) => parents.push(p),
            None => break,
        }
        pos += 48;
    }
    // the committer line after the parents, inside the header (before the first blank line)
    let when = match find(content, b"\ncommitter ", pos - 1) {
        Some(at) if find(content, b"\n\n", 0).is_none_or(|end| end >= at) => {
            let stop = find(content, b"\n", at + 1).unwrap_or(content.len());
            let line = &content[at + 1..stop];
            let fields: Vec<&[u8]> = line.rsplitn(3, |&c| c == b' ').collect();
            // Python: line.rsplit(b" ", 2)[1]
            let field = match fields.len() {
                3 | 2 => fields[1],
                _ => return Err("list index out of range"),
            };
            parse_time(field).ok_or("invalid literal for int()")?
        }
        _ => 0,
    };
    Ok((tree, parents, when))
}

const TREE_MODE: &[u8] = b"40000 ";
const LINK_MODE: &[u8] = b"160000 ";

/// A tree's entries `(is subtree, child id)` in entry order, gitlinks left out: the strict
/// parse, `None` when its bytes do not line up (a mode that is not 1-7 octal digits and a
/// space, an entry running past the end).
fn tree_strict(content: &[u8], out: &mut Vec<(bool, [u8; OID])>) -> bool {
    let mut pos = 0;
    while pos < content.len() {
        let Some(nul) = content[pos..].iter().position(|&c| c == 0).map(|z| z + pos) else {
            return false;
        };
        if nul + 1 + OID > content.len() {
            return false;
        }
        let head = &content[pos..nul];
        let Some(width) = head.iter().position(|&c| c == b' ') else {
            return false;
        };
        if !(1..=7).contains(&width) || !head[..width].iter().all(|c| (b'0'..=b'7').contains(c)) {
            return false;
        }
        let id: [u8; OID] = content[nul + 1..nul + 1 + OID]
            .try_into()
            .unwrap_or([0; OID]);
        let entry = &content[pos..];
        if entry.starts_with(TREE_MODE) {
            out.push((true, id));
        } else if !entry.starts_with(LINK_MODE) {
            out.push((false, id));
        }
        pos = nul + 1 + OID;
    }
    true
}

/// The lenient parse: `re.findall(rb"([0-7]+) [^\x00]*\x00(.{20})", content, re.S)`.
fn tree_lenient(content: &[u8], out: &mut Vec<(bool, [u8; OID])>) {
    let n = content.len();
    let mut p = 0;
    while p < n {
        let mut q = p;
        while q < n && (b'0'..=b'7').contains(&content[q]) {
            q += 1;
        }
        if q > p && q < n && content[q] == b' ' {
            if let Some(z) = content[q + 1..]
                .iter()
                .position(|&c| c == 0)
                .map(|z| z + q + 1)
            {
                if z + 1 + OID <= n {
                    let mode = &content[p..q];
                    let id: [u8; OID] = content[z + 1..z + 1 + OID].try_into().unwrap_or([0; OID]);
                    if mode == b"40000" {
                        out.push((true, id));
                    } else if mode != b"160000" {
                        out.push((false, id));
                    }
                    p = z + 1 + OID;
                    continue;
                }
            }
        }
        p += 1;
    }
}

/// A tree's `(is subtree, child id)` entries (module doc).
pub fn tree_entries(content: &[u8]) -> Vec<(bool, [u8; OID])> {
    let mut out = Vec::with_capacity(content.len() / 40 + 1);
    if !tree_strict(content, &mut out) {
        out.clear();
        tree_lenient(content, &mut out);
    }
    out
}

impl Graph {
    pub fn add_commit(&mut self, oid: &[u8; OID], content: &[u8]) -> Result<(), &'static str> {
        let (tree, parents, when) = parse_commit(content)?;
        self.commit_ids.extend_from_slice(oid);
        self.tree_of.extend_from_slice(&tree);
        self.parent_counts.push(parents.len() as u32);
        for p in &parents {
            self.parent_ids.extend_from_slice(p);
        }
        self.times.push(when);
        Ok(())
    }

    pub fn add_tree(&mut self, oid: &[u8; OID], content: &[u8]) {
        let k = (self.tree_ids.len() / OID) as u32;
        self.tree_ids.extend_from_slice(oid);
        for (sub, id) in tree_entries(content) {
            self.edge_tree.push(k);
            self.edge_sub.push(u8::from(sub));
            self.edge_ids.extend_from_slice(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(mode: &[u8], name: &[u8], id: u8) -> Vec<u8> {
        let mut v = mode.to_vec();
        v.push(b' ');
        v.extend_from_slice(name);
        v.push(0);
        v.extend_from_slice(&[id; OID]);
        v
    }

    #[test]
    fn trees() {
        let mut t = entry(b"100644", b"a.txt", 1);
        t.extend(entry(b"40000", b"dir", 2));
        t.extend(entry(b"160000", b"sub", 3));
        t.extend(entry(b"120000", b"link", 4));
        t.extend(entry(b"100664", b"odd mode", 5));
        let got = tree_entries(&t);
        assert_eq!(
            got,
            vec![
                (false, [1; OID]),
                (true, [2; OID]),
                (false, [4; OID]),
                (false, [5; OID])
            ]
        );
        assert!(tree_entries(b"").is_empty());
        // a mode that is not octal: read the lenient way, which skips to what matches
        let mut bad = b"9x ".to_vec();
        bad.extend(entry(b"100644", b"b", 7));
        assert_eq!(tree_entries(&bad), vec![(false, [7; OID])]);
        // an entry cut short: nothing after it
        let cut = &t[..t.len() - 3];
        assert_eq!(tree_entries(cut).len(), 3);
        // "040000" is not git's tree mode: a blob, both ways
        assert_eq!(
            tree_entries(&entry(b"040000", b"d", 9)),
            vec![(false, [9; OID])]
        );
    }

    #[test]
    fn commits() {
        let tree = "ab".repeat(20);
        let parent = "CD".repeat(20);
        let c = format!(
            "tree {tree}\nparent {parent}\nparent {parent}\nauthor A <a> 1 +0000\n\
             committer C <c> 1700000000 +0100\n\nmsg\ncommitter X <x> 5 +0000\n"
        );
        let (t, ps, when) = parse_commit(c.as_bytes()).unwrap();
        assert_eq!(t, [0xab; OID]);
        assert_eq!(ps, vec![[0xcd; OID]; 2]);
        assert_eq!(when, 1_700_000_000);
        let no_committer =
            format!("tree {tree}\nauthor A <a> 1 +0000\n\ncommitter C <c> 9 +0000\n");
        assert_eq!(parse_commit(no_committer.as_bytes()).unwrap().2, 0);
        assert!(parse_commit(b"parent x\n").is_err());
        let bad_time = format!("tree {tree}\ncommitter C <c> soon +0000\n");
        assert!(parse_commit(bad_time.as_bytes()).is_err());
        let negative = format!("tree {tree}\ncommitter C <c> -5 +0000\n");
        assert_eq!(parse_commit(negative.as_bytes()).unwrap().2, -5);
    }
}
