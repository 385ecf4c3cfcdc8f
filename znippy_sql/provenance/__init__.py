"""Provenance: what an archive says about itself and who vouches for it.

- ``meta``: the ``__meta__`` section (facts given by the caller, plus where the archive came from).
- ``sign``: FORMAT §4 file and archive digests, the ``__sign_*`` sections, their verification.
- ``cms``: CMS (PKCS#7) detached signatures built with ``cryptography`` and checked by a DER walk.
"""
