"""Every read path of the package over one archive file, each outcome classified.

Used by the hardening tests, the fuzz tests and ``bench/fuzz.py``. An outcome is one of

- ``ok``: the path worked, and whatever file bytes it returned are the original ones;
- ``refused``: a :class:`ZnippyError` (or, at query time, a DuckDB error carrying ours) that
  names the archive;
- ``bad``: anything else — another exception, an error that does not name the archive, a
  CLI exit code other than 0/1/2;
- ``wrong``: bytes returned without an error that are no original file's (a silent wrong
  answer: a short, padded or mixed file; bytes of another file under a name a forged index
  gives them are consistent, not wrong), or an append that refused but changed the file.

A crash of the interpreter cannot be classified here; ``bench/fuzz.py`` runs cases in child
processes and counts those as ``crash``.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PATHS = ("api", "cli", "duckdb", "polars", "append")
KINDS = ("ok", "refused", "bad", "wrong")


@dataclass(frozen=True)
class Outcome:
    where: str   # e.g. "api.read", "duckdb.files", "cli.verify"
    kind: str    # one of KINDS
    detail: str = ""


class _Run:
    def __init__(self, archive: Path, originals: dict[str, bytes]) -> None:
        self.archive = archive
        self.name = archive.name
        self.originals = originals
        self.contents = set(originals.values())
        self.out: list[Outcome] = []

    def names_archive(self, text: str) -> bool:
        return self.name in text

    @contextlib.contextmanager
    def step(self, where: str) -> Iterator[None]:
        from znippy_sql.errors import ZnippyError

        try:
            yield
        except ZnippyError as exc:
            kind = "refused" if self.names_archive(str(exc)) else "bad"
            self.out.append(Outcome(where, kind, f"{type(exc).__name__}: {str(exc)[:300]}"))
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # noqa: BLE001  (classified, not hidden; Rust panics too)
            kind = "bad"
            if _is_duckdb_error(exc) and self.names_archive(str(exc)) and \
                    _OURS.search(str(exc)):
                kind = "refused"  # a source or UDF of ours raised; DuckDB passed it on
            self.out.append(Outcome(where, kind, f"{type(exc).__name__}: {str(exc)[:300]}"))
        else:
            self.out.append(Outcome(where, "ok"))

    def same(self, where: str, path: str, got: bytes | None) -> None:
        """Replace the last outcome by ``wrong`` when bytes came back that are no original
        file's: a forged index may consistently give one file's bytes another's name (the
        checksums hold), but never a short, padded or mixed file."""
        want = self.originals.get(path)
        if got is not None and want is not None and got != want and \
                got not in self.contents:
            self.out[-1] = Outcome(where, "wrong", f"{path!r}: {len(got)} bytes, "
                                                   f"expected {len(want)}")


_OURS = re.compile(r"\b(Znippy|Format|Checksum|Codec|UnsafePath|NotFound|Signature|Option)"
                   r"Error: ")


def _is_duckdb_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith(("duckdb", "_duckdb"))


def every_read_path(archive: Path, originals: dict[str, bytes], work: Path, *,
                    paths: tuple[str, ...] = PATHS) -> list[Outcome]:
    """Run every read path in ``paths`` over ``archive``; ``work`` is an empty scratch
    directory (extract destinations, the append copy)."""
    run = _Run(archive, originals)
    work.mkdir(parents=True, exist_ok=True)
    for name in paths:
        _RUNNERS[name](run, work)
    return run.out


def _api(run: _Run, work: Path) -> None:
    from znippy_sql.provenance.sign import is_signed, verify_signatures
    from znippy_sql.read.reader import open_archive

    archive = None
    with run.step("api.open"):
        archive = open_archive(run.archive)
    if archive is None:
        return
    with archive:
        for path in run.originals:
            got: list[bytes] = []
            with run.step("api.read"):
                got.append(archive.read(path))
            run.same("api.read", path, got[0] if got else None)
            got = []
            with run.step("api.open_file"):
                with archive.open(path) as fh:
                    fh.seek(1)
                    fh.read(3)
                    fh.seek(0)
                    got.append(fh.read())
            run.same("api.open_file", path, got[0] if got else None)
        with run.step("api.index"):
            archive.index()
        with run.step("api.select"):
            archive.select(glob="*")
        with run.step("api.meta"):
            archive.meta  # noqa: B018
        with run.step("api.verify"):
            archive.verify()
        if is_signed(archive):
            with run.step("api.signatures"):
                verify_signatures(archive, None)
        dest = work / "api-extract"
        report: list[Any] = []
        with run.step("api.extract"):
            report.append(archive.extract(dest, workers=1))
        if report:
            for path in report[0].written:
                got_bytes = (dest / path).read_bytes()
                run.same("api.extract", path, got_bytes)


class _Out(io.TextIOWrapper):
    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="replace")


def _cli(run: _Run, work: Path) -> None:
    from znippy_sql.cli import main

    a = str(run.archive)
    first = next(iter(run.originals), "x")
    for args in (["ls", a], ["ls", "-l", a, "--repo", "r1"], ["info", a], ["verify", a],
                 ["cat", a, first], ["extract", a, "-o", str(work / "cli-extract")]):
        where = f"cli.{args[0]}"
        out, err = _Out(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(args)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
        except (KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException as exc:  # noqa: BLE001  (a traceback a CLI user would see)
            run.out.append(Outcome(where, "bad", f"{type(exc).__name__}: {str(exc)[:300]}"))
            continue
        text = err.getvalue()
        if code not in (0, 1, 2) or "Traceback" in text:
            run.out.append(Outcome(where, "bad", f"exit {code}: {text[-300:]}"))
        elif code == 2 and not run.names_archive(text):
            run.out.append(Outcome(where, "bad", f"exit 2 without the archive: {text[-300:]}"))
        else:
            run.out.append(Outcome(where, "ok" if code == 0 else "refused", text[-200:]))
        if args[0] == "cat" and code == 0:
            out.flush()
            data = out.buffer.getvalue()  # type: ignore[attr-defined]
            run.same(where, first, data)


def _duckdb(run: _Run, work: Path) -> None:
    import duckdb

    from znippy_sql.duckdb import VIEW_SUFFIXES, register, unregister

    con = _CON.get("con")
    if con is None:  # one connection per process: installing the macros is the slow part
        con = _CON["con"] = duckdb.connect()
    try:
        name: list[str] = []
        with run.step("duckdb.register"):
            name.append(register(con, run.archive, "z"))
        if not name:
            return
        have = {r[0] for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        for suffix in VIEW_SUFFIXES:
            view = f"z_{suffix}"
            if view in have:
                with run.step(f"duckdb.{suffix}"):
                    con.sql(f'SELECT * FROM "{view}"').fetchall()
        with run.step("duckdb.ls"):
            con.sql("SELECT * FROM znippy_ls('z')").fetchall()
        for path in run.originals:
            got: list[bytes] = []
            with run.step("duckdb.cat"):
                rows = con.execute("SELECT content FROM znippy_cat('z', ?)", [path]).fetchall()
                got.extend(r[0] for r in rows)
            run.same("duckdb.cat", path, got[0] if got else None)
        with run.step("duckdb.extract"):
            con.execute("SELECT * FROM znippy_extract('z', ?)",
                        [str(work / "duckdb-extract")]).fetchall()
    finally:
        unregister(con, "z")


_CON: dict[str, Any] = {}


def _polars(run: _Run, work: Path) -> None:
    from znippy_sql.polars import read_files, scan

    for section in ("files", "chunks", "manifest", "lookup", "meta", "signatures"):
        with run.step(f"polars.{section}"):
            try:
                lf = scan(run.archive, section)  # type: ignore[arg-type]
            except Exception as exc:
                if "has no" in str(exc) and "section" in str(exc):
                    continue  # an absent optional section: asked, answered
                raise
            lf.collect()
    for path in run.originals:
        got: list[bytes] = []
        with run.step("polars.read_files"):
            frame = read_files(run.archive, [path])
            got.append(frame.get_column("content")[0])
        run.same("polars.read_files", path, got[0] if got else None)


def _append(run: _Run, work: Path) -> None:
    from znippy_sql import Entry, append_archive

    copy = work / run.name  # same name: errors must still name it
    shutil.copyfile(run.archive, copy)
    before = copy.read_bytes()
    ok = False
    with run.step("append"):
        append_archive(copy, [Entry("new/appended.txt", data=b"appended")])
        ok = True
    if not ok and copy.read_bytes() != before:
        run.out[-1] = Outcome("append", "wrong", "refused, but the archive changed")
    os.unlink(copy)
    journal = Path(str(copy) + ".znippy-journal")
    if journal.exists():
        journal.unlink()


_RUNNERS: dict[str, Callable[[_Run, Path], None]] = {
    "api": _api, "cli": _cli, "duckdb": _duckdb, "polars": _polars, "append": _append,
}


def bad(outcomes: list[Outcome]) -> list[Outcome]:
    """The outcomes that break the rules (``bad`` or ``wrong``)."""
    return [o for o in outcomes if o.kind in ("bad", "wrong")]
