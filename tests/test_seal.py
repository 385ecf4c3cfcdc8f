"""The seal: byte identity with a one-shot write across two processes, no codec, atomic output."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import self_signed_signer, text_bytes
from znippy_sql import Entry, StoreError, open_archive, write_archive
from znippy_sql.write.source import walk_directory
from znippy_sql.store import open_store, seal

BLOCK = 2048


def text(n: int, seed: int) -> bytes:
    return text_bytes(n, seed)


def make_tree(root: Path, prefix: str, seed: int) -> None:
    rng = random.Random(seed)
    files = {f"{prefix}/src/m{i}.py": text(rng.randint(1, 3 * BLOCK), seed + i) for i in range(7)}
    files[f"{prefix}/empty.txt"] = b""
    files[f"{prefix}/blob.bin"] = rng.randbytes(BLOCK + 100)  # stored raw
    files[f"{prefix}/pkg.zip"] = text(300, seed)  # skip list: raw without trying the codec
    pom = (b"<project><groupId>org.%s</groupId><artifactId>lib</artifactId>"
           b"<version>1.0</version></project>" % prefix.encode())
    files[f"org/{prefix}/lib/1.0/lib-1.0.pom"] = pom + b" " * (2 * BLOCK)  # maven, 2 chunks
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def store_add_cli(sidecar: Path, wh: Path, src: Path, *extra: str) -> None:
    """One ``znippy-sql store add`` in its own process: the store must survive the restart."""
    run = "import sys; from znippy_sql.cli import main; sys.exit(main(sys.argv[1:]))"
    cmd = [sys.executable, "-c", run, "store", "add", "--sidecar", str(sidecar),
           "--warehouse", str(wh), "--namespace", "lc", str(src), "--block-size", str(BLOCK),
           *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_seal_after_restart_equals_one_shot(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "A", tmp_path / "B"
    make_tree(a, "a", 1)
    make_tree(b, "b", 2)
    sidecar, wh = tmp_path / "blobs.znippy", tmp_path / "wh"
    store_add_cli(sidecar, wh, a, "--repo", "r1")  # process 1: A, exits
    store_add_cli(sidecar, wh, b, "--pkg-type", "auto")  # process 2: B into the same store

    entries = [Entry(e.relative_path, file=e.file, repo="r1") for e in walk_directory(a)]
    entries += [Entry(e.relative_path, file=e.file, pkg_type="auto") for e in walk_directory(b)]
    one = tmp_path / "one.znippy"
    write_archive(one, entries, block_size=BLOCK)
    sealed = tmp_path / "sealed.znippy"
    report = seal(sidecar, wh, "lc", sealed)
    assert sealed.read_bytes() == one.read_bytes()
    with open_archive(one) as arc:
        assert report.rows_sealed == arc.lookup.num_rows
        assert {k.module_name for k in arc.groups} == {"", "maven"}
    assert report.files_sealed == len(entries)
    assert report.blob_end == report.blob_bytes_reused == os.path.getsize(sidecar)
    assert report.dead_bytes == 0 and report.orphan_bytes_skipped == 0
    assert report.bytes_written == sealed.stat().st_size

    # the same with a __meta__ section (meta= passes through to the tail)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    write_archive(one, entries, block_size=BLOCK, meta={"release": "1.0"})
    seal(sidecar, wh, "lc", sealed, meta={"release": "1.0"})
    assert sealed.read_bytes() == one.read_bytes()


def test_seal_never_runs_the_codec_or_hashes_content(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    sidecar, wh = tmp_path / "blobs.znippy", tmp_path / "wh"
    src = tmp_path / "src"
    make_tree(src, "c", 3)
    with open_store(sidecar, wh, "lc", block_size=BLOCK) as store:
        store.add(src)
    import blake3

    from znippy_sql.format import codec

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the seal must not compress, decompress or hash content")

    hashed: list[int] = []  # the seal hashes the tail it writes (section digests), no blob
    real = blake3.blake3

    def tail_only(data: bytes = b"", **kwargs: object) -> object:
        hashed.append(memoryview(data).nbytes)
        return real(data, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(codec.Encoder, "encode", forbidden)
        m.setattr(codec.Decoder, "decode", forbidden)
        m.setattr(blake3, "blake3", tail_only)
        report = seal(sidecar, wh, "lc", tmp_path / "out.znippy")
    assert report.rows_sealed > 0
    with open_archive(tmp_path / "out.znippy") as arc:
        assert sum(hashed) == sum(r.index_len for r in arc.manifest_rows)
        assert arc.verify().ok  # the codec is back: every blob decodes to its checksum
        assert arc.read("c/src/m3.py") == (src / "c/src/m3.py").read_bytes()


def test_sealed_archive_stands_alone_and_replaces_atomically(tmp_path: Path) -> None:
    sidecar, wh = tmp_path / "blobs.znippy", tmp_path / "wh"
    with open_store(sidecar, wh, "lc") as store:
        store.add([Entry("x.txt", data=b"first")])
    out = tmp_path / "out" / "sealed.znippy"
    out.parent.mkdir()
    seal(sidecar, wh, "lc", out)
    with open_store(sidecar, wh, "lc") as store:
        store.add([Entry("x.txt", data=b"second"), Entry("y.txt", data=b"y")])
    before = out.read_bytes()
    # a seal that fails leaves the previous output and no staging file behind
    with open(sidecar, "r+b") as fh:
        fh.truncate(3)
    with pytest.raises(StoreError, match="sidecar is 3 bytes"):
        seal(sidecar, wh, "lc", out)
    assert out.read_bytes() == before
    assert os.listdir(out.parent) == ["sealed.znippy"]
    with open_archive(out) as arc:
        assert arc.read("x.txt") == b"first"
    # the sealed archive needs neither the warehouse nor the sidecar
    copy = tmp_path / "copy.znippy"
    shutil.copyfile(out, copy)
    shutil.rmtree(wh)
    sidecar.unlink()
    with open_archive(copy) as arc:
        assert arc.verify().ok and arc.read("x.txt") == b"first"


def test_dead_and_orphan_bytes_are_reported(tmp_path: Path) -> None:
    sidecar, wh = tmp_path / "blobs.znippy", tmp_path / "wh"
    with open_store(sidecar, wh, "lc", block_size=BLOCK) as store:
        store.add([Entry("a.txt", data=text(3000, 1)), Entry("b.txt", data=text(500, 2))])
        r = store.add([Entry("a.txt", data=b"replaced")])
        end = store.committed_end
    with open(sidecar, "ab") as fh:  # bytes a crashed add left past the committed end
        fh.write(b"\x00orphan" * 10)
    report = seal(sidecar, wh, "lc", tmp_path / "s.znippy")
    assert report.dead_bytes == r.dead_bytes > 0
    assert report.orphan_bytes_skipped == 70
    assert report.blob_end == end
    with open_archive(tmp_path / "s.znippy") as arc:
        assert arc.verify().ok
        assert arc.read("a.txt") == b"replaced"
        assert arc.tail_offset == -(-end // 64) * 64


def test_missing_store_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="sidecar"):
        seal(tmp_path / "none.znippy", tmp_path / "wh", "lc", tmp_path / "o.znippy")
    (tmp_path / "none.znippy").write_bytes(b"")
    with pytest.raises(StoreError, match="no such warehouse"):
        seal(tmp_path / "none.znippy", tmp_path / "wh", "lc", tmp_path / "o.znippy")
    assert not (tmp_path / "wh").exists()  # a reader creates nothing
    open_store(tmp_path / "other.znippy", tmp_path / "wh", "elsewhere").close()
    with pytest.raises(StoreError, match="namespace"):
        seal(tmp_path / "none.znippy", tmp_path / "wh", "lc", tmp_path / "o.znippy")
    assert not (tmp_path / "o.znippy").exists()


def test_seal_signs_when_given_a_signer(tmp_path: Path) -> None:
    from znippy_sql.provenance.sign import verify_signatures

    signer = self_signed_signer("seal test")
    sidecar, wh = tmp_path / "blobs.znippy", tmp_path / "wh"
    with open_store(sidecar, wh, "lc", block_size=BLOCK) as store:
        store.add([Entry("a.txt", data=text(5000, 1)), Entry("b.txt", data=b"b")])
    out = tmp_path / "signed.znippy"
    seal(sidecar, wh, "lc", out, signer=signer)
    with open_archive(out) as arc:
        assert arc.has_section("__sign_artifacts__") and arc.has_section("__sign_archive__")
        assert verify_signatures(arc, [signer.cert]) == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_store_and_append_chain_agree_byte_for_byte(tmp_path: Path, seed: int) -> None:
    """Random batches with re-added paths and moves between groups: the seal of a store fed
    the batches equals write_archive(first batch) followed by append_archive of the others —
    replacements and dead bytes included, since both put blobs at the same offsets."""
    from znippy_sql.write.append import append_archive

    rng = random.Random(seed)
    names = [f"d{rng.randint(0, 2)}/f{i}.txt" for i in range(14)]
    batches = []
    for b in range(3):
        chosen = rng.sample(names, rng.randint(3, 8))
        batches.append([Entry(p, data=text(rng.choice([0, 10, 900, 3 * BLOCK + 7]), seed * 97 + b),
                              repo=rng.choice(["", "r"])) for p in chosen])
    chained = tmp_path / "chained.znippy"
    write_archive(chained, batches[0], block_size=BLOCK)
    sidecar, wh = tmp_path / "blobs.znippy", tmp_path / "wh"
    with open_store(sidecar, wh, "lc", block_size=BLOCK) as store:
        store.add(batches[0])
        for batch in batches[1:]:
            r_store = store.add(batch)
            r_append = append_archive(chained, batch, move=True)
            assert (r_store.rows_replaced, r_store.dead_bytes) == (r_append.rows_replaced,
                                                                  r_append.dead_bytes)
    sealed = tmp_path / "sealed.znippy"
    seal(sidecar, wh, "lc", sealed)
    assert sealed.read_bytes() == chained.read_bytes()
    latest = {e.relative_path: e.data for batch in batches for e in batch}
    with open_archive(sealed) as arc:
        assert arc.verify().ok
        assert {p: arc.read(p) for p in latest} == latest
