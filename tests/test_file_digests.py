"""The batch file digest and archive root (``format/files.py``) against FORMAT §4 written out
one file at a time, on generated paths, chunk counts and sliced or large Arrow inputs."""

from __future__ import annotations

import struct

import blake3
import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from znippy_sql.format.files import file_digest, file_digests
from znippy_sql.provenance.sign import archive_root

PATHS = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
FILES = st.lists(st.tuples(PATHS, st.lists(st.binary(min_size=32, max_size=32), min_size=1,
                                           max_size=5)), max_size=30)


def _reference_root(paths: list[str], digests: list[bytes]) -> bytes:
    h = blake3.blake3(b"znippy-archive-v1\0")
    for p, d in zip(paths, digests):
        h.update(p.encode() + b"\0" + d)
    return h.digest()


def _reference_digest(path: str, sums: list[bytes]) -> bytes:
    msg = b"znippy-file-v1\0" + path.encode() + b"\0" + struct.pack("<I", len(sums))
    return blake3.blake3(msg + b"".join(struct.pack("<I", i) + s
                                        for i, s in enumerate(sums))).digest()


@settings(max_examples=150, deadline=None)
@given(files=FILES, large=st.booleans(), pad=st.integers(0, 3))
def test_batch_equals_one_at_a_time(files: list[tuple[str, list[bytes]]], large: bool,
                                    pad: int) -> None:
    paths = ["p"] * pad + [p for p, _ in files]
    sums = [b"\1" * 32] * pad + [s for _, c in files for s in c]
    arr_paths = pa.array(paths, pa.large_utf8() if large else pa.utf8()).slice(pad)
    arr_sums = pa.array(sums, pa.binary(32)).slice(pad)
    starts = np.cumsum([0] + [len(c) for _, c in files])[:-1]
    got = file_digests(arr_paths, arr_sums, starts).to_pylist()
    want = [_reference_digest(p, c) for p, c in files]
    assert got == want
    assert got == [file_digest(p, c) for p, c in files]
    assert archive_root(arr_paths, pa.array(want, pa.binary(32))) == _reference_root(
        [p for p, _ in files], want)
    assert archive_root([p for p, _ in files], want) == _reference_root(
        [p for p, _ in files], want)


def test_explicit_chunk_seq_is_hashed() -> None:
    """Signing hashes each lookup row's own ``chunk_seq``: a wrong one changes the digest."""
    sums = pa.array([b"\2" * 32, b"\3" * 32], pa.binary(32))
    paths = pa.array(["a"])
    good = file_digests(paths, sums, np.array([0]), np.array([0, 1])).to_pylist()[0]
    bad = file_digests(paths, sums, np.array([0]), np.array([0, 7])).to_pylist()[0]
    assert good == _reference_digest("a", [b"\2" * 32, b"\3" * 32])
    assert bad != good


@given(value=st.one_of(st.text(max_size=8), st.integers(-128, 127), st.booleans(), st.none()),
       n=st.integers(0, 50))
def test_build_repeat_equals_pyarrow(value: object, n: int) -> None:
    from znippy_sql.format import build

    typ = (pa.utf8() if isinstance(value, str) or value is None
           else pa.bool_() if isinstance(value, bool) else pa.int8())
    got = build.repeat(value, typ, n)
    got.validate(full=True)
    assert got.equals(pa.repeat(pa.scalar(value, typ), n))
    if isinstance(value, str):
        assert build.repeat(value, pa.large_utf8(), n).to_pylist() == [value] * n


def test_build_binary_large() -> None:
    from znippy_sql.format import build

    values = [b"ab", None, b"", b"xyz"]
    for large in (False, True):
        got = build.binary(values, large=large)
        got.validate(full=True)
        assert got.type == (pa.large_binary() if large else pa.binary())
        assert got.to_pylist() == values


def test_rows_before_the_first_start_are_skipped() -> None:
    """A damaged sub-index whose first row is not a file's first chunk: those rows belong to
    no file, as in the one-file-at-a-time digest (tests/test_rust_hostile.py found it)."""
    sums = pa.array([bytes([i]) * 32 for i in range(4)], pa.binary(32))
    got = file_digests(pa.array(["a", "b"]), sums, np.array([1, 3])).to_pylist()
    assert got == [file_digest("a", [bytes([1]) * 32, bytes([2]) * 32]),
                   file_digest("b", [bytes([3]) * 32])]
