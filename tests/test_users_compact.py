"""compact: an archive without dead bytes, byte-identical to a one-shot write of the live
files; the store's Iceberg tables compacted (issue 16, item 11)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from znippy_sql import Entry, open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.errors import LockError
from znippy_sql.format import rollback
from znippy_sql.provenance.sign import verify_signatures
from znippy_sql.write.append import append_archive
from znippy_sql.write.compact import compact_archive

from _users import make_cert

BLOCK = 4096


def _e(path: str, n: int, seed: int, **kw) -> Entry:
    data = bytes((seed * 31 + i * 7) % 251 for i in range(n)) if n % 2 else \
        (f"{path} {seed}\n" * (n // 10 + 1)).encode()[:n]
    return Entry(path, data=data, **kw)


def test_compact_equals_a_one_shot_of_the_live_files(tmp_path: Path) -> None:
    a = [_e("a.txt", 5000, 1), _e("b.bin", 9001, 2, repo="r"), _e("c/empty", 0, 3),
         _e("c/d.zip", 3001, 4), _e("m/big.txt", 3 * BLOCK + 17, 5, repo="r")]
    b = [_e("b.bin", 777, 6, repo="r"), _e("new.txt", 1200, 7), _e("a.txt", 10, 8)]
    grown = tmp_path / "grown.znippy"
    write_archive(grown, a, block_size=BLOCK)
    r = append_archive(grown, b)
    assert r.dead_bytes > 0
    report = compact_archive(grown)
    assert report.rewritten and report.dead_bytes_dropped == r.dead_bytes
    # the one-shot of the live files, in production order: the old ones left, then the new
    live = [a[2], a[3], a[4], *b]
    one = tmp_path / "one.znippy"
    write_archive(one, live, block_size=BLOCK)
    assert grown.read_bytes() == one.read_bytes()
    again = compact_archive(grown)
    assert not again.rewritten and grown.read_bytes() == one.read_bytes()


def test_compact_keeps_meta_and_signatures(tmp_path: Path, capsys) -> None:
    key, cert = make_cert(tmp_path, "c")
    arc = tmp_path / "s.znippy"
    write_archive(arc, [_e("x", 3000, 1), _e("y", 3000, 2)], meta={"team": "core"},
                  signer=(key, cert))
    append_archive(arc, [_e("x", 100, 3)], signer=(key, cert))
    assert main(["compact", str(arc), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rewritten"] and report["dead_bytes_dropped"] > 0
    with open_archive(arc) as a:
        assert a.verify().ok
        assert verify_signatures(a, cert) == []
        assert a.read("x") == _e("x", 100, 3).data
        assert "team" in a.section("__meta__").column("key").to_pylist()
    assert main(["compact", str(arc)]) == 0
    assert "no dead bytes, left as it was" in capsys.readouterr().out


def test_compact_is_refused_while_an_append_runs(tmp_path: Path) -> None:
    import fcntl

    arc = tmp_path / "l.znippy"
    write_archive(arc, [_e("x", 3000, 1)])
    append_archive(arc, [_e("x", 10, 2)])
    before = arc.read_bytes()
    with open(arc, "rb") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        with pytest.raises(LockError):
            compact_archive(arc)
    assert arc.read_bytes() == before
    assert not any(p.name.startswith(".l.znippy.znippy-staging") for p in tmp_path.iterdir())
    assert not os.path.exists(rollback.journal_path(arc))


def _write(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _store_args(tmp_path: Path) -> list[str]:
    return ["--sidecar", str(tmp_path / "blobs.znippy"), "--warehouse", str(tmp_path / "wh"),
            "--namespace", "s"]


def test_store_add_skips_unchanged_files_and_compacts(tmp_path: Path, capsys) -> None:
    from znippy_sql.store import open_store

    tree = _write(tmp_path / "tree", {f"m{i}.py": b"x = %d\n" % i * 50 for i in range(30)})
    other = _write(tmp_path / "other", {"o.txt": b"other\n"})
    args = _store_args(tmp_path)
    sizes = []
    for src, repo in ((tree, ""), (tree, ""), (other, "r"), (tree, "")):
        assert main(["store", "add", *args, str(src), "--repo", repo, "--json"]) == 0
        sizes.append(json.loads(capsys.readouterr().out))
    assert [r["files_added"] for r in sizes] == [30, 0, 1, 0]
    assert [r["files_unchanged"] for r in sizes] == [0, 30, 0, 30]
    assert sizes[1]["sidecar_end"] == sizes[0]["sidecar_end"]  # the sidecar did not grow
    (tree / "m3.py").write_bytes(b"changed\n")
    assert main(["store", "add", *args, str(tree), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["files_added"], r["files_unchanged"], r["files_replaced"]) == (1, 29, 1)
    sealed = tmp_path / "before.znippy"
    assert main(["store", "seal", *args, "-o", str(sealed), "--no-provenance"]) == 0
    capsys.readouterr()
    with open_store(tmp_path / "blobs.znippy", tmp_path / "wh", "s", writable=False) as st:
        files_before = st.files()
        tables = {k: st.iceberg_table(k) for k in st.groups}
        data_files = {k: len(list(t.scan().plan_files())) for k, t in tables.items()}
    assert max(data_files.values()) > 1
    assert main(["store", "compact", *args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["data_files_after"] == len(tables) and report["files_removed"] > 0
    with open_store(tmp_path / "blobs.znippy", tmp_path / "wh", "s", writable=False) as st:
        assert st.files().equals(files_before)
        for key in st.groups:
            assert len(list(st.iceberg_table(key).scan().plan_files())) == 1
    parquet = list((tmp_path / "wh").rglob("*.parquet"))
    assert len(parquet) == len(tables)
    after = tmp_path / "after.znippy"
    assert main(["store", "seal", *args, "-o", str(after), "--no-provenance"]) == 0
    assert after.read_bytes() == sealed.read_bytes()
    # a store whose sidecar and warehouse lie inside the source does not read them back
    inside = _write(tmp_path / "inside", {"a.txt": b"a"})
    own = ["--sidecar", str(inside / "b.znippy"), "--warehouse", str(inside / "wh"),
           "--namespace", "n"]
    for _ in range(2):
        assert main(["store", "add", *own, str(inside), "--json"]) == 0
        capsys.readouterr()
    assert main(["store", "ls", *own]) == 0
    assert capsys.readouterr().out.split() == ["a.txt"]
