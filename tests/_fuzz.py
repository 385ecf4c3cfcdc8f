"""Mutations of real archives for the fuzz campaign (``tests/test_fuzz.py``, ``bench/fuzz.py``).

A case is (base archive, mutation class, seed): deterministic bytes, run through every read path
(``_readpaths.every_read_path``). Base archives are written by this project's writer and by
``rust_layout`` (the Rust tool's layout, written in Python by the Rust-reader tests); the
mutations work on their bytes with pyarrow/blake3/ducer only (``_splice``):

- ``flip``: 1-4 byte flips in the tail, the manifest's section digests left as they were
  (what damage on disk looks like: caught by the digests first);
- ``flip-nodigest``: the same on the archive re-laid without digests (what an archive of a
  writer that records none looks like: only the reader's own checks stand);
- ``flip-forged``: flips inside one section, the digests recomputed (a forger's archive);
- ``truncate``: cut at a random offset, the footer kept or not;
- ``rows``: one to three rows of a sub-index and/or the lookup rewritten with lying values
  (offsets, sizes, chunk numbers, hostile paths), the trie rebuilt to match or not;
- ``schema``: a column of a random name and Arrow type added to a sub-index;
- ``splice``: one section's bytes replaced by another section's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from _splice import key_name, manifest, rebuild, sections, stream

MUTATIONS = ("flip", "flip-nodigest", "flip-forged", "truncate", "rows", "schema", "splice")
_VALUES = (0, 1, 2, 3, 63, 64, 4096, 8191, 8192, 2**31, 2**32 - 1, 2**62, 2**63, 2**64 - 1)
_PATHS = ("a", "src/f0.txt", "big.txt", "../x", "", "a\x00b", "é/ü", "a\\b", "/abs", "zz",
          "src/f0.txt/", "x" * 300)
_NAMES = ("x_col", "repo", "size", "digest", "module", "archive", "relative_path", "pkg_type",
          "Chunk_Seq", "maven_group_id", "pypi_name", "x_é", "content")
_TYPES = (pa.utf8(), pa.int64(), pa.uint64(), pa.bool_(), pa.binary(), pa.float64(),
          pa.date32(), pa.timestamp("us", tz="UTC"), pa.timestamp("ns"), pa.string_view(),
          pa.large_list(pa.int32()), pa.decimal128(10, 2), pa.null(),
          pa.dictionary(pa.int8(), pa.utf8()), pa.struct([("a", pa.int8())]),
          pa.map_(pa.utf8(), pa.utf8()), pa.int8())


@dataclass(frozen=True)
class Base:
    name: str
    data: bytes
    originals: dict[str, bytes]


def _text(n: int, seed: int) -> bytes:
    rng = random.Random(seed)
    words = b"alpha beta gamma delta import class def return index chunk archive".split()
    out = bytearray()
    while len(out) < n:
        out += b" ".join(rng.choice(words) for _ in range(10)) + b"\n"
    return bytes(out[:n])


def base_archives(work: Path) -> list[Base]:
    """The archives every mutation starts from: the Rust tool's CLI layout (with two plugin
    columns), plain (two groups, a three-chunk file, ``__meta__``), signed, and typed
    (module columns)."""
    from znippy_sql import Entry, write_archive

    work.mkdir(parents=True, exist_ok=True)
    files = {f"src/f{i}.txt": _text(300 + 97 * i, i) for i in range(4)}
    files["big.txt"] = _text(20000, 7)
    files["other/b.bin"] = bytes(range(256)) * 3
    files["empty"] = b""
    typed = {"pkgs/foo-1.0-py3-none-any.whl": _text(900, 11),
             "pkgs/bar-2.1.tar.gz": bytes(range(200)), "README.md": _text(400, 12)}
    out = []
    import rust_layout

    rust = work / "rust.znippy"  # the Rust tool's CLI layout: no lookup, no trie, unaligned
    rust_layout.write_cli(rust, files, cores=2, ext_fields=("group_id", "version"),
                          ext={"src/f0.txt": {"group_id": "g", "version": "1"}})
    out.append(Base("rust", rust.read_bytes(), dict(files)))
    for name, source, extra in (("plain", files, {"meta": {"k": "v"}}),
                                ("signed", files, {"signer": _signer()}),
                                ("typed", typed, {"pkg_type": "auto"})):
        path = work / f"{name}.znippy"
        entries = [Entry(p, data=d, repo="r2" if p.startswith("other") else "r1")
                   for p, d in source.items()]
        write_archive(path, entries, block_size=8192, workers=1, fsync=False, **extra)
        out.append(Base(name, path.read_bytes(), dict(source)))
    return out


def _signer() -> object:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from znippy_sql.provenance.sign import Signer

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fuzz")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    return Signer(key, cert)


def _tail_start(data: bytes) -> int:
    return min(r["index_offset"] for r in manifest(data).to_pylist())


def mutate(data: bytes, kind: str, rng: random.Random) -> tuple[bytes, str]:
    """The mutated bytes and a one-line description of the mutation."""
    if kind in ("flip", "flip-nodigest"):
        if kind == "flip-nodigest":
            data = rebuild(data, digests="drop")
        start = _tail_start(data)
        bad = bytearray(data)
        where = []
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(start, len(data))
            mask = rng.choice((0x01, 0x80, 0xFF, rng.randint(1, 255)))
            bad[i] ^= mask
            where.append(f"{i}^{mask:#x}")
        return bytes(bad), f"{kind} {' '.join(where)}"
    secs = sections(data)
    names = list(secs)
    if kind == "flip-forged":
        name = rng.choice(names)
        part = bytearray(secs[name])
        i = rng.randrange(len(part)) if part else 0
        if part:
            part[i] ^= rng.randint(1, 255)
        return rebuild(data, {name: bytes(part)}), f"flip-forged {name}@{i}"
    if kind == "truncate":
        cut = rng.randrange(_tail_start(data) - 64, len(data))
        keep = rng.random() < 0.5
        out = data[:cut] + (data[-16:] if keep else b"")
        return out, f"truncate {cut}{' +footer' if keep else ''}"
    if kind == "rows":
        return _rows(data, secs, rng)
    if kind == "schema":
        groups = [n for n in names if not n.startswith("__")]
        name = rng.choice(groups)
        table = pa.ipc.open_stream(pa.py_buffer(secs[name])).read_all()
        col, typ = rng.choice(_NAMES), rng.choice(_TYPES)
        try:
            arr = pa.array([None] * table.num_rows, typ)
        except (pa.ArrowException, ValueError):
            arr = pa.nulls(table.num_rows, typ)
        table = table.append_column(pa.field(col, typ), arr)
        return rebuild(data, {name: stream(table)}), f"schema {name} +{col}:{typ}"
    if kind == "splice":
        if len(names) < 2:  # one sub-index and nothing else (the Rust layout): swap in bytes
            return rebuild(data, {names[0]: rng.randbytes(64)}), f"splice {names[0]}<-noise"
        a, b = rng.sample(names, 2)
        return rebuild(data, {a: secs[b]}), f"splice {a}<-{b}"
    raise ValueError(kind)


def _rows(data: bytes, secs: dict[str, bytes], rng: random.Random) -> tuple[bytes, str]:
    import ducer

    groups = [n for n in secs if not n.startswith("__")]
    target = rng.choice(groups)
    sub = pa.ipc.open_stream(pa.py_buffer(secs[target])).read_all()
    lk = pa.ipc.open_stream(pa.py_buffer(secs.get("__lookup__", secs[target]))).read_all()
    has_lookup = "__lookup__" in secs  # not in the Rust tool's layout
    sub_rows, lk_rows = sub.to_pylist(), lk.to_pylist()
    what = []
    for _ in range(rng.randint(1, 3)):
        field = rng.choice(("relative_path", "chunk_seq", "fdata_offset", "compressed",
                            "uncompressed_size", "blob_offset", "blob_size", "order"))
        where = rng.choice(("sub", "lookup", "both"))
        i = rng.randrange(len(sub_rows))
        path = sub_rows[i]["relative_path"]
        j = next((k for k, r in enumerate(lk_rows) if r["relative_path"] == path
                  and r["chunk_seq"] == sub_rows[i]["chunk_seq"]), 0)
        if field == "order":  # swap two rows of one place
            rows = sub_rows if where == "sub" else lk_rows
            a, b = rng.randrange(len(rows)), rng.randrange(len(rows))
            rows[a], rows[b] = rows[b], rows[a]
            what.append(f"swap {where} {a},{b}")
            continue
        value: object
        if field == "relative_path":
            value = rng.choice(_PATHS)
        elif field == "compressed":
            value = rng.random() < 0.5
        elif field == "chunk_seq":
            value = rng.choice(_VALUES) % 2**32
        else:
            value = rng.choice(_VALUES)
        if where in ("sub", "both"):
            sub_rows[i][field] = value
        if where in ("lookup", "both"):
            lk_rows[j][field] = value
        what.append(f"{where} {path!r}.{field}={value!r}"[:80])
    replace = {}
    try:
        replace[target] = stream(pa.Table.from_pylist(sub_rows, schema=sub.schema))
        if not has_lookup:
            return rebuild(data, replace), "rows " + "; ".join(what)
        table = pa.Table.from_pylist(lk_rows, schema=lk.schema)
        replace["__lookup__"] = stream(table)
        if rng.random() < 0.5:  # the trie rebuilt to match the lookup, as a forger would
            keys = sorted({(r["relative_path"].encode("utf-8", "surrogatepass"), k)
                           for k, r in enumerate(lk_rows) if r["chunk_seq"] == 0})
            seen: set[bytes] = set()
            uniq = [(key, k) for key, k in keys if not (key in seen or seen.add(key))]
            replace["__trie__"] = bytes(ducer.Map.build(":memory:", uniq))
            what.append("trie rebuilt")
    except (pa.ArrowException, ValueError, OverflowError, UnicodeEncodeError) as exc:
        return data, f"rows: not expressible ({type(exc).__name__})"
    return rebuild(data, replace), "rows " + "; ".join(what)


def case_bytes(bases: list[Base], seed: int, kind: str | None = None
               ) -> tuple[Base, str, bytes, str]:
    """Case ``seed``: its base, mutation class, bytes and description."""
    rng = random.Random(seed)
    base = rng.choice(bases)
    kind = kind or rng.choice(MUTATIONS)
    data, text = mutate(base.data, kind, rng)
    return base, kind, data, text


__all__ = ["MUTATIONS", "Base", "base_archives", "case_bytes", "key_name", "mutate"]


# -- packed blobs and compressed index streams (issue 26) ------------------------------------
#: mutations of an archive written with ``pack=True, index_compression=True``: a compressed
#: buffer's 8-byte uncompressed length made to lie; ``inner_offset``/sizes of packed rows lie
PACKED_MUTATIONS = ("length-lie", "inner-lie")
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def packed_base_archives(work: Path) -> list[Base]:
    """An archive with packed blobs and every index stream compressed (two groups, a big
    file, ``__meta__``), the bases of :data:`PACKED_MUTATIONS`."""
    from znippy_sql import Entry, write_archive

    work.mkdir(parents=True, exist_ok=True)
    files = {f"src/f{i:03d}.txt": _text(200 + 37 * i, i) for i in range(300)}
    files["big.txt"] = _text(300_000, 7)
    files["other/b.bin"] = bytes(range(256)) * 3
    files["empty"] = b""
    path = work / "packed.znippy"
    entries = [Entry(p, data=d, repo="r2" if p.startswith("other") else "r1")
               for p, d in files.items()]
    write_archive(path, entries, workers=1, fsync=False, pack=True, index_compression=True,
                  meta={"k": "v"})
    return [Base("packed", path.read_bytes(), files)]


def _prefixes(stream_bytes: bytes) -> list[int]:
    """Where a compressed buffer's 8-byte length seems to start: 8 bytes before a zstd
    frame's magic, holding a plausible length (found without parsing the stream)."""
    out = []
    at = stream_bytes.find(_ZSTD_MAGIC)
    while at >= 0:
        if at >= 8 and 0 <= int.from_bytes(stream_bytes[at - 8 : at], "little") < 1 << 32:
            out.append(at - 8)
        at = stream_bytes.find(_ZSTD_MAGIC, at + 1)
    return out


def mutate_packed(data: bytes, kind: str, rng: random.Random) -> tuple[bytes, str]:
    secs = sections(data)
    if kind == "length-lie":
        names = [n for n, b in secs.items() if _prefixes(b)]
        if not names:
            return data, "length-lie: no compressed stream"
        name = rng.choice(names)
        part = bytearray(secs[name])
        at = rng.choice(_prefixes(bytes(part)))
        true = int.from_bytes(part[at : at + 8], "little")
        lie = rng.choice((true + 1, true * 2 + 64, 1 << 40, (1 << 63) - 1, 0, true - 1,
                          (1 << 64) - 5, 1 << 31))
        part[at : at + 8] = (lie % (1 << 64)).to_bytes(8, "little")
        return rebuild(data, {name: bytes(part)}), f"length-lie {name}@{at} {true}->{lie}"
    if kind == "inner-lie":
        victims = [n for n in secs if n == "__lookup__" or not n.startswith("__")]
        where = rng.choice(victims + ["both"])
        field = rng.choice(("inner_offset", "uncompressed_size", "blob_size"))
        value = rng.choice(_VALUES)
        replace = {}
        for name in (victims if where == "both" else [where]):
            table = pa.ipc.open_stream(pa.py_buffer(secs[name])).read_all()
            rows = table.to_pylist()
            packed = [i for i, r in enumerate(rows) if r.get("inner_offset")]
            if not packed:
                continue
            i = rng.choice(packed) if where != "both" else packed[len(packed) // 2]
            rows[i][field] = value
            replace[name] = stream(pa.Table.from_pylist(rows, schema=table.schema),
                                   compression="zstd")
        return rebuild(data, replace), f"inner-lie {where} {field}={value}"
    raise ValueError(kind)


def packed_case_bytes(bases: list[Base], seed: int) -> tuple[Base, str, bytes, str]:
    """Case ``seed`` of the packed mutations: its base, class, bytes and description."""
    rng = random.Random(seed)
    base = rng.choice(bases)
    kind = rng.choice(PACKED_MUTATIONS)
    data, text = mutate_packed(base.data, kind, rng)
    return base, kind, data, text
