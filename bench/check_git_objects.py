"""Every object of a git archive against the repository it was imported from (issue 28).

Usage::

    .venv/bin/python bench/check_git_objects.py REPO ARCHIVE

Reads ``git cat-file --batch-all-objects --batch`` (id, type, size, content of every object
the repository holds) and checks that the archive holds exactly those ids, and that each
object read from the archive (``GitObjects.read``: inflated, deltas applied, SHA-1 checked
against its id) has git's type and bytes. Prints one line; exit 1 at the first difference.
"""

from __future__ import annotations

import subprocess
import sys
import time

from znippy_sql import open_archive
from znippy_sql.git.objects import GitObjects


def main(repo: str, archive: str) -> int:
    start = time.perf_counter()
    proc = subprocess.Popen(["git", "-C", repo, "cat-file", "--batch-all-objects", "--batch"],
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    seen = 0
    kinds: dict[str, int] = {}
    with open_archive(archive) as a:
        objects = GitObjects(a)
        held = objects.index.count
        while True:
            head = proc.stdout.readline()
            if not head:
                break
            oid_hex, kind, size = head.decode().split()
            content = proc.stdout.read(int(size))
            proc.stdout.read(1)                     # the newline after the content
            oid = bytes.fromhex(oid_hex)
            if objects.index.find(oid) is None:
                print(f"DIFFERENT: {oid_hex} ({kind}) is not in the archive")
                return 1
            got_kind, got = objects.read(oid)
            if got_kind != kind or got != content:
                print(f"DIFFERENT: {oid_hex}: archive {got_kind} {len(got)} B, git {kind} "
                      f"{len(content)} B")
                return 1
            seen += 1
            kinds[kind] = kinds.get(kind, 0) + 1
    if proc.wait():
        print(f"git cat-file failed ({proc.returncode})")
        return 1
    if seen != held:
        print(f"DIFFERENT: git lists {seen} objects, the archive holds {held}")
        return 1
    print(f"equal: all {seen:,} objects ({', '.join(f'{n:,} {k}s' for k, n in sorted(kinds.items()))}) "
          f"have git's type and bytes, and the archive holds no other "
          f"({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
