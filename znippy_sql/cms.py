"""Detached CMS (PKCS #7) signatures over a digest: make them, read them, check them.

Signing uses the public API of ``cryptography`` (``PKCS7SignatureBuilder``: DER, detached,
binary), which puts the signer's certificate and the signed attributes ``contentType``,
``signingTime``, ``messageDigest`` in every signature.

``cryptography`` has no public API that verifies CMS, so reading is done here: a small DER
reader walks the structure (RFC 5652 §5; :func:`_children` decodes element headers only),
``asn1crypto``'s typed classes decode the values (object identifiers, times, serial numbers),
``cryptography`` loads the certificates, and the signature itself is checked with
``cryptography``'s public-key ``verify`` over the DER of the signed attributes (RFC 5652 §5.4:
re-tagged as a SET). The tests cross-check every field read here against ``asn1crypto.cms``'s
full parse of the same signatures. Only what this project writes is accepted: one SignerInfo, signed
attributes present, no embedded content, SHA-2 digests, ECDSA or RSA PKCS #1 v1.5 keys.
A structure this parser does not expect raises :class:`CmsError` saying where.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from asn1crypto import core
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.serialization import pkcs7

_UNIVERSAL, _CONTEXT = 0, 2
_SEQUENCE, _SET, _OID, _INTEGER, _OCTETS, _UTCTIME, _GENTIME = 16, 17, 6, 2, 4, 23, 24

_HASHES = {"2.16.840.1.101.3.4.2.1": "sha256", "2.16.840.1.101.3.4.2.2": "sha384",
           "2.16.840.1.101.3.4.2.3": "sha512"}
_HASH_CLASSES = {"sha256": hashes.SHA256, "sha384": hashes.SHA384, "sha512": hashes.SHA512}
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
_OID_CACHE: dict[bytes, str] = {}


def _oid(contents: bytes) -> str:
    dotted = _OID_CACHE.get(contents)
    if dotted is None:
        dotted = core.ObjectIdentifier.load(b"\x06" + _der_len(len(contents)) + contents).dotted
        _OID_CACHE[contents] = dotted
    return dotted


def _der_len(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


class _Node:
    __slots__ = ("cls", "tag", "header", "contents")

    def __init__(self, cls: int, tag: int, header: bytes, contents: bytes) -> None:
        self.cls, self.tag, self.header, self.contents = cls, tag, header, contents

    @property
    def der(self) -> bytes:
        return self.header + self.contents


def _children(data: bytes, what: str) -> list[_Node]:
    """The DER elements back to back in ``data`` (tag, definite length, contents).

    A few lines of header decoding rather than a generic parser: this runs ~40 times per
    signature, tens of thousands of times per archive. Every length is checked against its
    container; indefinite lengths and high tag numbers (never used by CMS in DER) are refused.
    """
    out = []
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < 2:
            raise CmsError(f"{what}: truncated element")
        first, n = data[pos], data[pos + 1]
        if first & 0x1F == 0x1F:
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
        out.append(_Node(first >> 6, first & 0x1F, data[pos:start], data[start:start + n]))
        pos = start + n
    return out


def _expect(node: _Node, cls: int, tag: int, what: str) -> _Node:
    if node.cls != cls or node.tag != tag:
        raise CmsError(f"{what}: unexpected ASN.1 element (class {node.cls}, tag {node.tag})")
    return node


def parse(der: bytes) -> Parsed:
    """Walk a DER ContentInfo holding a detached SignedData with one SignerInfo."""
    top = _children(der, "ContentInfo")
    if len(top) != 1:
        raise CmsError("ContentInfo: trailing bytes after the signature")
    info = _children(_expect(top[0], _UNIVERSAL, _SEQUENCE, "ContentInfo").contents,
                     "ContentInfo")
    if len(info) != 2 or _oid(_expect(info[0], _UNIVERSAL, _OID, "contentType").contents) \
            != _SIGNED_DATA:
        raise CmsError("ContentInfo: not a SignedData")
    (sd_node,) = _children(_expect(info[1], _CONTEXT, 0, "content").contents, "content")
    sd = _children(_expect(sd_node, _UNIVERSAL, _SEQUENCE, "SignedData").contents, "SignedData")
    if len(sd) < 4:
        raise CmsError("SignedData: too few fields")
    encap = _children(_expect(sd[2], _UNIVERSAL, _SEQUENCE, "encapContentInfo").contents,
                      "encapContentInfo")
    if not encap or _oid(_expect(encap[0], _UNIVERSAL, _OID, "eContentType").contents) != _DATA:
        raise CmsError("encapContentInfo: content type is not id-data")
    if len(encap) != 1:
        raise CmsError("encapContentInfo: the content is embedded; expected a detached signature")
    certificates = b""
    for node in sd[3:-1]:
        if node.cls == _CONTEXT and node.tag == 0:
            certificates = node.contents
        elif not (node.cls == _CONTEXT and node.tag == 1):  # [1] crls are ignored
            raise CmsError("SignedData: unexpected field before signerInfos")
    signer_infos = _children(_expect(sd[-1], _UNIVERSAL, _SET, "signerInfos").contents,
                             "signerInfos")
    if len(signer_infos) != 1:
        raise CmsError(f"signerInfos: {len(signer_infos)} signers, expected exactly one")
    return _signer_info(certificates, signer_infos[0])


def _signer_info(certificates: bytes, node: _Node) -> Parsed:
    si = _children(_expect(node, _UNIVERSAL, _SEQUENCE, "SignerInfo").contents, "SignerInfo")
    if len(si) < 6:
        raise CmsError("SignerInfo: no signed attributes")
    sid = si[1].der
    digest_alg = _algorithm(si[2], "digestAlgorithm")
    if digest_alg not in _HASHES:
        raise CmsError(f"digestAlgorithm {digest_alg} is not SHA-2")
    attrs = _expect(si[3], _CONTEXT, 0, "signedAttrs")
    sig_alg = _algorithm(si[4], "signatureAlgorithm")
    if sig_alg not in _SIG_ALGS:
        raise CmsError(f"signatureAlgorithm {sig_alg} is not supported")
    signature = _expect(si[5], _UNIVERSAL, _OCTETS, "signature").contents
    kind, sig_hash = _SIG_ALGS[sig_alg]
    content_type = message_digest = None
    signing_time = None
    for attr in _children(attrs.contents, "signedAttrs"):
        parts = _children(_expect(attr, _UNIVERSAL, _SEQUENCE, "Attribute").contents, "Attribute")
        if len(parts) != 2:
            raise CmsError("Attribute: expected type and values")
        kind_oid = _oid(_expect(parts[0], _UNIVERSAL, _OID, "Attribute type").contents)
        values = _children(_expect(parts[1], _UNIVERSAL, _SET, "Attribute values").contents,
                           "Attribute values")
        if kind_oid in (_ATTR_CONTENT_TYPE, _ATTR_MESSAGE_DIGEST, _ATTR_SIGNING_TIME) \
                and len(values) != 1:
            raise CmsError("signed attribute with other than one value")
        if kind_oid == _ATTR_CONTENT_TYPE:
            content_type = _oid(_expect(values[0], _UNIVERSAL, _OID, "contentType").contents)
        elif kind_oid == _ATTR_MESSAGE_DIGEST:
            message_digest = _expect(values[0], _UNIVERSAL, _OCTETS, "messageDigest").contents
        elif kind_oid == _ATTR_SIGNING_TIME:
            signing_time = _time(values[0])
    if content_type != _DATA:
        raise CmsError("signed attributes: contentType missing or not id-data")
    if message_digest is None:
        raise CmsError("signed attributes: no messageDigest")
    return Parsed(
        certificates=certificates, sid=sid, digest_algorithm=_HASHES[digest_alg],
        key_kind=kind, signature_hash=sig_hash or _HASHES[digest_alg],
        message_digest=message_digest, signing_time=signing_time,
        signed_attrs=b"\x31" + attrs.header[1:] + attrs.contents, signature=signature,
    )


def _algorithm(node: _Node, what: str) -> str:
    parts = _children(_expect(node, _UNIVERSAL, _SEQUENCE, what).contents, what)
    if not parts:
        raise CmsError(f"{what}: empty")
    return _oid(_expect(parts[0], _UNIVERSAL, _OID, what).contents)


def _time(node: _Node) -> _dt.datetime:
    if node.cls == _UNIVERSAL and node.tag == _UTCTIME:
        value = core.UTCTime.load(node.der).native
    elif node.cls == _UNIVERSAL and node.tag == _GENTIME:
        value = core.GeneralizedTime.load(node.der).native
    else:
        raise CmsError("signingTime: not a UTCTime or GeneralizedTime")
    if not isinstance(value, _dt.datetime):
        raise CmsError("signingTime: not a point in time")
    return value


def certificates(parsed: Parsed) -> list[x509.Certificate]:
    """The plain X.509 certificates the signature carries (other choices are skipped)."""
    out = []
    for node in _children(parsed.certificates, "certificates"):
        if node.cls == _UNIVERSAL and node.tag == _SEQUENCE:
            try:
                out.append(x509.load_der_x509_certificate(node.der))
            except ValueError as exc:
                raise CmsError(f"certificates: {exc}") from None
    return out


def signer_certificate(parsed: Parsed, certs: Sequence[x509.Certificate]) -> x509.Certificate:
    """The certificate the SignerIdentifier names (issuer and serial, or key identifier)."""
    sid = _children(parsed.sid, "sid")[0] if parsed.sid else None
    if sid is None:
        raise CmsError("sid: empty")
    if sid.cls == _UNIVERSAL and sid.tag == _SEQUENCE:
        issuer, serial = _children(sid.contents, "IssuerAndSerialNumber")[:2]
        number = core.Integer.load(serial.der).native
        for cert in certs:
            if cert.serial_number == number and cert.issuer.public_bytes() == issuer.der:
                return cert
    elif sid.cls == _CONTEXT and sid.tag == 0:
        for cert in certs:
            try:
                ski = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
            except x509.ExtensionNotFound:
                continue
            if ski.value.digest == sid.contents:
                return cert
    raise CmsError("the signer's certificate is not in the signature")


def check_signature(parsed: Parsed, cert: x509.Certificate, content: bytes) -> str | None:
    """``None`` when the signature holds for ``content`` under ``cert``'s key, else why not."""
    if hashlib.new(parsed.digest_algorithm, content).digest() != parsed.message_digest:
        return "the signed message digest is not the digest of this content"
    key = cert.public_key()
    algo = _HASH_CLASSES[parsed.signature_hash]()
    try:
        if parsed.key_kind == "ec" and isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(parsed.signature, parsed.signed_attrs, ec.ECDSA(algo))
        elif parsed.key_kind == "rsa" and isinstance(key, rsa.RSAPublicKey):
            key.verify(parsed.signature, parsed.signed_attrs, padding.PKCS1v15(), algo)
        else:
            return "the signature algorithm does not fit the signer's key"
    except InvalidSignature:
        return "the signature does not verify under the signer's key"
    return None


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
