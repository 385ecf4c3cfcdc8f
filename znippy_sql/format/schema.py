"""Arrow schemas, the pkg_type registry, reserved section names and group keys (FORMAT §2-§4)."""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa

# FORMAT §3's, defined there
from .pkgnames import DEFAULT_BLOCK_SIZE, PKG_TYPE_NAMES, PKG_TYPES  # noqa: F401

#: Data sub-index base columns, exact names, order and types (FORMAT §3).
BASE_FIELDS: tuple[pa.Field, ...] = (
    pa.field("relative_path", pa.utf8(), nullable=False),
    pa.field("chunk_seq", pa.uint32(), nullable=False),
    pa.field("fdata_offset", pa.uint64(), nullable=False),
    pa.field("compressed", pa.bool_(), nullable=False),
    pa.field("uncompressed_size", pa.uint64(), nullable=False),
    pa.field("blob_offset", pa.uint64(), nullable=False),
    pa.field("blob_size", pa.uint64(), nullable=False),
    pa.field("checksum", pa.binary(32), nullable=False),
)
BASE_NAMES: tuple[str, ...] = tuple(f.name for f in BASE_FIELDS)
BASE_SCHEMA = pa.schema(BASE_FIELDS)
LOOKUP_SCHEMA = BASE_SCHEMA
PKG_TYPE_FIELD = pa.field("pkg_type", pa.int8(), nullable=True)
#: FORMAT §3, packed blobs: the ninth column of every data sub-index and of ``__lookup__`` in
#: an archive with packed blobs (absent otherwise)
INNER = "inner_offset"
INNER_FIELD = pa.field(INNER, pa.uint64(), nullable=False)
PACKED_LOOKUP_SCHEMA = pa.schema([*BASE_FIELDS, INNER_FIELD])

MANIFEST_SCHEMA = pa.schema(
    [
        pa.field("pkg_type", pa.int8(), nullable=False),
        pa.field("repo", pa.utf8(), nullable=False),
        pa.field("module_name", pa.utf8(), nullable=False),
        pa.field("index_offset", pa.uint64(), nullable=False),
        pa.field("index_len", pa.uint64(), nullable=False),
        pa.field("row_count", pa.uint64(), nullable=False),
    ]
)

META_SCHEMA = pa.schema(
    [
        pa.field("relative_path", pa.utf8(), nullable=True),
        pa.field("key", pa.utf8(), nullable=False),
        pa.field("value", pa.utf8(), nullable=False),
    ]
)

RESERVED_PKG_TYPE = -1
from .names import (GIT_GRAPH, GIT_OID, GIT_REACH, GIT_REFS, GIT_SECRETS,  # noqa: F401
                    LOOKUP, META, SIGN_ARCHIVE, SIGN_ARTIFACTS, TRIE)  # (FORMAT §4's, there)

#: Where each reserved section goes in the tail (FORMAT §4). Unknown reserved names sit with
#: the git sections, in name order.
_SECTION_RANK = {LOOKUP: 0, TRIE: 1, GIT_OID: 2, GIT_GRAPH: 3, GIT_REACH: 4, GIT_REFS: 5,
                 META: 6, SIGN_ARTIFACTS: 7, SIGN_ARCHIVE: 8}


def section_rank(name: str) -> tuple[int, str]:
    return (_SECTION_RANK.get(name, 5), name)


def is_reserved(module_name: str) -> bool:
    return len(module_name) >= 4 and module_name.startswith("__") and module_name.endswith("__")


class GroupKey(NamedTuple):
    """A data sub-index: one (pkg_type, repo, module_name) group. Sorts in tail order."""

    pkg_type: int
    repo: str
    module_name: str


UNTYPED = GroupKey(0, "", "")


#: Reserved sections stored as raw bytes (everything else reserved is an Arrow IPC stream).
RAW_SECTIONS = frozenset({TRIE, GIT_OID, SIGN_ARTIFACTS, SIGN_ARCHIVE})
#: Reserved sections that are Arrow IPC streams. A reserved name in neither set is a future
#: extension: readers tell its kind from its bytes (an Arrow stream starts with FF FF FF FF).
ARROW_SECTIONS = frozenset({LOOKUP, GIT_GRAPH, GIT_REACH, GIT_REFS, GIT_SECRETS, META})
