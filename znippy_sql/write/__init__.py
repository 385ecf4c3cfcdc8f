"""The write path: files → chunks → codec → blobs → sub-indexes → lookup + trie → manifest → footer.

- ``source``: ``Entry`` and the directory walk; ``ingest``: an entry's group, path and duplicate
  checks, its chunks sent through ``pipeline`` (compression in worker threads, results in input
  order) into ``blobs`` (blob bytes and index rows).
- ``tail``: ``write_tail``, the one function every writer ends in.
- ``writer``: ``write_archive`` and ``ArchiveWriter`` (staging file, fsync, atomic rename);
  ``append``: ``append_archive`` (new blobs at ``blob_end``, the whole tail rewritten, under the
  rollback journal of ``format.rollback``).
"""
