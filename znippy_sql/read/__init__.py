"""The read path: bytes → footer → manifest → byte ranges → Arrow rows → file bytes.

- ``reader``: ``open_archive`` and ``Archive``, the facade over ``core.ArchiveCore`` (groups,
  lookup, trie lookups, checked chunk reads: ``tail``, ``columns``, ``search``, ``stream``,
  ``bulk``, ``packs``, ``blobcache``).
- ``fileobj``: ``ArchiveFile``, a seekable stream over one archived file.
- ``extract``: streaming, verified, contained extraction of a selection.
- ``verify``: the full structural and content check, every finding listed.
"""
