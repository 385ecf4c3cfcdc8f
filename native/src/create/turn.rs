//! When a write closes its open packs (`write/pack.py` `Packer.turn`): at a file of another
//! top-level tree than the file before it (every open pack), else at a file of another
//! directory key (the open directory packs). One call a file, no Python frame.

use pyo3::prelude::*;

/// A path's first component and its directory key: the path without its last two
/// components (empty when it has fewer than three).
pub fn keys(path: &str) -> (&str, &str) {
    let top = path.find('/').map_or(path, |i| &path[..i]);
    let key = match path.rfind('/') {
        Some(last) if last > 0 => match path[..last].rfind('/') {
            Some(k) if k > 0 => &path[..k],
            _ => "",
        },
        _ => "",
    };
    (top, key)
}

/// What `step` answers: nothing to close, the directory packs, every pack.
pub const STAY: u8 = 0;
pub const NEW_DIR: u8 = 1;
pub const NEW_TOP: u8 = 2;

/// The first component and directory key of the last file seen.
#[pyclass(module = "znippy_sql._native")]
#[derive(Default)]
pub struct Turns {
    top: Option<String>,
    dir: String,
}

#[pymethods]
impl Turns {
    #[new]
    fn new() -> Self {
        Turns::default()
    }

    /// `path`'s turn: 0 none, 1 another directory key, 2 another top-level tree.
    fn step(&mut self, path: &str) -> PyResult<u8> {
        super::guarded("the packs' turns", || Ok(self.turn(path)))
    }

    /// The directory key of a path.
    #[staticmethod]
    fn dir_key(path: &str) -> String {
        keys(path).1.to_owned()
    }
}

impl Turns {
    fn turn(&mut self, path: &str) -> u8 {
        let (top, key) = keys(path);
        if self.top.as_deref() == Some(top) {
            if self.dir == key {
                return STAY;
            }
            self.dir = key.to_owned();
            return NEW_DIR;
        }
        self.top = Some(top.to_owned());
        self.dir = key.to_owned();
        NEW_TOP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_first_component_and_all_but_the_last_two() {
        assert_eq!(
            keys("org/acme/lib/1.0/lib-1.0.jar"),
            ("org", "org/acme/lib")
        );
        assert_eq!(keys("lib/1.0/x.jar"), ("lib", "lib"));
        assert_eq!(keys("lib/x.jar"), ("lib", ""));
        assert_eq!(keys("x.jar"), ("x.jar", ""));
        assert_eq!(keys("é/ü/ö/x"), ("é", "é/ü"));
    }

    #[test]
    fn turns_follow_the_paths() {
        let mut t = Turns::default();
        assert_eq!(t.turn("a/b/c/x"), NEW_TOP);
        assert_eq!(t.turn("a/b/c/y"), STAY);
        assert_eq!(t.turn("a/b/d/y"), STAY); // the same key, a/b
        assert_eq!(t.turn("a/c/d/y"), NEW_DIR);
        assert_eq!(t.turn("b/b/d/y"), NEW_TOP);
    }
}
