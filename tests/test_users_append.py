"""append: a signed archive is refused unless re-signed or told to drop the signatures;
``__meta__`` is kept and merged; a move between groups needs ``--move`` (issue 16, 3 and 4)."""

from __future__ import annotations

import json
from pathlib import Path

from _users import make_cert

from znippy_sql import open_archive
from znippy_sql.cli import main
from znippy_sql.provenance.meta import facts


def _tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def test_append_to_a_signed_archive(tmp_path: Path, capsys) -> None:
    key, cert = make_cert(tmp_path, "release")
    src = _tree(tmp_path / "a", {"lib/x.py": b"x = 1\n" * 30, "README": b"hi\n"})
    more = _tree(tmp_path / "b", {"lib/y.py": b"y = 2\n" * 30})
    arc = tmp_path / "s.znippy"
    assert main(["create", str(src), "-o", str(arc), "--sign-key", str(key),
                 "--sign-cert", str(cert), "--meta", "team=core"]) == 0
    before = arc.read_bytes()
    capsys.readouterr()
    assert main(["append", str(arc), str(more)]) == 2
    err = capsys.readouterr().err
    assert "archive is signed" in err and "--drop-signatures" in err and "--sign-key" in err
    assert "Traceback" not in err and arc.read_bytes() == before
    # re-signed: still verifies against the certificate, __meta__ kept
    assert main(["append", str(arc), str(more), "--sign-key", str(key),
                 "--sign-cert", str(cert)]) == 0
    assert "__meta__ updated" in capsys.readouterr().out
    assert main(["verify", str(arc), "--trust", str(cert)]) == 0
    capsys.readouterr()
    # dropped: said in the summary
    assert main(["append", str(arc), str(_tree(tmp_path / "c", {"z": b"z"})),
                 "--drop-signatures"]) == 0
    out = capsys.readouterr().out
    assert "signatures dropped (--drop-signatures): __sign_artifacts__, __sign_archive__" in out
    assert "__meta__ updated" in out  # the new file's posix.* facts
    with open_archive(arc) as a:
        assert not a.has_section("__sign_archive__")
        assert facts(a)["team"] == ["core"]


def test_meta_is_merged_not_replaced(tmp_path: Path, capsys) -> None:
    src = _tree(tmp_path / "a", {"a.txt": b"a"})
    arc = tmp_path / "m.znippy"
    assert main(["create", str(src), "-o", str(arc), "--meta", "team=core",
                 "--meta", "release=1"]) == 0
    facts_file = tmp_path / "f.jsonl"
    facts_file.write_text('{"path": "b.txt", "license": "MIT"}\n')
    more = _tree(tmp_path / "b", {"b.txt": b"b"})
    assert main(["append", str(arc), str(more), "--meta", "release=2",
                 "--meta-file", str(facts_file)]) == 0
    capsys.readouterr()
    with open_archive(arc) as a:
        archive_facts = facts(a)
        assert archive_facts["team"] == ["core"] and archive_facts["release"] == ["2"]
        assert facts(a, "b.txt")["license"] == ["MIT"]


def test_moving_a_file_between_groups_needs_move(tmp_path: Path, capsys) -> None:
    coll = _tree(tmp_path / "coll", {"babel/__init__.py": b"v = 1\n", "babel/core.py": b"c\n"})
    arc = tmp_path / "coll.znippy"
    assert main(["create", str(coll), "-o", str(arc), "--repo", "pypi-local"]) == 0
    before = arc.read_bytes()
    capsys.readouterr()
    (coll / "babel" / "__init__.py").write_bytes(b"v = 2\n")
    assert main(["append", str(arc), str(coll), "--repo", "other"]) == 2
    err = capsys.readouterr().err
    assert "'babel/__init__.py' from raw/pypi-local/- to raw/other/-" in err
    assert "--move" in err and arc.read_bytes() == before
    # the same repo: a replacement, reported as such
    assert main(["append", str(arc), str(coll), "--repo", "pypi-local", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files_moved"] == 0 and report["files_replaced"] >= 1
    assert main(["append", str(arc), str(coll), "--repo", "other", "--move"]) == 0
    out = capsys.readouterr().out
    assert "0 replaced, 2 moved" in out
    assert "moved babel/__init__.py: raw/pypi-local/- -> raw/other/-" in out
    with open_archive(arc) as a:
        assert [k.repo for k in a.groups] == ["other"]
        assert a.read("babel/__init__.py") == b"v = 2\n"


def test_reappending_an_unchanged_tree_writes_nothing(tmp_path: Path, capsys) -> None:
    files = {f"pkg/m{i}.py": (b"value = %d\n" % i) * (40 + i) for i in range(20)}
    files["big.bin"] = bytes(range(256)) * 9000  # several chunks at --block-size 1M
    src = _tree(tmp_path / "src", files)
    arc = tmp_path / "t.znippy"
    assert main(["create", str(src), "-o", str(arc), "--block-size", "1M"]) == 0
    before = arc.read_bytes()
    capsys.readouterr()
    assert main(["append", str(arc), str(src), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["files_added"], r["files_unchanged"], r["dead_bytes"]) == (0, 21, 0)
    assert arc.read_bytes() == before  # nothing at all changed: the file is untouched
    # one file changed, one of the same size changed, one new
    (src / "pkg" / "m3.py").write_bytes(b"changed\n")
    m4 = (src / "pkg" / "m4.py").read_bytes()
    (src / "pkg" / "m4.py").write_bytes(m4[:-2] + b"X\n")
    (src / "new.txt").write_bytes(b"new\n")
    assert main(["append", str(arc), str(src), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["files_added"], r["files_unchanged"], r["files_replaced"]) == (3, 19, 2)
    with open_archive(arc) as a:
        assert a.verify().ok
        assert a.read("pkg/m4.py").endswith(b"X\n") and a.read("new.txt") == b"new\n"
        assert a.read("big.bin") == files["big.bin"]
