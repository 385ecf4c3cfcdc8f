"""Zip-entry chunk boundaries (write/zipcut.py) on zips made by Python's ``zipfile`` and the
``zip`` CLI, zip64, prefixed and damaged zips; and the probe (format/codec.py)."""

from __future__ import annotations

import io
import os
import random
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import random_bytes, text_bytes

from znippy_sql.format import codec
from znippy_sql.write import zipcut

BLOCK = 10 << 20


def make_zip(members: list[tuple[str, bytes]], *, when: tuple[int, ...] = (2024, 1, 2, 3, 4, 6),
             method: int = zipfile.ZIP_DEFLATED, zip64: bool = False) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=when)
            info.compress_type = method
            with z.open(info, "w", force_zip64=zip64) as fh:
                fh.write(data)
    return buf.getvalue()


def classes(n: int, seed: int, size: tuple[int, int] = (200, 9000)) -> list[tuple[str, bytes]]:
    """Class-like members: half text (small once deflated), half noise (big)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.randint(*size)
        body = text_bytes(k, seed * 1000 + i) if i % 2 else random_bytes(k, seed * 1000 + i)
        out.append((f"org/ex/p{i % 7}/C{i}.class", body))
    return out


def check_spans(spans: list[zipcut.Span], size: int, block: int) -> None:
    assert spans[0][0] == 0
    assert all(a + n == b for (a, n, _), (b, _, _) in zip(spans, spans[1:]))
    assert spans[-1][0] + spans[-1][1] == size
    assert all(0 < n <= block for _, n, _ in spans)
    assert all(m in (codec.COMPRESS, codec.RAW, codec.PROBE) for _, _, m in spans)


def pieces(data: bytes, spans: list[zipcut.Span] | None) -> set[bytes]:
    assert spans is not None
    return {data[o : o + n] for o, n, _ in spans}


def test_spans_cover_the_zip_at_entry_boundaries() -> None:
    members = classes(120, 1)
    data = make_zip(members)
    spans = zipcut.cut(data, block_size=BLOCK)
    assert spans is not None
    check_spans(spans, len(data), BLOCK)
    z = zipfile.ZipFile(io.BytesIO(data))
    infos = z.infolist()
    starts = {i.header_offset for i in infos}
    cd_start = z.start_dir
    # every cut is an entry start, the start of a big entry's data, or the directory
    raw_starts = {o for o, _, m in spans if m == codec.RAW}
    for info in infos:  # a big entry's data starts a span of its own, stored raw
        if info.compress_size >= zipcut.BODY_MIN:
            h = info.header_offset
            nlen, xlen = struct.unpack_from("<HH", data, h + 26)
            assert h + 30 + nlen + xlen in raw_starts, info.filename
    for off, _, mode in spans[1:]:  # grouped entries: compressed, cut at entry starts
        if mode == codec.COMPRESS:
            assert off in starts or off == cd_start
    assert data[cd_start : cd_start + 4] == b"PK\x01\x02"
    assert cd_start in {o for o, _, _ in spans}
    # grouped runs hold at least GROUP_MIN unless something forced the cut
    assert sum(1 for s in spans if s[2] == codec.COMPRESS) < len(infos) / 2


def test_an_entry_in_two_jars_lands_in_the_same_chunk() -> None:
    common = classes(60, 2)
    v1 = make_zip(common + [("META-INF/MANIFEST.MF", b"Version: 1\n")],
                  when=(2023, 5, 1, 10, 0, 0))
    changed = [(n, d + b"x") if i % 11 == 0 else (n, d) for i, (n, d) in enumerate(common)]
    v2 = make_zip([("org/ex/New.class", random_bytes(4000, 9))] + changed
                  + [("META-INF/MANIFEST.MF", b"Version: 2\n")], when=(2024, 7, 8, 9, 10, 12))
    p1 = pieces(v1, zipcut.cut(v1, block_size=BLOCK))
    p2 = pieces(v2, zipcut.cut(v2, block_size=BLOCK))
    # every big unchanged entry's deflated data is a chunk of both, time stamps aside
    z1 = zipfile.ZipFile(io.BytesIO(v1))
    for i, info in enumerate(z1.infolist()[:-1]):
        if info.compress_size >= zipcut.BODY_MIN and i % 11:
            start = info.header_offset + 30 + len(info.filename)
            body = v1[start : start + info.compress_size]
            assert any(p.startswith(body) for p in p1 & p2), info.filename
    shared = sum(len(p) for p in p1 & p2)
    assert shared > 0.5 * len(v1)


def test_identical_headers_share_grouped_runs_after_a_difference() -> None:
    small = classes(400, 3, size=(100, 1500))  # all below BODY_MIN once deflated
    v1 = make_zip(small)
    v2 = make_zip([("a/First.class", b"new " * 100)] + small)
    p1, p2 = (pieces(v, zipcut.cut(v, block_size=BLOCK)) for v in (v1, v2))
    shared = sum(len(p) for p in p1 & p2)
    assert shared > 0.6 * len(v1)  # the runs fall into step again after the new entry


def test_zip_cli_and_stored_entries_and_block_cap(tmp_path: Path) -> None:
    if shutil.which("zip") is None:
        pytest.skip("the zip CLI is not installed (.ci/run installs it): the test's archives "
                    "come from Info-ZIP, an independent writer")  # pragma: no cover
    src = tmp_path / "src"
    for name, data in classes(40, 4):
        p = src / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    out = tmp_path / "cli.jar"
    subprocess.run(["zip", "-q", "-r", "-X", str(out), "."], cwd=src, check=True)
    data = out.read_bytes()
    spans = zipcut.cut(data, block_size=BLOCK)
    assert spans is not None
    check_spans(spans, len(data), BLOCK)
    stored = make_zip([("big.bin", text_bytes(300_000, 5)), ("x.txt", b"x" * 10)],
                      method=zipfile.ZIP_STORED)
    spans = zipcut.cut(stored, block_size=64 << 10)
    assert spans is not None
    check_spans(spans, len(stored), 64 << 10)
    # a stored entry's data is probed, not stored raw unseen; cut in block pieces
    body = [s for s in spans if s[1] == 64 << 10]
    assert body and all(m == codec.PROBE for _, _, m in body)


def test_zip64_and_a_prefix_and_cut_file(tmp_path: Path) -> None:
    members = classes(30, 6)
    z64 = make_zip(members, zip64=True)
    spans = zipcut.cut(z64, block_size=BLOCK)
    assert spans is not None
    check_spans(spans, len(z64), BLOCK)
    plain = make_zip(members)
    prefixed = b"#!/bin/sh\nexec java -jar $0\n" + plain  # a self-running jar
    spans_p = zipcut.cut(prefixed, block_size=BLOCK)
    spans_plain = zipcut.cut(plain, block_size=BLOCK)
    assert spans_p is not None and spans_plain is not None
    check_spans(spans_p, len(prefixed), BLOCK)

    def bodies(data: bytes, spans: list[zipcut.Span]) -> set[bytes]:
        return {data[o : o + n] for o, n, m in spans if m == codec.RAW}

    assert bodies(prefixed, spans_p) == bodies(plain, spans_plain) != set()
    for name, data in (("z64", z64), ("plain", plain), ("prefixed", prefixed)):
        path = tmp_path / f"{name}.jar"
        path.write_bytes(data)
        fd = os.open(path, os.O_RDONLY)
        try:
            assert zipcut.cut_file(fd, len(data), block_size=BLOCK) == zipcut.cut(
                data, block_size=BLOCK)
        finally:
            os.close(fd)


@pytest.mark.parametrize("data", [
    b"", b"PK", b"PK\x05\x06", b"not a zip at all" * 100, random_bytes(70_000, 7),
    b"PK\x05\x06" + bytes(18),  # an empty zip: nothing to cut
])
def test_not_a_zip_gives_none(data: bytes) -> None:
    assert zipcut.cut(data, block_size=BLOCK) is None


def test_damaged_zips_never_raise() -> None:
    base = make_zip(classes(25, 8))
    rng = random.Random(8)
    accepted = 0
    for trial in range(600):
        data = bytearray(base)
        kind = trial % 4
        if kind == 0:  # flip bytes anywhere
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif kind == 1:  # flip bytes in the directory and end record
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data) - 800, len(data))] = rng.randrange(256)
        elif kind == 2:  # truncate
            data = data[: rng.randrange(len(data))]
        else:  # cut a piece out of the middle
            a = rng.randrange(len(data))
            del data[a : a + rng.randint(1, 500)]
        spans = zipcut.cut(bytes(data), block_size=4096)
        if spans is not None:
            check_spans(spans, len(data), 4096)
            accepted += 1
    assert accepted  # flips inside entry data leave a zip that still parses


def test_probe_threshold() -> None:
    assert codec.PROBE_RATIO == 0.97 and codec.PROBE_SAMPLE == 4096
    assert codec.probe(text_bytes(100_000, 1))
    assert not codec.probe(random_bytes(100_000, 2))
    assert not codec.probe(b"")
    deflated = make_zip([("a.bin", text_bytes(200_000, 3))])
    assert not codec.probe(deflated[100:-200])  # deflate output does not shrink again
    stored = make_zip([("a.class", text_bytes(200_000, 3))], method=zipfile.ZIP_STORED)
    assert codec.probe(stored)
    # a mix: three samples, judged on their total
    mixed = random_bytes(50_000, 4) + text_bytes(50_000, 4)
    assert codec.probe_many([mixed, b"", text_bytes(5000, 5)]) == [
        codec.probe(mixed), False, True]


def test_zip_family_names() -> None:
    for name in ("a.jar", "b/c.WAR", "x.ear", "y.aar", "z.whl", "w.zip", "v.nupkg"):
        assert zipcut.is_zip_family(name)
    for name in ("a.crate", "b.tar.gz", "c.jar.sha1", ".jar", "d/.zip", "jar"):
        assert not zipcut.is_zip_family(name)
