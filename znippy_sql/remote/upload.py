"""A write to a URL: the archive is written to a local staging file and uploaded only on a
clean exit (``obstore.put``: one PUT, or a multipart upload of 8 MiB parts for larger files,
which the store makes visible only when it completes). A failed write or a failed upload
leaves nothing under the final key; the staging directory is removed either way.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any


@contextmanager
def upload_on_exit(url: str, *, storage_options: Mapping[str, Any] | None = None
                   ) -> Iterator[str]:
    """The local path to write; uploaded to ``url`` when the block exits cleanly. The URL
    and options are checked before anything is written."""
    from . import _DEFAULT
    from .client import connect
    from .url import parse

    target = parse(url, storage_options, defaults=_DEFAULT["storage_options"])
    obj = connect(target)
    folder = tempfile.mkdtemp(prefix="znippy-upload-")
    try:
        path = os.path.join(folder, os.path.basename(target.key) or "archive.znippy")
        yield path
        obj.put_file(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
