"""Directory packs (docs/format.md §6, ``write/pack.py``): the versions of an artifact in one
frame with a long window, and every guarantee packing keeps.

The frames are real zstd frames with long-distance matching in OpenZL's zstd frame shape:
the OpenZL binding itself decodes them (a window of several MiB included), so does every
read path; the rule (which zip-family files go together) depends on the input order only.
"""

from __future__ import annotations

import io
import os
import random
import zipfile
from pathlib import Path

import openzl.ext as zl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import text_bytes
from znippy_sql import open_archive, write_archive
from znippy_sql.format import codec
from znippy_sql.write import append as ap
from znippy_sql.write import pack as packmod
from znippy_sql.write.pack import dir_key
from znippy_sql.write.source import Entry


def jar(classes: dict[str, bytes], stamp: int) -> bytes:
    """A jar of deflated members (the time stamp differs between versions, as in Maven)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in sorted(classes.items()):
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1 + stamp % 28, 0, 0, 0))
            z.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def classes(seed: int, n: int, size: int = 3000) -> dict[str, bytes]:
    """Class-like members: noise with some text (deflate shrinks them a little)."""
    rng = random.Random(seed)
    return {f"org/acme/C{seed}_{i}.class": rng.randbytes(size // 2) + text_bytes(size // 2, i)
            for i in range(n)}


def repo(versions: int = 4, artifacts: int = 3) -> list[Entry]:
    """A Maven-like tree: each artifact's versions share most classes; a POM beside each
    jar; one jar copied under another artifact (identical whole files)."""
    out: list[Entry] = []
    for a in range(artifacts):
        base = classes(100 * a, 40)
        for v in range(versions):
            members = dict(base)
            members.update(classes(100 * a + v + 1, 3))  # a few new classes a version
            path = f"org/acme/lib{a}/1.{v}/lib{a}-1.{v}.jar"
            out.append(Entry(path, data=jar(members, v)))
            out.append(Entry(path[:-4] + ".pom", data=text_bytes(1500, 10 * a + v)))
    out.append(Entry("org/acme/shaded/9.0/shaded-9.0.jar", data=out[0].data))
    return sorted(out, key=lambda e: e.relative_path.encode())


def rows_by_path(arc: Path) -> dict[str, list[dict]]:
    with open_archive(arc) as a:
        rows = a.lookup.to_pylist()
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["relative_path"], []).append(r)
    return out


def test_dir_key() -> None:
    assert dir_key("org/acme/lib/1.0/lib-1.0.jar") == "org/acme/lib"
    assert dir_key("lib/1.0/x.jar") == "lib"
    assert dir_key("lib/x.jar") == "" == dir_key("x.jar")


def test_binding_decodes_long_window_frames() -> None:
    """A directory pack's frame with matches 6 MiB back: far smaller than its bytes, and the
    OpenZL binding (not only zstandard) decodes it to the same bytes."""
    rng = random.Random(7)
    block = rng.randbytes(6 << 20)
    data = block + text_bytes(100_000, 1) + block[: 3 << 20]
    frame = b"".join(codec.encoder().pack_frames_if_smaller([data], long=True)[0] or ())
    assert frame and len(frame) < (6 << 20) + (1 << 20)  # the repeat cost next to nothing
    assert codec.content_size(frame) == len(data)
    assert zl.DCtx().decompress(frame)[0].content.as_bytes() == data
    assert bytes(codec.decoder().decode_view(frame, len(data))) == data
    # without the long window the repeat is out of reach: the plain pack frame is not smaller
    plain = codec.encoder().pack_frames_if_smaller([data])[0] or (data,)
    assert sum(len(p) for p in plain) > (9 << 20)


def test_versions_share_one_frame_and_every_path_reads(tmp_path: Path) -> None:
    entries = repo()
    arc = tmp_path / "r.znippy"
    write_archive(arc, entries, workers=2)
    rows = rows_by_path(arc)
    jars = [e for e in entries if e.relative_path.endswith(".jar")]
    for e in jars:
        assert len(rows[e.relative_path]) == 1  # whole, not cut at its entries
    by_key: dict[str, set[int]] = {}
    for e in jars[:-1]:
        (r,) = rows[e.relative_path]
        assert r["compressed"]
        by_key.setdefault(dir_key(e.relative_path), set()).add(r["blob_offset"])
    blobs = list(by_key.values())
    assert all(len(b) == 1 for b in blobs) and len(set().union(*blobs)) == 3
    pom = rows["org/acme/lib0/1.0/lib0-1.0.pom"][0]
    assert pom["blob_offset"] not in set().union(*blobs)  # POMs: the small-file packs
    (copy,) = rows["org/acme/shaded/9.0/shaded-9.0.jar"]
    (orig,) = rows[jars[0].relative_path]
    assert (copy["blob_offset"], copy["inner_offset"]) == (orig["blob_offset"],
                                                           orig["inner_offset"])
    raw = sum(len(e.data) for e in jars)
    with open_archive(arc) as a:
        assert a.blob_end < 0.5 * raw  # the versions' shared entries are stored about once
        for e in entries:
            assert a.read(e.relative_path) == e.data
        assert a.verify().ok
        ex = a.extract(tmp_path / "x")
        assert ex.ok and ex.files == len(entries)
    for e in entries:
        assert (tmp_path / "x" / e.relative_path).read_bytes() == e.data
    # and without it (--no-pack) the jars are cut at their entries as before
    plain = tmp_path / "plain.znippy"
    write_archive(plain, entries, workers=1, pack=False)
    assert len(rows_by_path(plain)[jars[0].relative_path]) > 1
    assert plain.stat().st_size > arc.stat().st_size


def test_cap_closes_a_pack_before_it_is_exceeded(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    entries = repo(versions=6, artifacts=1)
    jars = [e for e in entries if e.relative_path.endswith(".jar")]
    cap = 2 * max(len(e.data) for e in jars) + 10
    monkeypatch.setattr(packmod, "DIR_PACK_MAX", cap)
    arc = tmp_path / "r.znippy"
    write_archive(arc, entries, workers=1)
    rows = rows_by_path(arc)
    packs: dict[int, int] = {}
    for e in jars[:-1]:
        (r,) = rows[e.relative_path]
        packs[r["blob_offset"]] = max(packs.get(r["blob_offset"], 0),
                                      r["inner_offset"] + r["uncompressed_size"])
    assert len(packs) == 3 and max(packs.values()) <= cap
    with open_archive(arc) as a:
        assert all(a.read(e.relative_path) == e.data for e in entries)


@pytest.mark.parametrize("workers", [2, 3])
def test_deterministic_across_workers(tmp_path: Path, workers: int) -> None:
    entries = repo()
    one, many = tmp_path / "one.znippy", tmp_path / "many.znippy"
    write_archive(one, entries, workers=1)
    write_archive(many, entries, workers=workers)
    assert one.read_bytes() == many.read_bytes()


def test_options_that_never_pack(tmp_path: Path) -> None:
    """``compat="rust-0.8"`` never packs; ``--no-pack --no-index-compression`` is the layout
    before packing, whatever the jars."""
    entries = repo(versions=2, artifacts=1)
    rust = tmp_path / "rust.znippy"
    write_archive(rust, entries, compat="rust-0.8", workers=1)
    with open_archive(rust) as a:
        assert not a.packed
        assert all(a.read(e.relative_path) == e.data for e in entries)


def test_append_of_a_new_tree_equals_one_shot_and_keeps_old_blobs(tmp_path: Path) -> None:
    first = repo(versions=2, artifacts=2)
    second = [Entry("zz/" + e.relative_path, data=e.data) for e in repo(versions=3, artifacts=1)]
    one = tmp_path / "one.znippy"
    write_archive(one, first + second, workers=1)
    grown = tmp_path / "grown.znippy"
    write_archive(grown, first, workers=1)
    with open_archive(grown) as a:
        end = a.blob_end
    before = grown.read_bytes()[:end]
    ap.append_archive(grown, second, workers=2)
    assert grown.read_bytes()[:end] == before
    assert grown.read_bytes() == one.read_bytes()


def test_store_seal_equals_one_shot(tmp_path: Path) -> None:
    from znippy_sql.store import open_store, seal

    first = repo(versions=2, artifacts=2)
    second = [Entry("zz/" + e.relative_path, data=e.data) for e in repo(versions=2, artifacts=1)]
    sidecar, wh = tmp_path / "blobs.znippy", tmp_path / "wh"
    with open_store(sidecar, wh, "p") as store:
        store.add(first, workers=2)
    with open_store(sidecar, wh, "p") as store:
        store.add(second)
    one = tmp_path / "one.znippy"
    write_archive(one, first + second, workers=2)
    sealed = tmp_path / "sealed.znippy"
    seal(sidecar, wh, "p", sealed)
    assert sealed.read_bytes() == one.read_bytes()


@pytest.mark.slow
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2),
                          st.binary(min_size=0, max_size=3000)), min_size=1, max_size=30),
       st.sampled_from([1, 2]), st.sampled_from([2000, 1 << 20]))
def test_property_directory_packs_hold_any_files(tmp_path: Path,
                                                 files: list[tuple[int, int, bytes]],
                                                 workers: int, cap: int) -> None:
    """Any zip-named files (valid zips or not, empty, repeated, in any directories; a cap
    that splits packs or not) read back exactly, verify, and are the same bytes whatever the
    worker count."""
    entries = [Entry(f"g/a{a}/{v}.{i}/x-{i}.{'jar' if i % 3 else 'whl'}", data=data)
               for i, (a, v, data) in enumerate(files)]
    entries += [Entry(f"g/a0/copy/x{i}.jar", data=files[i][2]) for i in range(min(2, len(files)))]
    entries.sort(key=lambda e: e.relative_path.encode())
    old = packmod.DIR_PACK_MAX
    packmod.DIR_PACK_MAX = cap  # (a hypothesis test takes no monkeypatch fixture per example)
    try:
        arcs = []
        for w in (1, workers):
            arc = tmp_path / f"h{os.getpid()}-{len(files)}-{w}-{cap}.znippy"
            if arc.exists():
                arc.unlink()
            write_archive(arc, entries, workers=w)
            arcs.append(arc)
    finally:
        packmod.DIR_PACK_MAX = old
    assert arcs[0].read_bytes() == arcs[1].read_bytes()
    with open_archive(arcs[0]) as a:
        for e in entries:
            assert a.read(e.relative_path) == e.data
        assert a.verify().ok
    for arc in set(arcs):
        arc.unlink()
