"""What ``znippy-sql info`` says, from the facts of an archive: :func:`summary` derives the
record (``--json`` prints it) and :func:`write_text` prints it as text. Both paths use them:
``cli/core.py`` ``archive_info`` (facts read by the Python reader) and ``cli/fast.py`` (facts
read by the compiled core, ``native/src/info.rs``); nothing here imports pyarrow."""

from __future__ import annotations

import sys

from ..format.pkgnames import PKG_TYPE_NAMES
from ..format.units import counted, human

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    #: a data group's facts: pkg_type, pkg_type name, repo, module, files, chunks, compressed
    #: chunks, bytes, stored bytes (the sum of its rows' shares)
    GroupFacts = tuple[int, str, str, str, int, int, int, int, int]


def summary(*, path: str, size: int, tail_offset: int, blob_end: int,
            groups: list[GroupFacts], manifest: list[tuple[int, str, str, int, int, int]],
            codec: dict[str, str], referenced: int, distinct: int,
            packs: tuple[int, int, int, int, int], git_packs: bool, lookup_in_memory: bool,
            not_understood: dict[str, str], writer: dict[str, Any] | None,
            read_as: str | None, sections: list[str]) -> dict[str, Any]:
    """The ``info`` record. ``referenced``: the data rows' ``blob_size`` summed;
    ``distinct``: the bytes of the distinct blobs they point at; ``packs``: packed blobs,
    their files, stored bytes, bytes of their slices, and the ``blob_size`` of their member
    rows summed; ``git_packs``: an archive of git packs (no bytes a chunk row)."""
    rows: list[dict[str, Any]] = [
        {"pkg_type": g[0], "pkg_type_name": g[1], "repo": g[2], "module_name": g[3],
         "files": g[4], "chunks": g[5], "compressed_chunks": g[6], "raw_chunks": g[5] - g[6],
         "bytes": g[7], "stored_bytes": g[8]} for g in groups]
    total = sum(g["bytes"] for g in rows)
    chunks = sum(g["chunks"] for g in rows)
    # a packed blob is referenced once, whatever the number of its slices
    referenced += packs[2] - packs[4]
    return {
        "path": path,
        "archive_bytes": size,
        "files": sum(g["files"] for g in rows),
        "chunks": chunks,
        "bytes": total,
        "blob_bytes": blob_end,
        "tail_offset": tail_offset,
        "tail_bytes": size - tail_offset,
        "ratio": round(total / size, 4) if size else 0.0,
        # shared blobs (docs/format.md §6): blob bytes the rows point at, counted per row,
        # against the bytes of the distinct blobs
        "referenced_bytes": referenced,
        "stored_blob_bytes": distinct,
        "dedup_saved_bytes": referenced - distinct,
        "codec": codec,
        # packed blobs (docs/format.md §6): how many, the files in them, their stored bytes
        # and the bytes of the files they hold
        "packs": packs[0], "packed_files": packs[1], "pack_stored_bytes": packs[2],
        "pack_bytes": packs[3],
        # everything after the blob region, per chunk row (docs/format.md §2); None for an
        # archive of git packs, whose tail is its git sections, not its few chunk rows
        "index_bytes_per_row": round((size - tail_offset) / chunks, 1)
        if chunks and not git_packs else None,
        # no __lookup__/__trie__ (the Rust tool's layout): the reader builds them in memory
        "lookup": "in memory" if lookup_in_memory else "section",
        "groups": rows,
        "sections": sections,
        # another writer's reserved sections this reader skips (docs/format.md §10)
        "not_understood": not_understood,
        "writer": writer,
        # a Rust hot archive or one with delta chunks: read laid out anew (docs/interop.md)
        "read_as": read_as,
        "manifest": [{"pkg_type": m[0], "repo": m[1], "module_name": m[2],
                      "index_offset": m[3], "index_len": m[4], "row_count": m[5]}
                     for m in manifest],
    }


def builtin_name(pkg_type: int) -> str | None:
    """FORMAT §3's name of a built-in pkg_type (None: the module registry names it)."""
    return PKG_TYPE_NAMES.get(pkg_type)


def write_text(info: dict[str, Any]) -> None:
    """``info`` as text."""
    out = sys.stdout.write
    codec = info["codec"]
    out(f"archive   {info['path']}  ({human(info['archive_bytes'])})\n")
    out(f"content   {counted(info['files'], 'file')}, {counted(info['chunks'], 'chunk')}, "
        f"{human(info['bytes'])}"
        f" -> blobs {human(info['blob_bytes'])}, tail {human(info['tail_bytes'])},"
        f" ratio {info['ratio']:.2f}\n")
    out(f"dedup     {human(info['referenced_bytes'])} of blobs referenced, "
        f"{human(info['stored_blob_bytes'])} stored: {human(info['dedup_saved_bytes'])} "
        f"saved by shared blobs\n")
    if info["packs"]:
        out(f"packs     {counted(info['packed_files'], 'file')} in "
            f"{counted(info['packs'], 'packed blob')}: {human(info['pack_bytes'])} stored as "
            f"{human(info['pack_stored_bytes'])}\n")
    if info["index_bytes_per_row"] is not None:
        out(f"index     {info['index_bytes_per_row']:.0f} bytes a chunk row"
            + (" (compressed streams)" if codec.get("znippy.index_compression") else "") + "\n")
    if codec and "znippy.codec" not in codec:  # another writer's keys (the Rust tool's)
        out("schema    " + " ".join(f"{k}={v}" for k, v in codec.items()) + "\n")
    elif codec:
        out(f"codec     {codec.get('znippy.codec', '?')} graph="
            f"{codec.get('znippy.openzl.graph', '?')} level={codec.get('znippy.openzl.level', '?')}"
            f" format_version={codec.get('znippy.openzl.format_version', '?')}"
            f" block_size={codec.get('znippy.block_size', '?')}\n")
    if info["writer"] is not None:
        from ..read.foreign import writer_text

        out(f"writer    {writer_text(info['writer'])}\n")
    if info["read_as"] is not None:  # (sizes and offsets are those of the layout read)
        out(f"read as   {info['read_as']}\n")
    out(f"sections  {', '.join(info['sections']) or '(none)'}"
        + ("; lookup built in memory (the Rust tool's layout)"
           if info["lookup"] == "in memory" else "") + "\n")
    for name, status in info["not_understood"].items():
        out(f"  {name}: {status}: skipped\n")
    if "git" in info:
        g = info["git"]
        whole = g.get("complete_history")  # None: the Rust loose-object tier does not say
        out(f"git       {g['objects']} objects, {g['commits']} commits" + (
            "" if whole is None else "; complete history" if whole else
            f"; INCOMPLETE history: {g['absent_objects']} objects its commits and trees name "
            "are absent (a partial clone or a shallow history); git_reachable lists the "
            "present ones only") + "\n")
    out("groups\n")
    out(f"  {'type':<8}{'repo':<20}{'module':<10}{'files':>8}{'chunks':>8}"
        f"{'bytes':>14}{'stored':>14}\n")
    names = {}
    for g in info["groups"]:
        names[g["pkg_type"]] = g["pkg_type_name"]
        out(f"  {g['pkg_type_name']:<8}{g['repo'] or '-':<20}{g['module_name'] or '-':<10}"
            f"{g['files']:>8}{g['chunks']:>8}{g['bytes']:>14}{g['stored_bytes']:>14}\n")
    out("manifest\n")
    for m in info["manifest"]:
        # a data row's type is one of the groups' (each data row is a group)
        name = m["module_name"] if m["pkg_type"] < 0 else (
            f"{names[m['pkg_type']]}/{m['repo'] or '-'}/{m['module_name'] or '-'}")
        out(f"  {name:<40}@{m['index_offset']:>12} len {m['index_len']:>10}"
            f" rows {m['row_count']:>8}\n")
