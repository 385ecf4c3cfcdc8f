"""``WriteOptions`` and ``Provenance``: one frozen, checked set of write options for every writer.

Each writer given ``options=WriteOptions(...)`` writes the bytes it writes given the same
values as keyword arguments; a bad value is refused before any work with an ``OptionError``
naming it; the CLI's flags become the same options; no writer has a default of its own.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest

from znippy_sql import (ArchiveWriter, Entry, OptionError, Provenance, WriteOptions,
                        ZnippyError, append_archive, seal, write_archive)
from znippy_sql.cli import build_parser, main
from znippy_sql.cli.create import options_from
from znippy_sql.store import open_store
from znippy_sql.store.dynamic import Store
from znippy_sql.write.append import open_for_append
from znippy_sql.write.compact import compact_archive

#: not the defaults anywhere: each field is seen to arrive
OPTS = dict(level=5, block_size=4096, workers=1, dedup=False, pack=True,
            index_compression=True, fsync=False)


def _entries(tag: str = "a") -> list[Entry]:
    out = [Entry(f"{tag}/small{i:02d}.txt", data=(f"{tag} {i} " * (20 + i)).encode())
           for i in range(30)]
    out.append(Entry(f"{tag}/big.bin", data=bytes(range(256)) * 40))  # several 4 KiB chunks
    return out


@pytest.fixture(autouse=True)
def _fixed_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # __meta__'s created_at


def test_write_archive_and_writer_options_equal_keywords(tmp_path: Path) -> None:
    meta = {"build": "42"}
    by_kw = write_archive(tmp_path / "kw.znippy", _entries(), meta=meta, **OPTS)  # type: ignore[arg-type]
    by_opt = write_archive(tmp_path / "opt.znippy", _entries(),
                           options=WriteOptions(**OPTS),  # type: ignore[arg-type]
                           provenance=Provenance(meta=meta))
    assert by_kw.packs and by_kw.chunks > by_kw.files  # pack and block_size did arrive
    with ArchiveWriter(tmp_path / "w.znippy", options=WriteOptions(**OPTS),  # type: ignore[arg-type]
                       provenance=Provenance(meta=meta)) as w:
        w.add_all(_entries())
    kw = (tmp_path / "kw.znippy").read_bytes()
    assert (tmp_path / "opt.znippy").read_bytes() == kw
    assert (tmp_path / "w.znippy").read_bytes() == kw
    assert by_opt.archive_bytes == by_kw.archive_bytes
    # keywords override the options they are given with
    write_archive(tmp_path / "mix.znippy", _entries(), provenance=Provenance(meta=meta),
                  options=WriteOptions(**{**OPTS, "level": 9}), level=5)  # type: ignore[arg-type]
    assert (tmp_path / "mix.znippy").read_bytes() == kw


def test_append_and_compact_options_equal_keywords(tmp_path: Path) -> None:
    paths = []
    for name in ("kw", "opt"):
        p = tmp_path / f"{name}.znippy"
        write_archive(p, _entries(), options=WriteOptions(**OPTS))  # type: ignore[arg-type]
        paths.append(p)
    kw, opt = paths
    replaced = [Entry("a/big.bin", data=b"new"), *_entries("b")]
    r1 = append_archive(kw, replaced, meta={"k": "v"}, **OPTS)  # type: ignore[arg-type]
    r2 = append_archive(opt, replaced, options=WriteOptions(**OPTS),  # type: ignore[arg-type]
                        provenance=Provenance(meta={"k": "v"}))
    assert r1.files_replaced == 1 and r1.dead_bytes > 0
    assert kw.read_bytes() == opt.read_bytes()
    assert r1 == dataclasses.replace(r2, path=r1.path, seconds=r1.seconds)
    c1 = compact_archive(kw, fsync=False)
    c2 = compact_archive(opt, options=WriteOptions(fsync=False))
    assert c1.rewritten and c2.rewritten and kw.read_bytes() == opt.read_bytes()
    # without options an append keeps the archive's own settings; given options are checked
    with pytest.raises(ZnippyError, match="written with level=5; appending with level=3"):
        append_archive(kw, _entries("c"), options=WriteOptions())
    append_archive(kw, [Entry("c.txt", data=b"c")], fsync=False)
    with open_for_append(kw, options=WriteOptions(**OPTS)) as ap:  # type: ignore[arg-type]
        ap.add(Entry("d.txt", data=b"d"))
    assert ap.options == WriteOptions(**OPTS)  # type: ignore[arg-type]


def test_store_options_equal_keywords(tmp_path: Path) -> None:
    sealed = []
    for name, kwargs in (("kw", {"level": 5, "block_size": 4096}),
                         ("opt", {"options": WriteOptions(level=5, block_size=4096)})):
        side, wh = tmp_path / f"{name}.blobs", tmp_path / f"{name}-wh"
        with open_store(side, wh, "ns", **kwargs) as store:  # type: ignore[arg-type]
            if name == "kw":
                store.add(_entries(), workers=1, dedup=False)
            else:
                store.add(_entries(), options=WriteOptions(level=5, block_size=4096, workers=1,
                                                           dedup=False))
        out = tmp_path / f"{name}.znippy"
        if name == "kw":
            seal(side, wh, "ns", out, meta={"k": "v"}, fsync=False)
        else:
            seal(side, wh, "ns", out, options=WriteOptions(fsync=False),
                 provenance=Provenance(meta={"k": "v"}))
        sealed.append(out.read_bytes())
        with pytest.raises(ZnippyError, match="created with"):
            open_store(side, wh, "ns", options=WriteOptions())
        with open_store(side, wh, "ns") as store:
            with pytest.raises(ZnippyError, match="created with level=5"):
                store.add(_entries("z"), options=WriteOptions())
    assert sealed[0] == sealed[1]


@pytest.mark.parametrize(("fields", "words"), [
    ({"level": 0}, "level=0: out of range"),
    ({"level": 23}, "level=23: out of range"),
    ({"level": "5"}, "level='5': not a whole number"),
    ({"block_size": 0}, "block_size=0: must be positive"),
    ({"block_size": 1 << 32}, "block_size=4294967296"),
    ({"workers": 0}, "workers=0: must be a positive"),
    ({"dedup": "yes"}, "dedup='yes': must be True or False"),
    ({"fsync": None}, "fsync=None: must be True or False"),
    ({"compat": "rust-9"}, "unknown compat mode"),
    ({"compat": "rust-0.8", "posix": True}, "compat='rust-0.8' and posix=True"),
])
def test_bad_option_refused(tmp_path: Path, fields: dict[str, Any], words: str) -> None:
    with pytest.raises(OptionError, match=words):
        WriteOptions(**fields)
    out = tmp_path / "x.znippy"
    if fields.get("fsync", 1) is not None:  # as a keyword, None means "not given"
        with pytest.raises(OptionError, match=words):
            write_archive(out, _entries(), **fields)
    assert not out.exists() and not list(tmp_path.iterdir())


def test_refusals_before_any_work(tmp_path: Path) -> None:
    arc = tmp_path / "a.znippy"
    write_archive(arc, _entries(), fsync=False)
    before = arc.read_bytes()
    with pytest.raises(OptionError, match="level=99"):
        append_archive(arc, _entries("b"), level=99)
    with pytest.raises(TypeError, match="unexpected keyword argument.*levle"):
        write_archive(tmp_path / "b.znippy", _entries(), levle=5)  # type: ignore[call-arg]
    with pytest.raises(OptionError, match="options= takes a WriteOptions, not dict"):
        write_archive(tmp_path / "b.znippy", _entries(), options={"level": 5})  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="provenance= takes a Provenance"):
        write_archive(tmp_path / "b.znippy", _entries(), provenance={"k": "v"})  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        WriteOptions().level = 9  # type: ignore[misc]
    assert arc.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["a.znippy"]
    assert WriteOptions(compat="rust-0.8", pack=True, index_compression=True) == \
        WriteOptions(compat="rust-0.8", pack=False, index_compression=False)


def test_no_writer_has_defaults_of_its_own() -> None:
    """Every option keyword of every writer defaults to None ("not given"): the defaults are
    the ``WriteOptions`` fields alone (so changing one changes every writer)."""
    fields = {f.name for f in dataclasses.fields(WriteOptions)}
    writers = [write_archive, ArchiveWriter.__init__, append_archive, open_for_append,
               compact_archive, seal, open_store, Store.__init__, Store.add]
    for fn in writers:
        for name, param in inspect.signature(fn).parameters.items():
            if name in fields:
                assert param.default is None, (fn.__qualname__, name)


def test_cli_flags_map_onto_options(tmp_path: Path) -> None:
    parse = build_parser().parse_args
    src = tmp_path / "src"
    src.mkdir()
    assert options_from(parse(["create", str(src), "-o", "x"])) == WriteOptions(posix=True)
    args = parse(["create", str(src), "-o", "x", "--level", "7", "--block-size", "64K",
                  "--workers", "2", "--no-dedup", "--pack", "--no-index-compression",
                  "--no-posix", "--skip-unsafe"])
    assert options_from(args) == WriteOptions(level=7, block_size=65536, workers=2,
                                              dedup=False, pack=True, index_compression=False,
                                              posix=False, skip_unsafe=True)
    compat = parse(["create", str(src), "-o", "x", "--compat", "rust-0.8"])
    assert options_from(compat) == WriteOptions(compat="rust-0.8")
    # the command writes what the API writes with those options
    for i, e in enumerate(_entries()):
        (src / f"f{i:02d}.txt").write_bytes(e.data or b"")
    cli_out = tmp_path / "cli.znippy"
    assert main(["create", str(src), "-o", str(cli_out), "--level", "5", "--block-size",
                 "4K", "--pack", "--no-dedup", "--no-provenance", "--no-posix"]) == 0
    api_out = tmp_path / "api.znippy"
    write_archive(api_out, src, options=WriteOptions(level=5, block_size=4096, pack=True,
                                                     dedup=False))
    assert cli_out.read_bytes() == api_out.read_bytes()
