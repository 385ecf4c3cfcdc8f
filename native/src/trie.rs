//! `__trie__`: the fst map relative_path → first lookup row (FORMAT §4), read with the `fst`
//! crate — the format `ducer` (which wrote it) wraps. Its frame is checked first as
//! `format/trie.py` checks it (fst format 3 ends with a masked CRC32C of all bytes before),
//! so damaged bytes never reach the fst code.

/// What is wrong with an fst's frame, or None (`trie.fst_problem`).
pub fn fst_problem(buf: &[u8]) -> Option<String> {
    const MIN: usize = 16 + 8 + 8 + 4;
    if buf.len() < MIN {
        return Some(format!("is {} bytes, too short for an fst map", buf.len()));
    }
    let version = u64::from_le_bytes(buf[..8].try_into().unwrap_or([0; 8]));
    if version < 3 {
        return None; // older fst versions carry no checksum
    }
    let n = buf.len();
    let stored = u32::from_le_bytes(buf[n - 4..].try_into().unwrap_or([0; 4]));
    let crc = crc32c::crc32c(&buf[..n - 4]);
    let masked = (crc.rotate_right(15)).wrapping_add(0xA282_EAD8);
    if masked != stored {
        return Some("fails its CRC32C checksum".into());
    }
    None
}

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Set while this thread runs fst code: a panic there is caught and said as an error.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}
static HOOK: Once = Once::new();

/// The value of `key` in the fst map `buf` (its frame checked already); Err: not an fst map.
/// The fst code indexes by the addresses it reads and panics on bytes whose checksum was
/// forged: the panic is caught here, silently (the process's panic hook is asked to stay
/// quiet for this thread only), and becomes the error.
pub fn get(buf: &[u8], key: &[u8]) -> Result<Option<u64>, String> {
    quietly(|| fst::Map::new(buf).map(|map| map.get(key)))
}

/// How many keys the fst map `buf` holds (its frame checked already).
pub fn len(buf: &[u8]) -> Result<u64, String> {
    quietly(|| fst::Map::new(buf).map(|map| map.len() as u64))
}

fn quietly<T>(f: impl FnOnce() -> Result<T, fst::Error>) -> Result<T, String> {
    HOOK.call_once(|| {
        let before = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                before(info);
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let found = panic::catch_unwind(AssertUnwindSafe(|| {
        f().map_err(|e| format!("is not a valid fst map ({e})"))
    }));
    QUIET.with(|q| q.set(false));
    found.unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(format!(
            "cannot be searched (the fst code panicked: {what})"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_map_is_found_and_checked() {
        let map = fst::Map::from_iter([("a/b", 0u64), ("c", 3)]).unwrap();
        let mut bytes = map.into_fst().into_inner();
        assert_eq!(fst_problem(&bytes), None);
        assert_eq!(get(&bytes, b"c"), Ok(Some(3)));
        assert_eq!(get(&bytes, b"x"), Ok(None));
        let n = bytes.len();
        bytes[n / 2] ^= 1;
        assert_eq!(
            fst_problem(&bytes).as_deref(),
            Some("fails its CRC32C checksum")
        );
        assert!(fst_problem(b"short").is_some());
    }

    #[test]
    fn a_panic_of_the_fst_code_is_an_error() {
        let map = fst::Map::from_iter([("a", 0u64), ("b", 1)]).unwrap();
        let mut bytes = map.into_fst().into_inner();
        let n = bytes.len();
        for b in &mut bytes[16..n - 4] {
            *b = 0xee; // nonsense addresses; the CRC is not checked by get()
        }
        assert!(get(&bytes, b"a").is_err());
    }
}
