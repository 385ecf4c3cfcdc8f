"""``__meta__``: absent vs present-and-empty, provenance facts, per-file facts, the CLI."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from znippy_sql import Entry, FormatError, ReservedSection, ZnippyError, open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.provenance.meta import Meta, facts, meta_table, read_facts_file, read_meta
from znippy_sql.format.schema import META, META_SCHEMA

ENTRIES = [Entry("a.txt", data=b"a" * 100), Entry("dir/b.txt", data=b"b" * 100)]


def _write(tmp_path, name="m.znippy", **kw):
    out = tmp_path / name
    write_archive(out, ENTRIES, workers=1, **kw)
    return out


def test_no_meta_means_no_section(tmp_path):
    with open_archive(_write(tmp_path)) as a:
        assert not a.has_section(META)
        assert read_meta(a) is None
        assert facts(a) is None


def test_present_and_empty_is_not_absent(tmp_path):
    with open_archive(_write(tmp_path, meta=Meta(provenance=False))) as a:
        assert a.has_section(META)
        table = read_meta(a)
        assert table is not None and table.num_rows == 0
        assert table.schema.equals(META_SCHEMA)
        assert facts(a) == {}


def test_provenance_facts(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    out = _write(tmp_path, meta=Meta(source="/data/src", facts={"team": "core"}))
    with open_archive(out) as a:
        rows = read_meta(a).to_pylist()
    from znippy_sql import __version__

    assert rows == [
        {"relative_path": None, "key": "created_at", "value": "2023-11-14T22:13:20Z"},
        {"relative_path": None, "key": "created_by", "value": f"znippy-sql {__version__}"},
        {"relative_path": None, "key": "source", "value": "/data/src"},
        {"relative_path": None, "key": "team", "value": "core"},
    ]


def test_same_facts_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    files_a = {"dir/b.txt": {"license": "MIT"}, "a.txt": {"owner": "x", "tag": ["t1", "t2"]}}
    files_b = [("a.txt", "tag", "t1"), ("dir/b.txt", "license", "MIT"), ("a.txt", "owner", "x"),
               ("a.txt", "tag", "t2")]
    one = _write(tmp_path, "1.znippy", meta=Meta(facts={"k": "v"}, files=files_a))
    two = _write(tmp_path, "2.znippy", meta=Meta(facts={"k": "v"}, files=files_b))
    assert one.read_bytes() == two.read_bytes()
    with open_archive(one) as a:
        assert facts(a, "a.txt") == {"owner": ["x"], "tag": ["t1", "t2"]}
        assert facts(a)["k"] == ["v"]


def test_with_source_fills_only_what_is_missing():
    from znippy_sql.provenance.meta import with_source

    assert with_source(True, "src").source == "src"
    assert with_source({"k": "v"}, "src") == Meta(facts={"k": "v"}, source="src")
    assert with_source(Meta(source="given"), "src").source == "given"
    assert with_source(Meta(), "src").source == "src"
    table = pa.table({"key": ["k"], "value": ["v"]})
    assert with_source(table, "src") is table


def test_bad_source_date_epoch(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(ZnippyError, match="SOURCE_DATE_EPOCH"):
        _write(tmp_path, meta=Meta())


def test_given_fact_overrides_provenance_and_other_forms():
    t = meta_table({"created_by": "my pipeline 3"})
    assert [r["value"] for r in t.to_pylist() if r["key"] == "created_by"] == ["my pipeline 3"]
    assert {r["key"] for r in meta_table(True).to_pylist()} == {"created_at", "created_by"}
    given = pa.table({"relative_path": ["x", None], "key": ["k", "a"], "value": ["1", "2"]})
    assert meta_table(given).to_pylist() == [
        {"relative_path": None, "key": "a", "value": "2"},
        {"relative_path": "x", "key": "k", "value": "1"}]
    assert meta_table(Meta(provenance=False, facts={"n": 3, "ok": True})).column(
        "value").to_pylist() == ["3", "true"]


@pytest.mark.parametrize("bad,match", [
    (Meta(provenance=False, files={"../escape": {"k": "v"}}), "unsafe entry path"),
    (Meta(provenance=False, facts={"": "v"}), "non-empty"),
    (Meta(provenance=False, facts={"k": None}), "may not be null"),
])
def test_bad_facts_are_refused(bad, match):
    with pytest.raises(ZnippyError, match=match):
        meta_table(bad)
    with pytest.raises(TypeError):
        meta_table(42)


def test_facts_file(tmp_path):
    f = tmp_path / "facts.jsonl"
    f.write_text("\n".join([
        json.dumps({"path": "a.txt", "key": "license", "value": "MIT"}),
        json.dumps({"relative_path": "dir/b.txt", "owner": "ops", "stars": 5}),
        "",
        json.dumps({"release": "2024.1"}),
    ]))
    assert read_facts_file(f) == [("a.txt", "license", "MIT"), ("dir/b.txt", "owner", "ops"),
                                  ("dir/b.txt", "stars", "5"), (None, "release", "2024.1")]


@pytest.mark.parametrize("line,match", [
    ("not json", "line 2: not JSON"), ("[1, 2]", "line 2: expected a JSON object"),
    ('{"path": "a.txt"}', "line 2: no facts"), ('{"path": 3, "k": "v"}', "path must be"),
])
def test_facts_file_errors_name_file_and_line(tmp_path, line, match):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"k": "v"}\n' + line + "\n")
    with pytest.raises(ZnippyError, match=match) as err:
        read_facts_file(f)
    assert str(f) in str(err.value)


def test_meta_with_wrong_schema_is_a_format_error(tmp_path):
    wrong = pa.table({"k": ["x"]})
    out = _write(tmp_path, reserved_sections=[ReservedSection(META, wrong)])
    with open_archive(out) as a, pytest.raises(FormatError, match=META):
        read_meta(a)


def test_cli_records_provenance_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    src = tmp_path / "src"
    (src / "dir").mkdir(parents=True)
    (src / "a.txt").write_text("a")
    (src / "dir" / "b.txt").write_text("b")
    facts_file = tmp_path / "f.jsonl"
    facts_file.write_text(json.dumps({"path": "dir/b.txt", "license": "MIT"}) + "\n")
    out = tmp_path / "c.znippy"
    assert main(["create", str(src), "-o", str(out), "--meta", "team=core", "--meta",
                 "tag=a=b", "--meta", "tag=c", "--meta-file", str(facts_file),
                 "--no-posix"]) == 0
    with open_archive(out) as a:
        assert facts(a) == {"created_at": ["1970-01-01T00:00:00Z"],
                            "created_by": [facts(a)["created_by"][0]], "source": [str(src)],
                            "tag": ["a=b", "c"], "team": ["core"]}
        assert facts(a, "dir/b.txt") == {"license": ["MIT"]}
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0


def test_cli_no_provenance(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a")
    bare = tmp_path / "bare.znippy"
    assert main(["create", str(src), "-o", str(bare), "--no-provenance", "--no-posix"]) == 0
    with open_archive(bare) as a:
        assert read_meta(a) is None
    only = tmp_path / "only.znippy"
    assert main(["create", str(src), "-o", str(only), "--no-provenance", "--meta", "k=v",
                 "--no-posix"]) == 0
    with open_archive(only) as a:
        assert read_meta(a).to_pylist() == [{"relative_path": None, "key": "k", "value": "v"}]
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["create", str(src), "-o", str(only), "--meta", "novalue"])
    assert stop.value.code == 2
    assert "expected key=value" in capsys.readouterr().err
