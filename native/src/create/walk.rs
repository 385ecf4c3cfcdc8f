//! A directory in path order (`write/source.py` `Walk`): listed, `lstat`ed and, for the files
//! the routing rule packs whole, read and hashed, by a thread of its own ahead of the writer.
//!
//! Each directory's entries are sorted by name bytes with `/` appended to subdirectory names,
//! then walked depth first: exactly the byte order of the whole relative paths. Symbolic links
//! are never followed: without `posix` they are left out (counted), with it each is an entry
//! holding its target; special files are left out (named). A directory that cannot be listed
//! stops the walk with a `FAIL` entry (the writer raises `UnreadableSourceError` there) unless
//! `skip_unreadable`, which leaves it out, and every file that does not open, named in the
//! summary.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::sync::atomic::{AtomicBool, Ordering};

use super::route::{Rules, DIR_PACK, SMALL_PACK};

pub const FILE: u8 = 0;
pub const DIR: u8 = 1;
pub const LINK: u8 = 2;
/// a directory that cannot be listed: `rel` is its path, `mode` the errno, `target` why
pub const FAIL: u8 = 3;

/// One thing the walk found, in walk order.
#[derive(Debug, Default)]
pub struct Found {
    pub kind: u8,
    pub rel: Vec<u8>,
    /// a file's size (None: its `lstat` failed; the writer asks again)
    pub size: Option<u64>,
    /// `st_mode`, `st_mtime_ns` (with `posix`)
    pub meta: Option<(u32, i64)>,
    /// a link's target, or the reason of a `FAIL`
    pub target: Option<Vec<u8>>,
    /// the bytes and BLAKE3 of a file the writer packs whole (read ahead)
    pub data: Option<(Vec<u8>, [u8; 32])>,
}

/// What the walk left out, reported once it is over.
#[derive(Debug, Default)]
pub struct Summary {
    /// (path as found, why) of each directory and file `skip_unreadable` left out
    pub unreadable: Vec<(Vec<u8>, String)>,
    pub links_left_out: u64,
    pub special_left_out: Vec<Vec<u8>>,
}

/// How to walk.
#[derive(Debug, Default)]
pub struct Options {
    pub root: Vec<u8>,
    pub posix: bool,
    pub skip_unreadable: bool,
    /// relative paths never taken (the writer's output), and prefixes (its staging files)
    pub exclude: HashSet<Vec<u8>>,
    pub prefixes: Vec<Vec<u8>>,
    /// read and hash ahead the files these rules send to a small pack
    pub rules: Option<Rules>,
}

struct Listed {
    key: Vec<u8>,
    found: Found,
}

/// The text of an OS error without Rust's " (os error N)" tail: C's `strerror`, what
/// Python's `OSError.strerror` says.
pub fn strerror(err: &std::io::Error) -> String {
    let text = err.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

fn join(directory: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = directory.to_vec();
    if !out.ends_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

fn meta_of(m: &fs::Metadata) -> (u32, i64) {
    (m.mode(), m.mtime() * 1_000_000_000 + m.mtime_nsec())
}

/// A file's first `size` bytes, when it holds that many (else None: the writer reads it and
/// says what is wrong).
fn read_whole(path: &[u8], size: u64) -> Option<Vec<u8>> {
    let file = File::open(OsStr::from_bytes(path)).ok()?;
    // read into spare capacity: no zero-fill of a buffer about to be overwritten
    let mut data = Vec::with_capacity(usize::try_from(size).ok()?);
    file.take(size).read_to_end(&mut data).ok()?;
    (data.len() as u64 == size).then_some(data)
}

struct Walker<'a, F: FnMut(Found) -> bool> {
    opts: &'a Options,
    summary: Summary,
    emit: F,
    stop: &'a AtomicBool,
    failed: bool,
}

impl<F: FnMut(Found) -> bool> Walker<'_, F> {
    /// A directory's entries, in reverse order (the walk pops from the end); None: it cannot
    /// be listed (left out, or the walk is over: `failed`).
    fn listing(&mut self, prefix: &[u8], directory: &[u8]) -> Option<Vec<Listed>> {
        let opts = self.opts;
        let mut found = Vec::new();
        let entries = match fs::read_dir(OsStr::from_bytes(directory)) {
            Ok(it) => it,
            Err(err) => return self.unreadable(directory, &err),
        };
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(err) => return self.unreadable(directory, &err),
            };
            let name = entry.file_name();
            let name = name.as_bytes();
            let mut rel = prefix.to_vec();
            rel.extend_from_slice(name);
            if opts.exclude.contains(&rel) || opts.prefixes.iter().any(|p| rel.starts_with(p)) {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                self.summary.special_left_out.push(rel);
                continue;
            };
            let mut key = name.to_vec();
            if kind.is_dir() {
                key.push(b'/');
                let meta = if opts.posix {
                    entry.metadata().ok().map(|m| meta_of(&m))
                } else {
                    None
                };
                let found_dir = Found {
                    kind: DIR,
                    rel,
                    meta,
                    ..Found::default()
                };
                found.push(Listed {
                    key,
                    found: found_dir,
                });
            } else if kind.is_file() {
                if opts.skip_unreadable {
                    let opened = OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(OsStr::from_bytes(&join(directory, name)));
                    if let Err(err) = opened {
                        let why = strerror(&err);
                        self.summary.unreadable.push((join(directory, name), why));
                        continue;
                    }
                }
                let st = entry.metadata().ok();
                let size = st.as_ref().map(|m| m.len());
                let meta = if opts.posix {
                    st.as_ref().map(meta_of)
                } else {
                    None
                };
                let file = Found {
                    kind: FILE,
                    rel,
                    size,
                    meta,
                    ..Found::default()
                };
                found.push(Listed { key, found: file });
            } else if kind.is_symlink() {
                if !opts.posix {
                    self.summary.links_left_out += 1;
                    continue;
                }
                let at = join(directory, name);
                let (Ok(target), Ok(st)) =
                    (fs::read_link(OsStr::from_bytes(&at)), entry.metadata())
                else {
                    continue; // gone since the listing
                };
                let link = Found {
                    kind: LINK,
                    rel,
                    meta: Some(meta_of(&st)),
                    target: Some(target.as_os_str().as_bytes().to_vec()),
                    ..Found::default()
                };
                found.push(Listed { key, found: link });
            } else {
                self.summary.special_left_out.push(rel);
            }
        }
        found.sort_unstable_by(|a, b| b.key.cmp(&a.key));
        Some(found)
    }

    fn unreadable(&mut self, directory: &[u8], err: &std::io::Error) -> Option<Vec<Listed>> {
        let why = strerror(err);
        if self.opts.skip_unreadable {
            self.summary.unreadable.push((directory.to_vec(), why));
        } else {
            let fail = Found {
                kind: FAIL,
                rel: directory.to_vec(),
                meta: Some((err.raw_os_error().unwrap_or(0) as u32, 0)),
                target: Some(why.into_bytes()),
                ..Found::default()
            };
            self.failed = true;
            (self.emit)(fail);
        }
        None
    }

    fn send(&mut self, found: Found) -> bool {
        (self.emit)(found)
    }

    fn run(&mut self) {
        let root = self.opts.root.clone();
        let mut base = root.clone();
        if !base.ends_with(b"/") {
            base.push(b'/');
        }
        let mut stack = self.listing(b"", &root).unwrap_or_default();
        while let Some(item) = stack.pop() {
            if self.failed || self.stop.load(Ordering::Relaxed) {
                return;
            }
            let found = item.found;
            if found.kind == DIR {
                let mut prefix = found.rel.clone();
                prefix.push(b'/');
                let mut directory = base.clone();
                directory.extend_from_slice(&found.rel);
                let Some(listing) = self.listing(&prefix, &directory) else {
                    continue;
                };
                if !self.send(found) {
                    return;
                }
                stack.extend(listing);
            } else if !self.send(found) {
                return;
            }
        }
    }
}

/// The size of `found` when it is a file `rules` sends to a pack, small or directory (the
/// writer takes such a file whole: it is read ahead).
pub fn packed_size(found: &Found, rules: &Rules) -> Option<u64> {
    match (found.kind, found.size) {
        (FILE, Some(size)) if matches!(rules.route(&found.rel, size), SMALL_PACK | DIR_PACK) => {
            Some(size)
        }
        _ => None,
    }
}

/// Whether `rel` passes `format/paths.py` `check_relative_path`'s fast path (the same rules
/// as its `_PLAIN` test and `plain_paths`): 1-255 bytes, each printable ASCII but the
/// backslash, no `/` first or last, no `.` first, no `//` or `/.`, no `:` second. A path
/// that does not is checked by `check_relative_path` itself (its rules and error texts).
pub fn plain(rel: &[u8]) -> bool {
    let (Some(&first), Some(&last)) = (rel.first(), rel.last()) else {
        return false;
    };
    rel.len() <= 255
        && rel
            .iter()
            .all(|&b| (0x20..=0x7e).contains(&b) && b != b'\\')
        && first != b'/'
        && first != b'.'
        && last != b'/'
        && rel.get(1) != Some(&b':')
        && !rel
            .windows(2)
            .any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'))
}

/// Reads and hashes the file `found` (`base`: the root with a trailing `/`); a file that
/// does not hold its listed size is left unread (the writer reads it and says so).
pub fn read_ahead(found: &mut Found, base: &[u8], size: u64) {
    let mut path = base.to_vec();
    path.extend_from_slice(&found.rel);
    found.data = read_whole(&path, size).map(|d| {
        let digest = *blake3::hash(&d).as_bytes();
        (d, digest)
    });
}

/// Walks `opts.root`, handing each thing found to `emit` in walk order (it returns false to
/// stop the walk); returns what was left out. `stop` ends the walk early.
pub fn walk(opts: &Options, stop: &AtomicBool, emit: impl FnMut(Found) -> bool) -> Summary {
    let mut walker = Walker {
        opts,
        summary: Summary::default(),
        emit,
        stop,
        failed: false,
    };
    walker.run();
    walker.summary
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("znippy-walk-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("a/b")).unwrap();
        fs::write(dir.join("a.txt"), b"x").unwrap();
        fs::write(dir.join("a/b/c.txt"), b"hello").unwrap();
        fs::write(dir.join("a/z.png"), b"png").unwrap();
        fs::write(dir.join("b"), b"").unwrap();
        dir
    }

    #[test]
    fn byte_order_of_whole_paths() {
        let dir = tree();
        let opts = Options {
            root: dir.as_os_str().as_bytes().to_vec(),
            rules: Some(Rules {
                skip: ["png".to_string()].into_iter().collect(),
                packing: true,
                pack_max: 100,
                dir_max: 100,
                ..Rules::default()
            }),
            ..Options::default()
        };
        let mut got = Vec::new();
        let mut base = opts.root.clone();
        base.push(b'/');
        let rules = opts.rules.clone().unwrap();
        walk(&opts, &AtomicBool::new(false), |mut f| {
            if let Some(size) = packed_size(&f, &rules) {
                read_ahead(&mut f, &base, size);
            }
            got.push((String::from_utf8(f.rel).unwrap(), f.kind, f.data.is_some()));
            true
        });
        let want = [
            ("a.txt", FILE, true),
            ("a", DIR, false),
            ("a/b", DIR, false),
            ("a/b/c.txt", FILE, true),
            ("a/z.png", FILE, false),
            ("b", FILE, false),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(p, k, d)| (p.to_string(), *k, *d))
            .collect();
        assert_eq!(got, want);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn plain_paths_are_the_fast_paths() {
        for ok in ["a", "a/b.txt", "x..y/z", "a/b:c", "~/x"] {
            assert!(plain(ok.as_bytes()), "{ok}");
        }
        let long = "a".repeat(256);
        for bad in [
            "", "/a", "a/", ".a", "a//b", "a/.b", "c:x", "a\\b", "a\x01", "é", &long,
        ] {
            assert!(!plain(bad.as_bytes()), "{bad:?}");
        }
    }

    #[test]
    fn a_missing_root_fails() {
        let opts = Options {
            root: b"/nonexistent/znippy".to_vec(),
            ..Options::default()
        };
        let mut kinds = Vec::new();
        walk(&opts, &AtomicBool::new(false), |f| {
            kinds.push(f.kind);
            true
        });
        assert_eq!(kinds, vec![FAIL]);
    }
}
