"""Provenance on the command line: the options ``create``/``verify`` take.

``create`` (and ``append``/``seal``, through :func:`writer_kwargs`): ``--meta KEY=VALUE``
(repeatable), ``--meta-file FACTS.jsonl`` (per-file facts), ``--no-provenance``,
``--sign-key KEY.pem --sign-cert CERT.pem``. ``verify``: ``--trust CERT.pem`` (repeatable),
``--signatures-only``, ``--deep``. The command modules call the hooks below; each reads its options with
``getattr(args, name, default)``, so a command that adds only some of them still works.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ZnippyError


def register(subparsers: Any) -> None:
    """No command of its own (``modules`` is in ``cli/modules.py``): options on others."""


# -- create / append / seal ---------------------------------------------------------------------
def _assignment(text: str) -> tuple[str, str]:
    from ..provenance.meta import parse_assignment

    try:
        return parse_assignment(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_create_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("metadata and signatures")
    g.add_argument("--meta", action="append", type=_assignment, default=[], metavar="KEY=VALUE",
                   help="an archive-level fact for __meta__ (repeatable; a repeated key keeps "
                        "every value)")
    g.add_argument("--meta-file", action="append", default=[], metavar="FACTS.jsonl",
                   help='per-file facts, one JSON object a line: {"path": P, "key": K, '
                        '"value": V} or {"path": P, K: V, ...}')
    g.add_argument("--no-provenance", action="store_true",
                   help="do not record created_at, created_by and the source")
    g.add_argument("--sign-key", metavar="KEY.pem",
                   help="sign every file and the archive root with this EC key (P-256 "
                        "recommended: fastest to sign; RSA accepted, ~12x slower) "
                        "(encrypted: password in $ZNIPPY_SIGN_KEY_PASSWORD)")
    g.add_argument("--sign-cert", metavar="CERT.pem",
                   help="the signing key's certificate (then any chain certificates)")


def writer_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``meta=`` and ``signer=`` for the writer, from the options above.

    Provenance is recorded unless ``--no-provenance``; with that and no facts, no ``__meta__``
    section is written at all.
    """
    from ..provenance.meta import Meta, read_facts_file

    facts: dict[str, list[str]] = {}
    for key, value in getattr(args, "meta", None) or []:
        facts.setdefault(key, []).append(value)
    files = [row for path in getattr(args, "meta_file", None) or [] for row in
             read_facts_file(path)]
    provenance = not getattr(args, "no_provenance", False)
    meta = None
    if provenance or facts or files:
        source = getattr(args, "src", None)
        meta = Meta(facts=facts, files=files, provenance=provenance,
                    source=None if source is None else str(source))
    key, cert = getattr(args, "sign_key", None), getattr(args, "sign_cert", None)
    if (key is None) != (cert is None):
        raise ZnippyError("--sign-key and --sign-cert go together")
    signer = None
    if key is not None and cert is not None:  # both or neither (checked above)
        from ..provenance.sign import Signer

        signer = Signer.from_files(key, cert)
    return {"meta": meta, "signer": signer}


# -- verify -------------------------------------------------------------------------------------
def add_verify_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "signatures",
        "verify always checks the structure and decodes every blob against its BLAKE3; on a "
        "signed archive it also checks every signature over the file digests (FORMAT §4). "
        "--trust adds who signed: each signer must be the given certificate or issued by it.")
    g.add_argument("--trust", action="append", default=[], metavar="CERT.pem",
                   help="check that every signer is this certificate or issued by it "
                        "(repeatable); everything else verify does is still done")
    g.add_argument("--signatures-only", action="store_true",
                   help="the fast mode: structure and signatures only, no blob decoded, so "
                        "a changed blob byte is NOT found (the summary says so)")
    g.add_argument("--deep", action="store_true",
                   help="with --signatures-only: also decode every signed file and check it "
                        "against its signed digest (the default mode always does)")


def verify_extra(args: argparse.Namespace, archive: Any) -> list[str]:
    """Problems with ``__meta__`` and the signatures (trusted ones with ``--trust``).

    The blobs are the core check's: only ``--signatures-only --deep`` decodes here.
    """
    from ..provenance.meta import read_meta
    from ..provenance.sign import is_signed, verify_signatures

    problems: list[str] = []
    try:
        read_meta(archive)
    except ZnippyError as exc:
        problems.append(exc.problem)
    trust = getattr(args, "trust", None) or None
    signatures_only = bool(getattr(args, "signatures_only", False))
    deep = signatures_only and bool(getattr(args, "deep", False))
    try:
        # without an anchor, a signed archive is still checked: each signature over its
        # file's current digest; --signatures-only on an unsigned archive is a finding
        if trust is not None or signatures_only or is_signed(archive):
            problems.extend(verify_signatures(archive, trust, deep=deep))
    except ZnippyError as exc:
        problems.append(exc.problem)
    return problems
