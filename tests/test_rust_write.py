"""``compat="rust-0.8"``: archives the Rust tool 0.8 reads, checked the way it reads them
(``read_multi_index`` and ``decompress_archive`` reproduced with pyarrow alone in
tests/rust_layout.py), and their frames decoded by OpenZL 0.2.0, the release the Rust 0.8
build compiles (``openzl-sys-rs`` 0.2.0), in a venv of its own."""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pyarrow as pa
import pytest

import rust_layout as rl
from rust_cases import blocks, noise, text
from znippy_sql import Entry, ReservedSection, ZnippyError, open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.write.compat import one_schema
from znippy_sql.format.schema import GroupKey

POM = (b'<project xmlns="http://maven.apache.org/POM/4.0.0"><groupId>org.acme</groupId>'
       b'<artifactId>widget</artifactId><version>7</version></project>')
#: where the OpenZL 0.2.0 venv is kept between runs (made on first use)
OLD_OPENZL = Path(os.environ.get("ZNIPPY_OPENZL_OLD_VENV",
                                 Path.home() / ".cache" / "znippy-sql-tests" / "openzl-0.2.0"))


def entries() -> list[Entry]:
    return [
        Entry("maven/org/acme/widget/7/widget-7.pom", data=POM, pkg_type="auto"),
        Entry("maven/org/acme/widget/7/widget-7.jar", data=noise(900, "jar"), pkg_type="auto"),
        Entry("pypi/requests-2.31.0-py3-none-any.whl", data=noise(500, "whl"), pkg_type="auto"),
        Entry("README.md", data=text(5000, "readme"), repo="docs"),
        Entry("big.bin", data=blocks(300_000, "big")),  # 5 chunks at 64 KiB
        Entry("noise.bin", data=noise(4000, "noise")),  # stored raw: no frame is smaller
        Entry("empty", data=b""),
        Entry("ünï/名前.txt", data=text(100, "uni")),
    ]


def contents() -> dict[str, bytes]:
    return {e.relative_path: e.data for e in entries()}  # type: ignore[misc]


@pytest.fixture(scope="module")
def compat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compat") / "for-rust.znippy"
    write_archive(out, entries(), compat="rust-0.8", block_size=65536, workers=2)
    return out


def test_read_multi_index_gets_every_row(compat: Path) -> None:
    schema, batches = rl.read_multi_index(compat)
    with open_archive(compat) as a:
        assert a.lookup_in_memory and a.sections == []
        assert [r.key.pkg_type for r in a.manifest_rows] == [k.pkg_type for k in a.groups]
        ours = a.index()
        lookup = a.lookup
    (merged,) = batches
    base = [f.name for f in rl.BASE]
    assert schema.names[:8] == base and schema.names[8] == "pkg_type"
    assert "maven_group_id" in schema.names and "pypi_name" in schema.names
    rows = sorted(tuple(r[n] for n in base) for r in merged.to_pylist())
    assert rows == sorted(tuple(r[n] for n in base) for r in ours.to_pylist())
    assert merged.num_rows == lookup.num_rows  # each row once: no __lookup__ copy
    pom = [r for r in merged.to_pylist() if r["relative_path"].endswith(".pom")]
    assert pom[0]["maven_group_id"] == "org.acme" and pom[0]["pkg_type"] == 1


def test_every_stream_has_one_schema(compat: Path) -> None:
    data = compat.read_bytes()
    manifest_offset = int.from_bytes(data[-8:], "little")
    manifest = pa.ipc.open_stream(data[manifest_offset:-16]).read_all().to_pylist()
    schemas = [pa.ipc.open_stream(data[r["index_offset"]:r["index_offset"] + r["index_len"]])
               .schema for r in manifest]
    assert len(schemas) >= 4 and all(s.equals(schemas[0], check_metadata=True) for s in schemas)
    assert all(r["pkg_type"] >= 0 for r in manifest)  # no reserved section
    meta = {k.decode(): v.decode() for k, v in schemas[0].metadata.items()}
    assert meta["znippy.compat"] == "rust-0.8" and meta["znippy.openzl.format_version"] == "8"


def test_decompress_archive_gets_every_file(compat: Path) -> None:
    assert rl.decompress_archive(compat) == contents()


def _frames(path: Path) -> list[tuple[bytes, int]]:
    data = path.read_bytes()
    _, batches = rl.read_multi_index(path)
    return [(data[r["blob_offset"]:r["blob_offset"] + r["blob_size"]], r["uncompressed_size"])
            for b in batches for r in b.to_pylist() if r["compressed"]]


def _old_openzl() -> Path:
    """A venv with openzl 0.2.0 (OpenZL 0.2.0: format versions 8..24), made once."""
    python = OLD_OPENZL / "bin" / "python"
    if not python.exists():
        venv.create(OLD_OPENZL, with_pip=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "openzl==0.2.0"], check=True,
                       timeout=600)
    return python


DECODE = """
import json, sys
import openzl.ext as zl
assert zl.LIBRARY_VERSION_NUMBER == 200, zl.LIBRARY_VERSION_NUMBER
frames = json.load(open(sys.argv[1]))
dctx = zl.DCtx()
out = [dctx.decompress(bytes.fromhex(f))[0].content.as_bytes().hex() for f, _ in frames]
json.dump(out, open(sys.argv[2], "w"))
"""


@pytest.mark.slow
def test_openzl_0_2_decodes_the_frames(compat: Path, tmp_path: Path) -> None:
    """The oldest format version that serves: version 8 frames, decoded by the OpenZL the Rust
    0.8 build links, give the chunks back; a frame of the installed openzl's default version
    (27) would not decode there."""
    python = _old_openzl()
    frames = _frames(compat)
    assert frames and all(f[:4] == (0xD7B1A5C0 + 8).to_bytes(4, "little") for f, _ in frames)
    src, dst = tmp_path / "frames.json", tmp_path / "out.json"
    src.write_text(json.dumps([(f.hex(), n) for f, n in frames]))
    subprocess.run([str(python), "-c", DECODE, str(src), str(dst)], check=True, timeout=120)
    decoded = [bytes.fromhex(h) for h in json.loads(dst.read_text())]
    assert [len(d) for d in decoded] == [n for _, n in frames]
    want = {}
    with open_archive(compat) as a:
        for p in a.select():
            info = a.find(p)
            assert info is not None
            for c in info.chunks:
                frame = bytes(a.source.read(c.blob_offset, c.blob_size))
                want[frame, c.uncompressed_size] = a.read_chunk(p, c)
    assert decoded == [want[f] for f in frames]
    newer = rl.Frames(level=3, format_version=27).frame(b"x" * 1000)
    src.write_text(json.dumps([(newer.hex(), 1000)]))
    failed = subprocess.run([str(python), "-c", DECODE, str(src), str(dst)], capture_output=True,
                            timeout=120)
    assert failed.returncode != 0


def test_zero_files(tmp_path: Path) -> None:
    out = tmp_path / "zero.znippy"
    write_archive(out, [], compat="rust-0.8")
    schema, batches = rl.read_multi_index(out)
    assert batches == [] and schema.names == [f.name for f in rl.BASE]
    with open_archive(out) as a:
        assert a.manifest_rows == [] and a.lookup.num_rows == 0 and a.verify().ok


def test_refused_with_sections(tmp_path: Path) -> None:
    out = tmp_path / "x.znippy"
    some = [Entry("a.txt", data=b"a")]
    for kwargs, what in (({"meta": {"k": "v"}}, "meta"),
                         ({"reserved_sections": [ReservedSection("__x__", b"1")]}, "reserved"),
                         ({"signer": object()}, "signer")):
        with pytest.raises(ZnippyError, match=what):
            write_archive(out, some, compat="rust-0.8", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ZnippyError, match="unknown compat"):
        write_archive(out, some, compat="rust-9")  # type: ignore[arg-type]
    assert not out.exists() and not list(tmp_path.glob(".*staging*"))


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    for name, data in contents().items():
        if "/" not in name or name.startswith("ünï"):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes(data)
    out = tmp_path / "cli.znippy"
    for extra in (["--meta", "a=b"], ["--sign-key", "k.pem", "--sign-cert", "c.pem"],
                  ["--meta-file", "f.jsonl"]):
        assert main(["create", str(src), "-o", str(out), "--compat", "rust-0.8", *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--compat rust-0.8" in err and extra[0] in err
        assert not out.exists()
    assert main(["create", str(src), "-o", str(out), "--compat", "rust-0.8"]) == 0
    capsys.readouterr()
    with open_archive(out) as a:
        assert a.sections == [] and a.meta is None
    files = {p.relative_to(src).as_posix(): p.read_bytes() for p in src.rglob("*") if p.is_file()}
    assert rl.decompress_archive(out) == files
    with pytest.raises(SystemExit):
        main(["create", str(src), "-o", str(out), "--compat", "rust-9"])
    assert "invalid choice" in capsys.readouterr().err


def test_one_schema_refuses_a_type_clash() -> None:
    base = pa.schema(rl.BASE)
    empty = base.empty_table()
    a = empty.append_column(pa.field("pkg_type", pa.int8()), pa.array([], pa.int8())) \
        .append_column("x_v", pa.array([], pa.utf8()))
    b = empty.append_column(pa.field("pkg_type", pa.int8()), pa.array([], pa.int8())) \
        .append_column("x_v", pa.array([], pa.int32()))
    with pytest.raises(ZnippyError, match="x_v"):
        one_schema({GroupKey(1, "", "x"): a, GroupKey(2, "", "y"): b})
    out = one_schema({GroupKey(0, "", ""): empty, GroupKey(1, "", "x"): a})
    assert out[GroupKey(0, "", "")].schema.equals(out[GroupKey(1, "", "x")].schema)
