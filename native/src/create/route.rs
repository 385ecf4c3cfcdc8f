//! Where a writer sends a file: the one routing rule of `write/ingest.py` (docs/format.md §6).
//!
//! A zip-family file (`ZIP_SUFFIXES`) of 1 to `dir_max` bytes joins a directory pack when
//! packing is on; else, with dedup, a zip-family file is cut at its entries; else a file of 1
//! to `pack_max` bytes whose name is not skip-listed (`SKIP_SUFFIXES`) joins a small-file
//! pack; everything else is cut into chunks of its own. The suffix lists stay Python's
//! (`format/codec.py`, `write/zipcut.py`): they are handed over when a `Rules` is made.

use std::collections::HashSet;

/// The routes, numbered as `write/ingest.py` numbers them.
pub const DIR_PACK: u8 = 0;
pub const ZIP_SPANS: u8 = 1;
pub const SMALL_PACK: u8 = 2;
pub const OWN_CHUNKS: u8 = 3;

/// The rule's inputs that do not change during a write.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub skip: HashSet<String>,
    pub zip: HashSet<String>,
    /// packing on (`WriteOptions.pack`)
    pub packing: bool,
    /// dedup on (`WriteOptions.dedup`): zip-family files cut at their entries
    pub dedup: bool,
    /// the largest small-pack member (`min(PACK_MEMBER_MAX, block_size)`)
    pub pack_max: u64,
    /// the largest directory-pack member (`min(DIR_MEMBER_MAX, block_size)`)
    pub dir_max: u64,
}

/// The lower-cased suffix of a path's last component, when it has one: a dot with at least
/// one byte of the component before it (`.gz` alone is a bare name).
pub fn suffix(path: &[u8]) -> Option<String> {
    let dot = path.iter().rposition(|&b| b == b'.')?;
    let start = path.iter().rposition(|&b| b == b'/').map_or(0, |s| s + 1);
    if dot <= start {
        return None;
    }
    Some(String::from_utf8_lossy(&path[dot + 1..]).to_lowercase())
}

impl Rules {
    pub fn route(&self, path: &[u8], size: u64) -> u8 {
        let suffix = suffix(path);
        let zip_family = suffix.as_ref().is_some_and(|s| self.zip.contains(s));
        if self.packing && 0 < size && size <= self.dir_max && zip_family {
            return DIR_PACK;
        }
        if self.dedup && size > 0 && zip_family {
            return ZIP_SPANS;
        }
        let skipped = suffix.as_ref().is_some_and(|s| self.skip.contains(s));
        if self.packing && 0 < size && size <= self.pack_max && !skipped {
            return SMALL_PACK;
        }
        OWN_CHUNKS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Rules {
        Rules {
            skip: ["gz", "jar", "png"].iter().map(|s| s.to_string()).collect(),
            zip: ["jar", "zip"].iter().map(|s| s.to_string()).collect(),
            packing: true,
            dedup: true,
            pack_max: 256 << 10,
            dir_max: 32 << 20,
        }
    }

    #[test]
    fn suffixes() {
        assert_eq!(suffix(b"a/b.TXT").as_deref(), Some("txt"));
        assert_eq!(suffix(b"a/.gz"), None);
        assert_eq!(suffix(b"a.d/b"), None);
        assert_eq!(suffix(b"x."), Some(String::new()));
    }

    #[test]
    fn routes() {
        let r = rules();
        assert_eq!(r.route(b"a/x.jar", 10), DIR_PACK);
        assert_eq!(r.route(b"a/x.jar", 64 << 20), ZIP_SPANS);
        assert_eq!(r.route(b"a/x.jar", 0), OWN_CHUNKS);
        assert_eq!(r.route(b"a/x.txt", 100), SMALL_PACK);
        assert_eq!(r.route(b"a/x.png", 100), OWN_CHUNKS);
        assert_eq!(r.route(b"a/x.txt", 1 << 20), OWN_CHUNKS);
        let off = Rules {
            packing: false,
            ..rules()
        };
        assert_eq!(off.route(b"a/x.jar", 10), ZIP_SPANS);
        assert_eq!(off.route(b"a/x.txt", 10), OWN_CHUNKS);
    }
}
