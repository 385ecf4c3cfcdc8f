"""``znippy-sql extract ARCHIVE -o DIR``: files out of an archive, every one checked."""

from __future__ import annotations

import argparse
import sys

from .common import counted, done, human, open_archive_arg, progress_for

# -- extract ----------------------------------------------------------------------------------
def cmd_extract(args: argparse.Namespace) -> int:
    with open_archive_arg(args.archive) as archive:
        which = dict(repo=args.repo, pkg_type=args.pkg_type, glob=args.glob)
        progress = progress_for("extract")
        try:
            if progress is not None:  # a terminal: the bar wants the total first
                paths = archive.select(**which)
                progress.total = len(paths)
                report = archive.extract(args.out, paths=paths, progress=progress)
            else:
                report = archive.extract(args.out, **which)
        finally:
            done(progress)
    for path, why in sorted(report.failed.items()):
        print(f"znippy-sql: extract: {path}: {why}", file=sys.stderr)
    print(f"{report.dest}: {counted(report.files, 'file')}, {human(report.bytes_written)} extracted"
          + (f", {len(report.failed)} failed" if report.failed else "")
          + f" in {report.seconds:.2f} s")
    return 0 if report.ok else 1
