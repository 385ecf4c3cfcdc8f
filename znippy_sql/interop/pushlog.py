"""The Rust push logs (``znippy-plugin-git`` 0.2.4, ``pushlog.rs``): ``__gunnar_refs__``
(``refs.rs``) and ``__gunnar_secrets__`` (``secrets.rs``), each an Arrow stream of one
record batch per push, every row carrying its push's ``push_seq`` and ``updated_ms`` (the
wall clock of the push, milliseconds since the epoch).

``__gunnar_refs__``: ``name`` utf8, ``target`` utf8 (hex id), ``peeled`` utf8 (an annotated
tag's peeled id, when the pusher gave it), ``symref_target`` utf8 (what a symbolic ref names),
``push_seq``, ``updated_ms`` (uint64). ``__gunnar_secrets__``: ``name`` utf8, ``ciphertext``
binary (bytes the caller encrypted; znippy holds no key), ``recipient`` utf8 (a label of who
can open it, never a key), ``push_seq``, ``updated_ms``.

:func:`fold` is the library's ``fold``: rows ordered by ``(push_seq, batch)`` (stable, so
within a push the later row wins), the last row of a name wins; a row with neither
``target`` nor ``symref_target`` deletes the ref, a null ``ciphertext`` revokes the secret.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..errors import FormatError
from ..format.schema import GIT_REFS, GIT_SECRETS

RUST_REFS_COLUMNS = {"name": pa.utf8(), "target": pa.utf8(), "peeled": pa.utf8(),
                     "symref_target": pa.utf8(), "push_seq": pa.uint64(),
                     "updated_ms": pa.uint64()}
SECRETS_COLUMNS = {"name": pa.utf8(), "ciphertext": pa.binary(), "recipient": pa.utf8(),
                   "push_seq": pa.uint64(), "updated_ms": pa.uint64()}
#: the one column the ``git_secrets`` view adds to the rows as written
IN_FORCE = pa.field("in_force", pa.bool_(), nullable=False)


def has_columns(schema: pa.Schema, want: dict[str, Any]) -> bool:
    return all(n in schema.names and schema.field(n).type == k for n, k in want.items())


def is_rust_refs(schema: pa.Schema) -> bool:
    """``__gunnar_refs__`` as ``refs.rs`` writes it (this project's has ``symbolic``)."""
    return has_columns(schema, RUST_REFS_COLUMNS)


def fold(table: pa.Table, section: str, *, live: str, path: str | None = None
         ) -> dict[str, int]:
    """Name → the row (its index in ``table``) in force after every push, in name order,
    the deleted left out: a row is live when any of the ``live`` comma-separated columns is
    not null."""
    if table.num_rows and table.column("name").null_count:
        raise FormatError(f"{section}: a row without a name", path=path)
    keep = [table.column(c).is_valid().to_pylist() for c in live.split(",")]
    names = table.column("name").to_pylist()
    seqs = table.column("push_seq").to_pylist()
    out: dict[str, int] = {}
    for i in sorted(range(len(names)), key=seqs.__getitem__):  # stable: later rows win
        if any(k[i] for k in keep):
            out[names[i]] = i
        else:
            out.pop(names[i], None)
    return {n: out[n] for n in sorted(out, key=lambda n: n.encode())}


def secrets_table(table: pa.Table, path: str | None = None) -> pa.Table:
    """``__gunnar_secrets__`` as written, with ``in_force``: the row is the one the fold
    leaves for its name (its last, not a revocation)."""
    if not has_columns(table.schema, SECRETS_COLUMNS):
        raise FormatError(f"{GIT_SECRETS} does not have the columns secrets.rs writes "
                          f"({', '.join(f'{n}: {k}' for n, k in SECRETS_COLUMNS.items())})",
                          path=path)
    live = set(fold(table, GIT_SECRETS, live="ciphertext", path=path).values())
    return table.append_column(IN_FORCE, pa.array([i in live for i in range(table.num_rows)],
                                                  pa.bool_()))


def rust_refs(table: pa.Table, path: str | None = None
              ) -> dict[str, tuple[bytes | None, bytes | None, str | None]]:
    """The refs a Rust ``__gunnar_refs__`` leaves after every push: name → (target id,
    peeled id, symbolic target), a symbolic ref's target the id its chain ends at."""
    if not is_rust_refs(table.schema):
        raise FormatError(f"{GIT_REFS} does not have the columns refs.rs writes", path=path)
    rows = table.to_pylist()
    state = {n: rows[i] for n, i in fold(table, GIT_REFS, live="target,symref_target",
                                          path=path).items()}

    def oid(text: str | None, name: str) -> bytes | None:
        if text is None:
            return None
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raw = b""
        if len(raw) != 20 or text != text.lower():
            raise FormatError(f"{GIT_REFS}: {name} names {text!r}, not a 40-digit hex id",
                              path=path)
        return raw

    def follow(name: str) -> bytes | None:
        seen: set[str] = set()
        row = state.get(name)
        while row is not None and row["target"] is None and row["symref_target"] is not None:
            if name in seen or len(seen) > 5:  # git's own symref depth is 5
                raise FormatError(f"{GIT_REFS}: symbolic refs from {name} form a loop",
                                  path=path)
            seen.add(name)
            name = row["symref_target"]
            row = state.get(name)
        return None if row is None else oid(row["target"], name)

    return {n: (oid(r["target"], n) if r["target"] is not None else follow(n),
                oid(r["peeled"], n), r["symref_target"]) for n, r in state.items()}
