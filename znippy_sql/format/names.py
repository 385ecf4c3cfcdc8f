"""The reserved section names (FORMAT §4), importable without pyarrow (``git import`` writes
its tail in the core and names its sections from here; ``schema.py`` re-exports them)."""

from __future__ import annotations

LOOKUP = "__lookup__"
TRIE = "__trie__"
META = "__meta__"
SIGN_ARTIFACTS = "__sign_artifacts__"
SIGN_ARCHIVE = "__sign_archive__"
GIT_OID = "__gunnar_oid__"
GIT_GRAPH = "__gunnar_graph__"
GIT_REACH = "__gunnar_reach__"
GIT_REFS = "__gunnar_refs__"
#: the Rust znippy-plugin-git secrets push log (interop/pushlog.py); this project writes none
GIT_SECRETS = "__gunnar_secrets__"
