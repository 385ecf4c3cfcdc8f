"""Detached CMS (PKCS #7) signatures over a digest: make them, read them, check them.

Signing uses the public API of ``cryptography`` (``PKCS7SignatureBuilder``: DER, detached,
binary), which puts the signer's certificate and the signed attributes ``contentType``,
``signingTime``, ``messageDigest`` in every signature. For many signatures by one signer,
:class:`SignatureTemplate` re-fills the builder's reference signature: a few microseconds of
Python around the key's own ``sign``.

``cryptography`` has no public API that verifies CMS, so reading is done here: a small DER
reader walks the structure (RFC 5652 §5; :func:`_children` decodes element headers only),
``asn1crypto``'s typed classes decode the values (object identifiers, times, serial numbers),
``cryptography`` loads the certificates, and the signature itself is checked with
``cryptography``'s public-key ``verify`` over the DER of the signed attributes (RFC 5652 §5.4:
re-tagged as a SET). The tests cross-check every field read here against ``asn1crypto.cms``'s
full parse of the same signatures. Only what this project writes is accepted: one SignerInfo, signed
attributes present, no embedded content, SHA-2 digests, ECDSA or RSA PKCS #1 v1.5 keys.
A structure this parser does not expect raises :class:`CmsError` saying where. Signatures
that differ from an already walked one only in the time, digest and signature values are read
by byte comparison (:class:`_Shape`), with the full walk's answer.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from asn1crypto import core
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.utils import CryptographyDeprecationWarning
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.serialization import pkcs7

_HASHES = {"2.16.840.1.101.3.4.2.1": "sha256", "2.16.840.1.101.3.4.2.2": "sha384",
           "2.16.840.1.101.3.4.2.3": "sha512"}
_DIGEST_OIDS = {name: dotted for dotted, name in _HASHES.items()}
_HASH_CLASSES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "sha256": hashes.SHA256, "sha384": hashes.SHA384, "sha512": hashes.SHA512}
#: signatureAlgorithm → (key kind, hash name or None = the SignerInfo's digest algorithm)
_SIG_ALGS = {
    "1.2.840.10045.4.3.2": ("ec", "sha256"), "1.2.840.10045.4.3.3": ("ec", "sha384"),
    "1.2.840.10045.4.3.4": ("ec", "sha512"), "1.2.840.10045.2.1": ("ec", None),
    "1.2.840.113549.1.1.1": ("rsa", None), "1.2.840.113549.1.1.11": ("rsa", "sha256"),
    "1.2.840.113549.1.1.12": ("rsa", "sha384"), "1.2.840.113549.1.1.13": ("rsa", "sha512"),
}
_SIGNED_DATA = "1.2.840.113549.1.7.2"
_DATA = "1.2.840.113549.1.7.1"
_ATTR_CONTENT_TYPE = "1.2.840.113549.1.9.3"
_ATTR_MESSAGE_DIGEST = "1.2.840.113549.1.9.4"
_ATTR_SIGNING_TIME = "1.2.840.113549.1.9.5"


class CmsError(ValueError):
    """A CMS structure that is not a detached signature this project can check."""


@dataclass(frozen=True)
class Parsed:
    """What a detached signature says, before any check."""

    certificates: bytes  # contents of the [0] certificates field (cache key)
    sid: bytes  # the SignerIdentifier's DER
    digest_algorithm: str  # sha256 | sha384 | sha512
    key_kind: str  # ec | rsa
    signature_hash: str
    message_digest: bytes
    signing_time: _dt.datetime | None
    signed_attrs: bytes  # DER of the signed attributes re-tagged as a SET (what was signed)
    signature: bytes


# -- signing ------------------------------------------------------------------------------------
def sign(content: bytes, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey,
         cert: x509.Certificate, chain: Sequence[x509.Certificate] = ()) -> bytes:
    """DER of a detached CMS signature over ``content`` (SHA-256, signed attributes)."""
    builder = pkcs7.PKCS7SignatureBuilder().set_data(content).add_signer(cert, key,
                                                                         hashes.SHA256())
    for extra in chain:
        builder = builder.add_certificate(extra)
    return builder.sign(serialization.Encoding.DER,
                        [pkcs7.PKCS7Options.DetachedSignature, pkcs7.PKCS7Options.Binary])


# -- reading ------------------------------------------------------------------------------------
#: DER identifier octets of the elements a SignedData holds.
_SEQ, _SET, _OID, _OCTETS, _UTCTIME, _GENTIME = 0x30, 0x31, 0x06, 0x04, 0x17, 0x18
_INTEGER, _NULL = 0x02, 0x05
_CTX0, _CTX1, _CTX0_PRIM = 0xA0, 0xA1, 0x80
#: An element: (identifier octet, header bytes, contents bytes).
_Node = tuple[int, bytes, bytes]
_OID_CACHE: dict[bytes, str] = {}


def _oid(contents: bytes) -> str:
    """Dotted form of an OBJECT IDENTIFIER's contents (decoded by asn1crypto, cached)."""
    dotted = _OID_CACHE.get(contents)
    if dotted is None:
        try:
            dotted = core.ObjectIdentifier.load(b"\x06" + _der_len(len(contents))
                                                + contents).dotted
        except (ValueError, TypeError) as exc:
            raise CmsError(f"bad object identifier: {exc}") from None
        _OID_CACHE[contents] = dotted
    return dotted


def _der_len(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


def _children(data: bytes, what: str) -> list[_Node]:
    """The DER elements back to back in ``data`` (identifier, definite length, contents).

    A few lines of header decoding rather than a generic parser: this runs ~15 times per
    signature, tens of thousands of times per archive. Every length is checked against its
    container; indefinite lengths and high tag numbers (never used by CMS in DER) are refused.
    """
    out = []
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < 2:
            raise CmsError(f"{what}: truncated element")
        ident, n = data[pos], data[pos + 1]
        if ident & 0x1F == 0x1F:
            raise CmsError(f"{what}: high tag number")
        start = pos + 2
        if n & 0x80:
            k = n & 0x7F
            if k == 0:
                raise CmsError(f"{what}: indefinite length (BER) is not DER")
            if k > 4 or start + k > end:
                raise CmsError(f"{what}: bad length")
            n = int.from_bytes(data[start:start + k], "big")
            start += k
        if start + n > end:
            raise CmsError(f"{what}: element runs past its container")
        out.append((ident, data[pos:start], data[start:start + n]))
        pos = start + n
    return out


def _inside(node: _Node, ident: int, what: str) -> bytes:
    """The contents of ``node``, which must have the identifier octet ``ident``."""
    if node[0] != ident:
        raise CmsError(f"{what}: unexpected ASN.1 element (identifier 0x{node[0]:02x}, "
                       f"expected 0x{ident:02x})")
    return node[2]


_SIGNED_DATA_OID = core.ObjectIdentifier(_SIGNED_DATA).contents
_DATA_OID = core.ObjectIdentifier(_DATA).contents
_CONTENT_TYPE_OID = core.ObjectIdentifier(_ATTR_CONTENT_TYPE).contents
_MESSAGE_DIGEST_OID = core.ObjectIdentifier(_ATTR_MESSAGE_DIGEST).contents
_SIGNING_TIME_OID = core.ObjectIdentifier(_ATTR_SIGNING_TIME).contents


def parse(der: bytes) -> Parsed:
    """Walk a DER ContentInfo holding a detached SignedData with one SignerInfo.

    Signatures by one signer differ only in the values of ``signingTime``, ``messageDigest``
    and the signature (:class:`SignatureTemplate`), so after one full walk the others are read
    by comparing every other byte with it (:class:`_Shape`): the same answer as a full walk,
    at a fraction of its cost.
    """
    shape = _SHAPES.get(len(der))
    if shape is not None:
        parsed = shape.match(der)
        if parsed is not None:
            return parsed
    parsed = _parse_full(der)
    shape = _Shape.learn(der, parsed)
    if shape is not None:
        if len(_SHAPES) >= 64:
            _SHAPES.clear()
        _SHAPES[len(der)] = shape
    return parsed


def _parse_full(der: bytes) -> Parsed:
    top = _children(der, "ContentInfo")
    if len(top) != 1:
        raise CmsError("ContentInfo: trailing bytes after the signature")
    info = _children(_inside(top[0], _SEQ, "ContentInfo"), "ContentInfo")
    if len(info) != 2 or _inside(info[0], _OID, "contentType") != _SIGNED_DATA_OID:
        raise CmsError("ContentInfo: not a SignedData")
    inner = _children(_inside(info[1], _CTX0, "content"), "content")
    if len(inner) != 1:
        raise CmsError("content: expected one SignedData")
    sd = _children(_inside(inner[0], _SEQ, "SignedData"), "SignedData")
    if len(sd) < 4:
        raise CmsError("SignedData: too few fields")
    if _inside(sd[0], _INTEGER, "SignedData version") not in (b"\x01", b"\x03"):
        raise CmsError("SignedData: version is not 1 or 3")
    digest_algs = {_algorithm(n, "digestAlgorithms")
                   for n in _children(_inside(sd[1], _SET, "digestAlgorithms"), "digestAlgorithms")}
    encap = _children(_inside(sd[2], _SEQ, "encapContentInfo"), "encapContentInfo")
    if not encap or _inside(encap[0], _OID, "eContentType") != _DATA_OID:
        raise CmsError("encapContentInfo: content type is not id-data")
    if len(encap) != 1:
        raise CmsError("encapContentInfo: the content is embedded; expected a detached signature")
    certificates = b""
    for node in sd[3:-1]:
        if node[0] == _CTX0:
            certificates = node[2]
        elif node[0] != _CTX1:  # [1] crls are ignored
            raise CmsError("SignedData: unexpected field before signerInfos")
    signer_infos = _children(_inside(sd[-1], _SET, "signerInfos"), "signerInfos")
    if len(signer_infos) != 1:
        raise CmsError(f"signerInfos: {len(signer_infos)} signers, expected exactly one")
    parsed = _signer_info(certificates, signer_infos[0])
    if _DIGEST_OIDS[parsed.digest_algorithm] not in digest_algs:
        raise CmsError("digestAlgorithms: does not list the signer's digest algorithm")
    return parsed


def _signer_info(certificates: bytes, node: _Node) -> Parsed:
    si = _children(_inside(node, _SEQ, "SignerInfo"), "SignerInfo")
    if len(si) < 6 or si[3][0] != _CTX0:
        raise CmsError("SignerInfo: no signed attributes")
    version = _inside(si[0], _INTEGER, "SignerInfo version")
    if (version, si[1][0]) not in ((b"\x01", _SEQ), (b"\x03", _CTX0_PRIM)):
        raise CmsError("SignerInfo: version does not fit its signer identifier")
    digest_alg = _algorithm(si[2], "digestAlgorithm")
    if digest_alg not in _HASHES:
        raise CmsError(f"digestAlgorithm {digest_alg} is not SHA-2")
    sig_alg = _algorithm(si[4], "signatureAlgorithm")
    if sig_alg not in _SIG_ALGS:
        raise CmsError(f"signatureAlgorithm {sig_alg} is not supported")
    kind, sig_hash = _SIG_ALGS[sig_alg]
    content_type = message_digest = None
    signing_time = None
    _, attrs_header, attrs = si[3]
    for attr in _children(attrs, "signedAttrs"):
        parts = _children(_inside(attr, _SEQ, "Attribute"), "Attribute")
        if len(parts) != 2:
            raise CmsError("Attribute: expected type and values")
        oid = _inside(parts[0], _OID, "Attribute type")
        if oid not in (_CONTENT_TYPE_OID, _MESSAGE_DIGEST_OID, _SIGNING_TIME_OID):
            continue  # e.g. S/MIME capabilities: signed, not interpreted
        values = _children(_inside(parts[1], _SET, "Attribute values"), "Attribute values")
        if len(values) != 1:
            raise CmsError("signed attribute with other than one value")
        if oid == _CONTENT_TYPE_OID:
            content_type = _inside(values[0], _OID, "contentType")
        elif oid == _MESSAGE_DIGEST_OID:
            message_digest = _inside(values[0], _OCTETS, "messageDigest")
        else:
            signing_time = _time(values[0])
    if content_type != _DATA_OID:
        raise CmsError("signed attributes: contentType missing or not id-data")
    if message_digest is None:
        raise CmsError("signed attributes: no messageDigest")
    return Parsed(
        certificates=certificates, sid=si[1][1] + si[1][2], digest_algorithm=_HASHES[digest_alg],
        key_kind=kind, signature_hash=sig_hash or _HASHES[digest_alg],
        message_digest=message_digest, signing_time=signing_time,
        signed_attrs=b"\x31" + attrs_header[1:] + attrs,
        signature=_inside(si[5], _OCTETS, "signature"),
    )


def _algorithm(node: _Node, what: str) -> str:
    contents = _inside(node, _SEQ, what)
    dotted = _ALG_CACHE.get(contents)
    if dotted is None:
        parts = _children(contents, what)
        if not parts or len(parts) > 2 or (len(parts) == 2 and parts[1][0] != _NULL) \
                or (len(parts) == 2 and parts[1][2]):
            raise CmsError(f"{what}: expected an algorithm and no parameters (or NULL)")
        dotted = _ALG_CACHE[contents] = _oid(_inside(parts[0], _OID, what))
    return dotted


_ALG_CACHE: dict[bytes, str] = {}
_TIME_CACHE: dict[bytes, _dt.datetime] = {}


def _time(node: _Node) -> _dt.datetime:
    der = node[1] + node[2]
    if der in _TIME_CACHE:  # signatures made within one second share their signingTime
        return _TIME_CACHE[der]
    if len(_TIME_CACHE) > 4096:
        _TIME_CACHE.clear()
    _TIME_CACHE[der] = value = _decode_time(node[0], der)
    return value


def _decode_time(ident: int, der: bytes) -> _dt.datetime:
    kind = {_UTCTIME: core.UTCTime, _GENTIME: core.GeneralizedTime}.get(ident)
    if kind is None:
        raise CmsError("signingTime: not a UTCTime or GeneralizedTime")
    try:
        value = kind.load(der).native
    except (ValueError, TypeError) as exc:
        raise CmsError(f"signingTime: {exc}") from None
    if not isinstance(value, _dt.datetime):
        raise CmsError("signingTime: not a point in time")
    return value


def certificates(parsed: Parsed) -> list[x509.Certificate]:
    """The plain X.509 certificates the signature carries (other choices are skipped)."""
    out = []
    for ident, header, contents in _children(parsed.certificates, "certificates"):
        if ident == _SEQ:
            try:
                with warnings.catch_warnings():  # e.g. a negative serial number: refuse it
                    warnings.simplefilter("error", CryptographyDeprecationWarning)
                    cert = x509.load_der_x509_certificate(header + contents)
                    cert.serial_number, cert.issuer, cert.subject  # noqa: B018 (decode now)
                out.append(cert)
            except Exception as exc:  # ValueError, InvalidVersion, ...: a damaged certificate
                raise CmsError(f"certificates: {exc}") from None
    return out


def signer_certificate(parsed: Parsed, certs: Sequence[x509.Certificate]) -> x509.Certificate:
    """The certificate the SignerIdentifier names (issuer and serial, or key identifier)."""
    try:
        return _signer_certificate(parsed, certs)
    except CmsError:
        raise
    except (ValueError, TypeError) as exc:  # a certificate or sid that does not decode
        raise CmsError(f"signer certificate: {exc}") from None


def _signer_certificate(parsed: Parsed, certs: Sequence[x509.Certificate]) -> x509.Certificate:
    nodes = _children(parsed.sid, "sid")
    if len(nodes) != 1:
        raise CmsError("sid: expected one SignerIdentifier")
    ident, _, contents = nodes[0]
    if ident == _SEQ:
        parts = _children(contents, "IssuerAndSerialNumber")
        if len(parts) != 2:
            raise CmsError("IssuerAndSerialNumber: expected issuer and serial")
        issuer = parts[0][1] + parts[0][2]
        number = core.Integer.load(parts[1][1] + parts[1][2]).native
        for cert in certs:
            if cert.serial_number == number and cert.issuer.public_bytes() == issuer:
                return cert
    elif ident == _CTX0_PRIM:
        for cert in certs:
            try:
                ski = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
            except x509.ExtensionNotFound:
                continue
            if ski.value.digest == contents:
                return cert
    raise CmsError("the signer's certificate is not in the signature")


class _Shape:
    """One fully walked signature, as the pattern of the others of its length.

    The three values that differ between signatures of one signer — the ``signingTime``
    value, the ``messageDigest`` value and the signature — are contents of primitive elements
    whose headers stay put; the walk in :func:`_parse_full` never branches on those contents
    (the time is decoded, which may fail, and is decoded here too). So a signature of the
    same length whose every other byte equals this one's reads as this one with those three
    values replaced.
    """

    __slots__ = ("attrs", "cuts", "parsed", "pieces", "time_node")

    def __init__(self, parsed: Parsed, cuts: list[tuple[int, int, str]], der: bytes,
                 time_node: tuple[int, bytes] | None, attrs: tuple[int, int]) -> None:
        self.parsed = parsed
        self.cuts = cuts  # (start, end, what) of each varying value, in order
        self.pieces: list[tuple[int, int, bytes]] = []  # the constant bytes between them
        pos = 0
        for start, end, _ in cuts:
            self.pieces.append((pos, start, der[pos:start]))
            pos = end
        self.pieces.append((pos, len(der), der[pos:]))
        self.time_node = time_node  # (identifier, header) of the signingTime value
        self.attrs = attrs  # where the signed attributes' [0] tag is and where they end

    def match(self, der: bytes) -> Parsed | None:
        for start, end, piece in self.pieces:
            if der[start:end] != piece:
                return None
        p = self.parsed
        values = {what: der[start:end] for start, end, what in self.cuts}
        when = p.signing_time
        if self.time_node is not None:
            ident, header = self.time_node
            when = _time((ident, header, values["time"]))
        tag, end = self.attrs
        return Parsed(certificates=p.certificates, sid=p.sid,
                      digest_algorithm=p.digest_algorithm, key_kind=p.key_kind,
                      signature_hash=p.signature_hash, message_digest=values["digest"],
                      signing_time=when, signed_attrs=b"\x31" + der[tag + 1:end],
                      signature=values["signature"])

    @classmethod
    def learn(cls, der: bytes, p: Parsed) -> _Shape | None:
        """The pattern of ``der`` (which :func:`_parse_full` read as ``p``), or ``None`` when
        its layout is not the plain one (then every signature of its length is walked)."""
        try:
            (ci,) = _spans(der, 0, len(der))
            info = _spans(der, ci[1], ci[2])
            (sd,) = _spans(der, info[1][1], info[1][2])
            (si,) = _spans(der, *_spans(der, sd[1], sd[2])[-1][1:])
            si_parts = _spans(der, si[1], si[2])
            if len(si_parts) != 6:
                return None
            attrs, sig = si_parts[3], si_parts[5]
            found: dict[bytes, tuple[int, int, int]] = {}
            for attr in _spans(der, attrs[1], attrs[2]):
                oid, values = _spans(der, attr[1], attr[2])
                name = der[oid[1]:oid[2]]
                if name in found:
                    return None  # a repeated attribute: leave it to the full walk
                (value,) = _spans(der, values[1], values[2])
                found[name] = value
        except (CmsError, ValueError):
            return None
        digest = found.get(_MESSAGE_DIGEST_OID)
        if digest is None or der[digest[1]:digest[2]] != p.message_digest \
                or der[sig[1]:sig[2]] != p.signature or sig[2] != len(der) \
                or b"\x31" + der[attrs[0] + 1:attrs[2]] != p.signed_attrs:
            return None
        cuts = [(digest[1], digest[2], "digest"), (sig[1], sig[2], "signature")]
        time_node = None
        when = found.get(_SIGNING_TIME_OID)
        if when is not None and p.signing_time is not None:
            cuts.append((when[1], when[2], "time"))
            time_node = (der[when[0]], der[when[0]:when[1]])
        cuts.sort()
        return cls(p, cuts, der, time_node, (attrs[0], attrs[2]))


_SHAPES: dict[int, _Shape] = {}


def _spans(der: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    """The elements in ``der[start:end]`` as (element start, contents start, contents end)."""
    out = []
    pos = start
    for _, header, contents in _children(der[start:end], "layout"):
        out.append((pos, pos + len(header), pos + len(header) + len(contents)))
        pos += len(header) + len(contents)
    return out


_HASH_FUNCS = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}


def signs(parsed: Parsed, content: bytes) -> bool:
    """Whether the signed ``messageDigest`` is the digest of ``content``."""
    return _HASH_FUNCS[parsed.digest_algorithm](content).digest() == parsed.message_digest


_ECDSA = {name: ec.ECDSA(cls()) for name, cls in _HASH_CLASSES.items()}
_PKCS1 = padding.PKCS1v15()


def check_signature(parsed: Parsed, key: Any) -> str | None:
    """``None`` when the signature over the signed attributes holds under the public ``key``."""
    try:
        if parsed.key_kind == "ec" and isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(parsed.signature, parsed.signed_attrs, _ECDSA[parsed.signature_hash])
        elif parsed.key_kind == "rsa" and isinstance(key, rsa.RSAPublicKey):
            key.verify(parsed.signature, parsed.signed_attrs, _PKCS1,
                       _HASH_CLASSES[parsed.signature_hash]())
        else:
            return "the signature algorithm does not fit the signer's key"
    except (InvalidSignature, ValueError):
        return "the signature does not verify under the signer's key"
    return None


class SignatureTemplate:
    """Many detached signatures by one signer, each what ``PKCS7SignatureBuilder`` makes.

    The builder costs about twice the ECDSA signature inside it (~90 against ~47 us of CPU on
    the benchmark machine). So the builder makes one reference signature, and every signature
    after it keeps that reference's bytes — certificates, signer identifier, algorithms, the
    signed attributes in the builder's order — and changes only what differs from one
    signature to the next: the ``signingTime`` and ``messageDigest`` values, and the
    signature over the new signed attributes, made with the key's public ``sign`` exactly as
    the builder signs (ECDSA, or RSA PKCS #1 v1.5, with SHA-256). Every signature made this way
    is checked by ``openssl cms -verify`` in the tests.
    """

    def __init__(self, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey,
                 cert: x509.Certificate, chain: Sequence[x509.Certificate] = ()) -> None:
        reference = sign(b"\0" * 32, key, cert, chain)
        parsed = parse(reference)
        if parsed.digest_algorithm != "sha256" or parsed.signature_hash != "sha256":
            raise CmsError("the reference signature does not use SHA-256")
        if parsed.key_kind == "ec" and isinstance(key, ec.EllipticCurvePrivateKey):
            self._scheme: tuple[Any, ...] = (ec.ECDSA(hashes.SHA256()),)
        elif parsed.key_kind == "rsa" and isinstance(key, rsa.RSAPrivateKey):
            self._scheme = (padding.PKCS1v15(), hashes.SHA256())
        else:
            raise CmsError("the reference signature's algorithm does not fit the key")
        self._key = key
        (ci,) = _children(reference, "ContentInfo")
        info = _children(ci[2], "ContentInfo")
        (sd_node,) = _children(info[1][2], "content")
        sd = _children(sd_node[2], "SignedData")
        (si_node,) = _children(sd[-1][2], "signerInfos")
        si = _children(si_node[2], "SignerInfo")
        if len(si) != 6:
            raise CmsError("the reference SignerInfo has unsigned attributes")
        self._content_type = info[0][1] + info[0][2]
        self._sd_head = b"".join(n[1] + n[2] for n in sd[:-1])
        self._si_head = b"".join(n[1] + n[2] for n in si[:3])
        self._sig_alg = si[4][1] + si[4][2]
        #: each signed attribute's DER, or the OID of the two filled per signature
        self._attrs: list[bytes] = []
        for attr in _children(si[3][2], "signedAttrs"):
            oid = _children(attr[2], "Attribute")[0][2]
            filled = oid in (_SIGNING_TIME_OID, _MESSAGE_DIGEST_OID)
            self._attrs.append(oid if filled else attr[1] + attr[2])
        if sorted(a for a in self._attrs if a in (_SIGNING_TIME_OID, _MESSAGE_DIGEST_OID)) \
                != sorted([_SIGNING_TIME_OID, _MESSAGE_DIGEST_OID]):
            raise CmsError("the reference signature lacks signingTime or messageDigest")
        self._digest_head = self._attribute(_MESSAGE_DIGEST_OID, _tlv(_OCTETS, bytes(32)))[:-32]
        self._second = -1
        #: the signed attributes before the digest value (with and without the SET header
        #: that the signature covers, RFC 5652 §5.4) and after it
        self._halves = (b"", b"", b"")
        #: (attributes length, signature length) → the DER before the attributes, and the
        #: DER between them and the signature: everything but those two is constant
        self._frames: dict[tuple[int, int], tuple[bytes, bytes]] = {}

    def sign(self, content: bytes, *, now: _dt.datetime | None = None) -> bytes:
        """DER of a detached signature over ``content``, signed ``now`` (default: the clock).

        Per signature only the SHA-256 of ``content``, the key's signature and four byte
        joins: the signed attributes around the digest value are encoded once per second,
        the framing around attributes and signature once per signature length.
        """
        if now is None:
            second = int(time.time())
            if second != self._second:  # one encoding per second, not per signature
                self._halves = self._split_attrs(
                    _dt.datetime.fromtimestamp(second, _dt.timezone.utc))
                self._second = second
            set_head, head, tail = self._halves
        else:
            set_head, head, tail = self._split_attrs(now)
        md = hashlib.sha256(content).digest()
        signature = self._key.sign(set_head + md + tail, *self._scheme)
        la = len(head) + 32 + len(tail)
        frame = self._frames.get((la, len(signature)))
        if frame is None:
            frame = self._frames[la, len(signature)] = self._frame(la, len(signature))
        return b"".join((frame[0], head, md, tail, frame[1], signature))

    def _split_attrs(self, when: _dt.datetime) -> tuple[bytes, bytes, bytes]:
        """The signed attributes (in the reference's order) signed ``when``, cut where the
        32-byte digest value goes; the first part also with the SET header in front."""
        time_attr = self._attribute(_SIGNING_TIME_OID, _signing_time(when))
        before = after = b""
        seen_digest = False
        for a in self._attrs:
            if a == _MESSAGE_DIGEST_OID:
                before += self._digest_head
                seen_digest = True
                continue
            piece = time_attr if a == _SIGNING_TIME_OID else a
            if seen_digest:
                after += piece
            else:
                before += piece
        return _SET_BYTE + _der_len(len(before) + 32 + len(after)) + before, before, after

    def _frame(self, la: int, ls: int) -> tuple[bytes, bytes]:
        """The DER of a signature with ``la`` bytes of attributes and ``ls`` of signature,
        without those two (RFC 5652 §5: ContentInfo, SignedData, one SignerInfo)."""
        mid = self._sig_alg + bytes([_OCTETS]) + _der_len(ls)
        si = _tlv(_SEQ, self._si_head + bytes([_CTX0]) + _der_len(la) + bytes(la) + mid
                  + bytes(ls))
        sd = _tlv(_SEQ, self._sd_head + _tlv(_SET, si))
        whole = _tlv(_SEQ, self._content_type + _tlv(_CTX0, sd))
        return whole[:len(whole) - ls - len(mid) - la], mid

    @staticmethod
    def _attribute(oid: bytes, value: bytes) -> bytes:
        return _tlv(_SEQ, _tlv(_OID, oid) + _tlv(_SET, value))


_SET_BYTE = bytes([_SET])


def _tlv(ident: int, contents: bytes) -> bytes:
    return bytes([ident]) + _der_len(len(contents)) + contents


def _signing_time(when: _dt.datetime) -> bytes:
    """RFC 5652 §11.3: UTCTime from 1950 to 2049, GeneralizedTime otherwise; whole seconds."""
    when = when.astimezone(_dt.timezone.utc)
    if 1950 <= when.year < 2050:
        return _tlv(_UTCTIME, when.strftime("%y%m%d%H%M%SZ").encode("ascii"))
    return _tlv(_GENTIME, when.strftime("%Y%m%d%H%M%SZ").encode("ascii"))


def chains_to(cert: x509.Certificate, anchors: Sequence[x509.Certificate],
              intermediates: Sequence[x509.Certificate], *, at: _dt.datetime) -> str | None:
    """``None`` when ``cert`` is an anchor or is issued (through ``intermediates``) by one."""
    seen: set[bytes] = set()
    current = cert
    for _ in range(8):
        der = current.public_bytes(serialization.Encoding.DER)
        if not current.not_valid_before_utc <= at <= current.not_valid_after_utc:
            return f"certificate {current.subject.rfc4514_string()} is not valid at {at:%Y-%m-%dT%H:%M:%SZ}"
        if any(der == a.public_bytes(serialization.Encoding.DER) for a in anchors):
            return None
        for anchor in anchors:
            if _issued_by(current, anchor):
                return None
        seen.add(der)
        parent = next((c for c in intermediates if _issued_by(current, c)
                       and c.public_bytes(serialization.Encoding.DER) not in seen), None)
        if parent is None:
            break
        current = parent
    return f"signer {cert.subject.rfc4514_string()} is not trusted by the given certificate(s)"


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """``issuer`` may issue certificates (a CA, or a v1 certificate) and signed ``cert``."""
    try:
        constraints = issuer.extensions.get_extension_for_class(x509.BasicConstraints)
        if not constraints.value.ca:
            return False
    except x509.ExtensionNotFound:
        pass
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
