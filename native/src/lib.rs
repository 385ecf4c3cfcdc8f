//! The compiled core of znippy_sql: the loops over files and objects.
//!
//! Python reaches it only through `znippy_sql/corelib.py`, which wraps every call in
//! `znippy_sql.native.guard`. Each function here releases the GIL around its native work
//! and reports failures as `ZnippyError` subclasses (see `errors.rs`); a panic becomes
//! pyo3's `PanicException`, which the guard turns into a `ZnippyError` as well.

use pyo3::prelude::*;

mod cat;
mod create;
mod digests;
mod errors;
mod extract;
mod frame;
mod git;
mod info;
mod ipc;
mod ipcw;
mod lookup;
mod ls;
mod tail;
mod trie;
mod verify;

/// Raises a panic on purpose: the test that no panic reaches a user calls it.
#[pyfunction]
fn _panic_for_test() {
    panic!("a panic raised on purpose by the boundary test");
}

/// The crate's version, for `znippy-sql --version` and the wheel test.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    errors::register(m)?;
    create::register(m)?;
    git::register(m)?;
    cat::register(m)?;
    ls::register(m)?;
    info::register(m)?;
    digests::register(m)?;
    verify::register(m)?;
    extract::register(m)?;
    Ok(())
}
