"""Provenance signatures: ``__sign_artifacts__`` and ``__sign_archive__`` (FORMAT §4).

Signing needs only the sorted ``__lookup__`` table: each file's digest is BLAKE3 over its path
and its chunk checksums, the archive root is BLAKE3 over every path and file digest; each is
signed as a detached CMS signature (:mod:`znippy_sql.provenance.cms`). No blob byte is read to sign.

Verifying recomputes the same digests from the index and checks every signature against them
and against the trust anchors; ``deep=True`` also decodes every chunk, which proves the
checksums the digests were made from. See docs/signing.md.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar, Union

import pyarrow as pa

from . import cms
from ..errors import FormatError, SignatureError, ZnippyError
from ..format import build
from ..format.files import file_digests as digests_of, file_starts, root_digest
from ..format.kernels import numpy_of, one_array, take
from ..format.ipc import read_table
from ..format.schema import SIGN_ARCHIVE, SIGN_ARTIFACTS
from ..format.sections import ReservedSection
from ..interop.sign import archive_root as rust_root
from ..interop.sign import file_digests as rust_digests
from ..interop.sign import rust_signed

if TYPE_CHECKING:
    from cryptography import x509

    from ..read.reader import Archive

FILE_TAG = b"znippy-file-v1\0"
ARCHIVE_TAG = b"znippy-archive-v1\0"
ARTIFACTS_SCHEMA = pa.schema([pa.field("relative_path", pa.utf8(), nullable=False),
                              pa.field("cms", pa.binary(), nullable=False)])
SIGNATURES_SCHEMA = pa.schema([
    pa.field("relative_path", pa.utf8()),  # null: the archive root signature
    pa.field("signer", pa.utf8()),
    pa.field("signing_time", pa.timestamp("s", tz="UTC")),
    pa.field("digest", pa.utf8()),  # hex of the file digest recomputed from the index
    pa.field("valid", pa.bool_()),  # null when no trust anchor was given
    pa.field("problem", pa.utf8()),
])
#: Environment variable holding the password of an encrypted signing key.
PASSWORD_ENV = "ZNIPPY_SIGN_KEY_PASSWORD"
#: Signatures made or checked in helper threads too from this many on (an ECDSA P-256
#: signature costs ~0.04 ms to make and ~0.12 ms to check on the benchmark machine).
POOL_THRESHOLD = 1000
BATCH = 250

TrustLike = Union[str, os.PathLike, bytes, "x509.Certificate",
                  Sequence[Union[str, os.PathLike, bytes, "x509.Certificate"]]]


# -- digests (FORMAT §4) ----------------------------------------------------------------------
def file_digests(lookup: pa.Table) -> tuple[list[str], list[bytes]]:
    """Each file's digest from the sorted lookup: paths in lookup (= UTF-8 byte) order."""
    n = lookup.num_rows
    if n == 0:
        return [], []
    names = one_array(lookup.column("relative_path"))
    seqs = numpy_of(one_array(lookup.column("chunk_seq")))
    starts = file_starts(seqs)
    paths = take(names, starts)
    digests = digests_of(paths, lookup.column("checksum"), starts, seqs)
    return paths.to_pylist(), digests.to_pylist()


def archive_root(paths: Sequence[str] | pa.Array, digests: Sequence[bytes] | pa.Array) -> bytes:
    """BLAKE3 over the tag, then every path, NUL and file digest, in path order."""
    if not isinstance(paths, (pa.Array, pa.ChunkedArray)):
        paths = build.column(list(paths), pa.utf8())
    if not isinstance(digests, (pa.Array, pa.ChunkedArray)):
        raw = b"".join(digests)
        if len(raw) != 32 * len(digests):
            raise FormatError("a file digest is not 32 bytes")
        digests = pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), len(digests),
                                                       [None, pa.py_buffer(raw)])
    return root_digest(ARCHIVE_TAG, paths, digests)


# -- signing ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Signer:
    """A private key (EC or RSA) and its certificate (+ chain certificates to embed)."""

    key: Any
    cert: "x509.Certificate"
    chain: tuple["x509.Certificate", ...] = ()

    def __post_init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        if not isinstance(self.key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
            raise SignatureError(f"signing key type {type(self.key).__name__} is not supported "
                                 "(use an EC or RSA key)")
        mine = self.key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
        theirs = self.cert.public_key().public_bytes(Encoding.DER,
                                                     PublicFormat.SubjectPublicKeyInfo)
        if mine != theirs:
            raise SignatureError("the signing key does not belong to the certificate "
                                 f"{self.cert.subject.rfc4514_string()}")

    @classmethod
    def from_files(cls, key: str | os.PathLike[str], cert: str | os.PathLike[str], *,
                   password: bytes | None = None) -> "Signer":
        """PEM (or DER) key and certificate files; the certificate file may hold a chain.

        An encrypted key takes ``password``, else the ``ZNIPPY_SIGN_KEY_PASSWORD`` variable.
        """
        from cryptography.hazmat.primitives import serialization

        if password is None and os.environ.get(PASSWORD_ENV):
            password = os.environ[PASSWORD_ENV].encode("utf-8")
        data = _read(key, "signing key")
        try:
            loaded = (serialization.load_pem_private_key(data, password)
                      if b"-----BEGIN" in data else
                      serialization.load_der_private_key(data, password))
        except (ValueError, TypeError) as exc:
            hint = f" (encrypted? set {PASSWORD_ENV})" if password is None else ""
            raise SignatureError(f"not a usable private key: {exc}{hint}",
                                 path=os.fspath(key)) from None
        certs = _certificates(_read(cert, "certificate"), os.fspath(cert))
        return cls(loaded, certs[0], tuple(certs[1:]))

    def sign(self, content: bytes) -> bytes:
        """A detached CMS signature over ``content`` (see :class:`cms.SignatureTemplate`)."""
        return self._template.sign(content)

    @cached_property
    def _template(self) -> cms.SignatureTemplate:
        return cms.SignatureTemplate(self.key, self.cert, self.chain)


_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def _shared(fn: Callable[[list[_Item]], list[_Result]], items: list[_Item]) -> list[_Result]:
    """``fn(batch)`` over ``items`` in batches of ``BATCH``, results in order.

    From ``POOL_THRESHOLD`` items on, helper threads (one fewer than the CPUs, at most 3) take
    batches alongside the calling thread: ``cryptography`` releases the GIL while OpenSSL
    signs or verifies, which is nearly all of the work, so threads share it without the start-up
    and pickling a process pool costs. An error in a helper is raised here.
    """
    batches = [items[i:i + BATCH] for i in range(0, len(items), BATCH)]
    helpers = min((os.cpu_count() or 1) - 1, 3, len(batches) - 1)
    if len(items) < POOL_THRESHOLD or helpers < 1:
        return [r for b in batches for r in fn(b)]
    results: list[list[_Result] | None] = [None] * len(batches)
    claimed = iter(range(len(batches)))  # next() on it is atomic under the GIL
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for i in claimed:
                if errors:
                    return
                results[i] = fn(batches[i])
        except BaseException as exc:  # noqa: BLE001 - raised in the calling thread
            errors.append(exc)

    threads = [threading.Thread(target=work, name=f"znippy-sign-{n}", daemon=True)
               for n in range(helpers)]
    for t in threads:
        t.start()
    work()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    done = [part for part in results if part is not None]
    assert len(done) == len(results)  # no error: the workers ran every batch
    return [r for part in done for r in part]


def as_signer(signer: Any) -> Signer:
    """A :class:`Signer`, a ``(key_path, cert_path)`` pair or ``{"key": ..., "cert": ...}``."""
    if isinstance(signer, Signer):
        return signer
    if isinstance(signer, Mapping):
        return Signer.from_files(signer["key"], signer["cert"], password=signer.get("password"))
    if isinstance(signer, (tuple, list)) and len(signer) == 2:
        return Signer.from_files(signer[0], signer[1])
    raise TypeError(f"signer= takes a Signer, (key, cert) paths or a mapping, not {signer!r}")


def signature_builder(signer: Any, *, rust: bool = False, compat: str = "rust-0.10"
                      ) -> Callable[[pa.Table], Iterable[ReservedSection]]:
    """The section builder ``write_archive(..., signer=...)`` hands to ``write_tail``.

    ``rust``: over the Rust tool's digests (:mod:`znippy_sql.interop.sign`; the tail writes
    the sections under the Rust names), each CMS carrying the signer's certificate alone (the
    Rust verifier takes the first certificate of the set as the signer's), with an EC key
    (the Rust verifier checks ECDSA over P-256 or P-384 and Ed25519, not RSA; ``compat``
    ``rust-0.9``: P-256 only, as ``znippy-common`` 0.9.11 checks ECDSA with SHA-256)."""
    s = as_signer(signer)
    if rust:
        from cryptography.hazmat.primitives.asymmetric import ec

        curves = ("secp256r1",) if compat == "rust-0.9" else ("secp256r1", "secp384r1")
        curve = getattr(s.key, "curve", None)
        if not isinstance(s.key, ec.EllipticCurvePrivateKey) or curve is None \
                or curve.name not in curves:
            raise SignatureError(f"compat {compat}: the Rust verifier checks ECDSA "
                                 f"{' or '.join(('P-256', 'P-384')[:len(curves)])} signatures "
                                 "only; sign with such a key")
        s = Signer(s.key, s.cert)
    digests_for, root_for = (rust_digests, rust_root) if rust else (file_digests, archive_root)

    def build(lookup: pa.Table) -> list[ReservedSection]:
        paths, digests = digests_for(lookup)
        signatures = _shared(lambda batch: [s.sign(d) for d in batch], digests)
        table = pa.table({"relative_path": paths, "cms": signatures}, schema=ARTIFACTS_SCHEMA)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, ARTIFACTS_SCHEMA) as writer:
            writer.write_table(table)
        return [ReservedSection(SIGN_ARTIFACTS, sink.getvalue().to_pybytes()),
                ReservedSection(SIGN_ARCHIVE, s.sign(root_for(paths, digests)))]

    return build


# -- trust ------------------------------------------------------------------------------------
def load_trust(trust: TrustLike) -> list["x509.Certificate"]:
    """Trust anchors from certificate files (PEM, several per file, or DER), PEM bytes or
    ``x509.Certificate`` objects."""
    from cryptography import x509

    items = [trust] if isinstance(trust, (str, os.PathLike, bytes, x509.Certificate)) \
        else list(trust)
    out: list[x509.Certificate] = []
    for item in items:
        if isinstance(item, x509.Certificate):
            out.append(item)
        elif isinstance(item, bytes):
            out.extend(_certificates(item, "<trust bytes>"))
        else:
            out.extend(_certificates(_read(item, "trust certificate"), os.fspath(item)))
    if not out:
        raise SignatureError("no trust certificate given")
    return out


def _read(path: str | os.PathLike[str], what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise SignatureError(f"cannot read {what}: {exc.strerror}", path=os.fspath(path)) \
            from None


def _certificates(data: bytes, where: str) -> list["x509.Certificate"]:
    from cryptography import x509

    try:
        certs = (x509.load_pem_x509_certificates(data) if b"-----BEGIN" in data
                 else [x509.load_der_x509_certificate(data)])
    except ValueError as exc:
        raise SignatureError(f"not an X.509 certificate: {exc}", path=where) from None
    return certs


# -- checking ---------------------------------------------------------------------------------
@dataclass(slots=True)
class Check:
    """What one signature says about one content. ``verified``: the key check was run."""

    signer: str | None = None
    signing_time: _dt.datetime | None = None
    message_digest: bytes | None = None
    unreadable: str | None = None  # not a CMS signature this project can read
    digest_ok: bool = False  # it signs this content (messageDigest = SHA-256 of it)
    bad_signature: str | None = None  # the signature does not verify under its key
    untrusted: str | None = None  # the signer does not chain to a trust anchor


class _Checker:
    """Checks signatures; caches what depends only on the certificates (one signer, many files)."""

    def __init__(self, anchors_der: Sequence[bytes] | None) -> None:
        from cryptography import x509

        self.anchors = None if anchors_der is None else \
            [x509.load_der_x509_certificate(d) for d in anchors_der]
        #: (certificates, sid) → (signer certificate, its subject, its public key, all certs)
        self._certs: dict[tuple[bytes, bytes], tuple[Any, str, Any, list[Any]]] = {}
        self._trust: dict[tuple[bytes, bytes, Any], str | None] = {}

    def check(self, der: bytes, content: bytes, *, verify: bool) -> Check:
        try:
            parsed = cms.parse(der)
            key = (parsed.certificates, parsed.sid)
            found = self._certs.get(key)
            if found is None:
                certs = cms.certificates(parsed)
                cert = cms.signer_certificate(parsed, certs)
                try:
                    found = (cert, cert.subject.rfc4514_string(), cert.public_key(), certs)
                except Exception as exc:  # a certificate whose name or key does not decode
                    raise cms.CmsError(f"signer certificate: {exc}") from None
                self._certs[key] = found
        except cms.CmsError as exc:
            return Check(unreadable=str(exc))
        cert, subject, public_key, certs = found
        when, md = parsed.signing_time, parsed.message_digest
        if not cms.signs(parsed, content):
            return Check(subject, when, md)
        if not verify:
            return Check(subject, when, md, digest_ok=True)
        bad = cms.check_signature(parsed, public_key)
        untrusted = None
        if bad is None and self.anchors is not None:
            tkey = (*key, when)
            if tkey not in self._trust:
                at = when or _dt.datetime.now(_dt.timezone.utc)
                try:
                    self._trust[tkey] = cms.chains_to(cert, self.anchors, certs, at=at)
                except ValueError as exc:  # an extension that does not decode
                    self._trust[tkey] = f"signer certificate cannot be checked: {exc}"
            untrusted = self._trust[tkey]
        return Check(subject, when, md, digest_ok=True, bad_signature=bad, untrusted=untrusted)


def _check_all(anchors_der: Sequence[bytes] | None, items: list[tuple[bytes, bytes]], *,
               verify: bool) -> list[Check]:
    """Each (signature, content) checked; threads share the key checks (see :func:`_shared`)."""
    checker = _Checker(anchors_der)
    check = checker.check
    if not verify:
        return [check(der, content, verify=False) for der, content in items]
    return _shared(lambda batch: [check(der, content, verify=True) for der, content in batch],
                   items)


def _read_signatures(archive: "Archive") -> tuple[pa.Table, bytes] | None:
    has_files, has_root = archive.has_section(SIGN_ARTIFACTS), archive.has_section(SIGN_ARCHIVE)
    if not has_files and not has_root:
        return None
    if has_files != has_root:
        missing = SIGN_ARCHIVE if has_files else SIGN_ARTIFACTS
        raise FormatError(f"signed archive without its {missing} section", path=archive.path)
    buf = archive.section(SIGN_ARTIFACTS)  # raw bytes that hold an Arrow stream
    table = read_table(pa.py_buffer(buf), SIGN_ARTIFACTS, archive.path,
                       check_schema=_artifacts_problem)
    if table.column("relative_path").null_count or table.column("cms").null_count:
        raise FormatError(f"{SIGN_ARTIFACTS} has null rows", path=archive.path)
    return table, bytes(archive.section(SIGN_ARCHIVE))


def _artifacts_problem(schema: pa.Schema) -> str | None:
    if [(f.name, f.type) for f in schema] != [(f.name, f.type) for f in ARTIFACTS_SCHEMA]:
        return f"has columns {schema.names}, expected relative_path: string, cms: binary"
    return None


def _rows(archive: "Archive", anchors: list["x509.Certificate"] | None,
          *, deep: bool = False) -> list[dict[str, Any]] | None:
    """One row per signed or unsigned file (path order), then the archive root row."""
    from cryptography.hazmat.primitives.serialization import Encoding

    found = _read_signatures(archive)
    if found is None:
        return None
    table, root_der = found
    anchors_der = None if anchors is None else [a.public_bytes(Encoding.DER) for a in anchors]
    verify = anchors is not None
    rust = rust_signed(archive)  # the Rust tool's digests (interop/sign.py)
    paths, digests = (rust_digests if rust else file_digests)(archive.lookup)
    digest_of = dict(zip(paths, digests))
    signed: dict[str, bytes] = {}
    rows: list[dict[str, Any]] = []
    dup: set[str] = set()
    for path, der in zip(table.column("relative_path").to_pylist(),
                         table.column("cms").to_pylist()):
        if path in signed:
            dup.add(path)
        signed[path] = der
    order = sorted(set(paths) | set(signed), key=lambda p: p.encode("utf-8"))
    todo = [p for p in order if p in signed and p in digest_of]
    items = [(signed[p], digest_of[p]) for p in todo]
    checks = dict(zip(todo, _check_all(anchors_der, items, verify=verify)))
    owner: dict[bytes, str] | None = None
    for path in order:
        digest = digest_of.get(path)
        row: dict[str, object] = {
            "relative_path": path, "signer": None, "signing_time": None,
            "digest": digest.hex() if digest else None, "valid": False if verify else None,
            "problem": None}
        if path not in signed:
            row["problem"] = "no signature"
        elif digest is None:
            row["problem"] = "signed, but no such file in the archive"
        elif path in dup:
            row["problem"] = f"signed twice in {SIGN_ARTIFACTS}"
        else:
            c = checks[path]
            row.update(signer=c.signer, signing_time=c.signing_time)
            mismatch = "signature does not match the file's digest (its path, chunks or " \
                "checksums changed since signing)"
            if not c.digest_ok and c.message_digest is not None:
                if owner is None:
                    owner = {hashlib.sha256(d).digest(): p for p, d in zip(paths, digests)}
                other = owner.get(c.message_digest)
                if other is not None:
                    mismatch = f"the signature is that of {other!r} (signatures swapped)"
            row["problem"] = _problem(c, mismatch)
            if verify and row["problem"] is None:
                row["valid"] = True
        rows.append(row)
    if deep:
        _deep(archive, rows)
    root = (rust_root if rust else archive_root)(paths, digests)
    rows.append(_root_row(anchors_der, root_der, root, verify))
    return rows


def _problem(c: Check, mismatch: str) -> str | None:
    if c.unreadable is not None:
        return f"not a readable signature: {c.unreadable}"
    if not c.digest_ok:
        return mismatch
    if c.bad_signature is not None:
        return f"signature invalid: {c.bad_signature}"
    return c.untrusted


def _root_row(anchors_der: Sequence[bytes] | None, der: bytes, root: bytes,
              verify: bool) -> dict[str, Any]:
    c = _Checker(anchors_der).check(der, root, verify=verify)
    problem = _problem(c, "signature does not match the archive root (files were added, "
                       "removed, renamed or changed since signing)")
    return {"relative_path": None, "signer": c.signer, "signing_time": c.signing_time,
            "digest": root.hex(), "valid": (problem is None) if verify else None,
            "problem": problem}


def _deep(archive: "Archive", rows: list[dict[str, Any]]) -> None:
    """Decode every chunk of every file: a signed digest is only as good as its checksums."""
    for row in rows:
        path = row["relative_path"]
        if row["digest"] is None:
            continue
        info = archive.find(path)
        if info is None:
            continue
        for chunk in info.chunks:
            try:
                archive.read_chunk(path, chunk, verify=True)
            except ZnippyError as exc:
                why = f"content does not match its signed digest ({exc.problem})"
                row["problem"] = why if row["problem"] is None else f"{row['problem']}; {why}"
                if row["valid"]:
                    row["valid"] = False
                break


def signatures_table(archive: "Archive", trust: TrustLike | None = None) -> pa.Table:
    """Per file: path, signer subject, signing time, digest (hex), ``valid`` (null without
    ``trust``) and the problem, if any; a last row with a null path for the archive root.
    Empty when the archive is not signed."""
    anchors = None if trust is None else load_trust(trust)
    rows = _rows(archive, anchors)
    return pa.Table.from_pylist(rows or [], schema=SIGNATURES_SCHEMA)


def is_signed(archive: "Archive") -> bool:
    return archive.has_section(SIGN_ARTIFACTS) or archive.has_section(SIGN_ARCHIVE)


def verify_signatures(archive: "Archive", trust: TrustLike | None, *,
                      deep: bool = False) -> list[str]:
    """Problems, each naming its file (or the archive root); empty when all is well.

    ``trust=None`` checks only that each signature is over its file's current digest (no key
    or trust check): what can be said without a trust anchor.
    """
    rows = _rows(archive, None if trust is None else load_trust(trust), deep=deep)
    if rows is None:
        return [f"archive is not signed (no {SIGN_ARTIFACTS} / {SIGN_ARCHIVE} sections)"]
    out = []
    for row in rows:
        if row["problem"] is not None:
            who = "archive root" if row["relative_path"] is None else repr(row["relative_path"])
            out.append(f"{who}: {row['problem']}")
    return out
