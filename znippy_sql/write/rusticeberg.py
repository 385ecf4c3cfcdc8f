"""Seal a Rust Iceberg-backed archive here into the bytes ``znippy seal`` writes.

``znippy seal --input NAME.znippy --warehouse W [--namespace N] -o OUT`` (``znippy-iceberg``
0.2.0, ``seal.rs``) copies the sidecar whole to ``OUT`` (its blobs, at the same offsets), then
writes with ``ArrowIpcSink`` the rows of every data table of the namespace
(:func:`~znippy_sql.interop.icebergrs.rust_iceberg_rows`: tables in name order, each table's
decoded batches one record batch each, reserved tables such as ``__znippy_fsmeta__`` left
out) as one data sub-index ``(0, "", "")`` under the bare base schema (``lookup_schema``: no
schema metadata, so no ``znippy_format_version``; plugin columns and the package type are
dropped), then the lookup, the trie, the manifest and the footer, each stream as arrow-rs
writes it (:func:`~znippy_sql.write.rustseal.sealed_tail`). The namespace defaults to the
namespace ``znippy compress`` gave the tables (the sidecar's file stem, every character
outside ``[A-Za-z0-9]`` made ``_``): the Rust seal's default is the stem as it is, so for a
stem with another character it finds no table unless ``--namespace`` is given; the bytes are
the same whenever both find the tables.
"""

from __future__ import annotations

import os
import shutil

from ..errors import ZnippyError
from ..interop.icebergrs import namespace_of, rust_iceberg_rows
from .rustseal import sealed_tail


def rust_iceberg_tail(sidecar: str | os.PathLike[str], warehouse: str | os.PathLike[str],
                      namespace: str | None = None) -> bytes:
    """What the Rust seal writes after the sidecar's bytes."""
    where = os.fspath(sidecar)
    rows = rust_iceberg_rows(warehouse, namespace or namespace_of(where))
    try:
        size = os.path.getsize(where)
    except OSError as exc:
        raise ZnippyError(f"cannot read the sidecar: {exc.strerror}", path=where) from None
    return sealed_tail(rows, size)


def seal_rust_iceberg(sidecar: str | os.PathLike[str], warehouse: str | os.PathLike[str],
                      output: str | os.PathLike[str], namespace: str | None = None) -> int:
    """Write to ``output`` what ``znippy seal`` writes for the Iceberg-backed archive
    ``sidecar`` + ``warehouse`` (the module's docstring); its size. Nothing is written when
    the tables cannot be read."""
    out = os.fspath(output)
    if os.path.exists(out) and os.path.samefile(out, os.fspath(sidecar)):
        raise ZnippyError("the seal would overwrite its own sidecar", path=out)
    tail = rust_iceberg_tail(sidecar, warehouse, namespace)
    try:
        shutil.copyfile(os.fspath(sidecar), out)
        with open(out, "ab") as fh:
            fh.write(tail)
            fh.flush()
            os.fsync(fh.fileno())
        return os.path.getsize(out)
    except OSError as exc:
        if os.path.isfile(out):
            os.unlink(out)
        raise ZnippyError(f"cannot write: {exc.strerror or exc}; nothing was written",
                          path=out) from None
