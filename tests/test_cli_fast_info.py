"""``info`` on the CLI's fast path (issue 33, item 6; ``cli/fast.py``, ``native/src/info.rs``):
the core reads the facts of a local archive of this project's layout, ``cli/infotext.py``
derives and prints them as for the Python path, so text and ``--json`` are the same on every
archive kind the tests have; git archives, the Rust tool's layouts, URLs and options fall
through to the Python path; and ``info`` does not import pyarrow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_fast import HEAVY, entries, same

from znippy_sql import _native, write_archive
from znippy_sql.cli import fast
from znippy_sql.write.source import Entry

DATA = Path(__file__).parent / "data"
OURS = sorted(p for p in DATA.glob("golden-v*.znippy"))
GIT = sorted(DATA.glob("golden-git-*.znippy"))
RUST = sorted([DATA / "rust-0.8-cli.znippy", *DATA.glob("rust-*/*.znippy")])


def _signer(base: Path) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives.asymmetric import ec
    from test_sign import _cert, _pem

    key = ec.generate_private_key(ec.SECP256R1())
    return _pem(base / "k.pem", key), _pem(base / "c.pem", _cert(key, "info signer"))


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Fresh archives of every layout the writer makes, and a few the goldens lack."""
    from znippy_sql.write.append import append_archive

    base = tmp_path_factory.mktemp("info")
    out: dict[str, Path] = {}
    for name, kw in [("packed", {}), ("unpacked", {"pack": False, "index_compression": False}),
                     ("multichunk", {"block_size": 4096, "pack": False}),
                     ("nodedup", {"dedup": False, "block_size": 8192})]:
        out[name] = base / f"{name}.znippy"
        write_archive(out[name], entries(), workers=1, **kw)  # type: ignore[arg-type]
    out["maven"] = base / "maven.znippy"  # module columns
    write_archive(out["maven"], DATA / "maven", pkg_type="auto", workers=1)
    # one content in three groups and twice in one: shares charged across groups
    same = b"shared bytes " * 300
    out["shared"] = base / "shared.znippy"
    write_archive(out["shared"], [Entry("a/x", data=same), Entry("b/x", data=same, repo="r1"),
                                  Entry("c/x", data=same, repo="r2", pkg_type=7),
                                  Entry("c/y", data=same, repo="r2", pkg_type=7),
                                  Entry("empty", data=b""), Entry("e2", data=b"", repo="r1")],
                  workers=1, pack=False)
    out["empty"] = base / "empty.znippy"
    write_archive(out["empty"], [], workers=1)
    out["appended"] = base / "appended.znippy"  # a packed slice replaced: bytes no row uses
    write_archive(out["appended"], entries(), workers=1)
    append_archive(out["appended"], [Entry("src/a/f03.py", data=b"replaced\n")], workers=1)
    key, cert = _signer(base)
    out["signed"] = base / "signed.znippy"
    write_archive(out["signed"], entries(), workers=1, signer=(key, cert))
    return out


def test_info_equals_the_python_path_on_every_archive_kind(
        written: dict[str, Path], capsysbinary: pytest.CaptureFixture[bytes],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ours = [*OURS, *written.values()]
    for path in [*ours, *GIT, *RUST]:
        for extra in ([], ["--json"]):
            code, out, _ = same(["info", str(path), *extra], capsysbinary, monkeypatch)
            assert code == 0 and out, path
    # not a fall-through in disguise: the core read every archive of this project's layout,
    # and left the others to the Python path
    for path in ours:
        assert _native._info_left_because(str(path)) is None, path
        assert fast.run(["info", str(path)]) == 0
    for path in [*GIT, *RUST]:
        assert fast.run(["info", str(path)]) is None, path
    capsysbinary.readouterr()


def test_options_urls_and_damage_fall_through(
        written: dict[str, Path], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes],
        monkeypatch: pytest.MonkeyPatch) -> None:
    golden = str(OURS[-1])
    for argv in (["info", golden, "x"], ["info", "--json", golden], ["info", golden, "-h"],
                 ["info", f"file://{golden}"], ["info", golden, "--json", "x"]):
        assert fast.run(argv) is None, argv
    data = bytearray(Path(golden).read_bytes())
    for at in range(3, len(data), 97):  # a flipped bit anywhere: the same words and code
        bad = tmp_path / "bad.znippy"
        flipped = bytearray(data)
        flipped[at] ^= 0x40
        bad.write_bytes(bytes(flipped))
        for extra in ([], ["--json"]):
            same(["info", str(bad), *extra], capsysbinary, monkeypatch)
    same(["info", str(tmp_path / "absent.znippy")], capsysbinary, monkeypatch)


def test_info_does_not_import_pyarrow() -> None:
    golden = OURS[-1]
    heavy = tuple(h for h in HEAVY if h not in ("typing", "argparse", "re", "contextlib"))
    for extra in ([], ["--json"]):
        code = ("import sys\nfrom znippy_sql.cli import main\nrc = main(sys.argv[1:])\n"
                "sys.stdout.flush()\nheavy = sorted({m.split('.')[0] for m in sys.modules} & "
                f"set({heavy!r}))\nprint('HEAVY', heavy, file=sys.stderr)\nsys.exit(rc)")
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
        done = subprocess.run([sys.executable, "-c", code, "info", str(golden), *extra],
                              capture_output=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        assert b"__lookup__" in done.stdout
        assert done.stderr.decode().strip() == "HEAVY []"
