"""The Rust tool's layouts after 0.8 (znippy-common 0.9.1 … 0.10.6), read as this project's.

Each module is one concern of docs/interop.md: :mod:`.layouts` (the manifest's names and
numbers), :mod:`.vsource` (an archive laid out anew: real byte ranges, then bytes made in
memory), :mod:`.tail` (a tail of this project's layout made in memory), :mod:`.hot` (an
unsealed archive and its journal), :mod:`.delta` (delta chunks), :mod:`.meta` (the typed
``__znippy_meta__``), :mod:`.sign` (the Rust signature sections). The reader calls
:func:`hot_source`, :func:`rust_rows` and :func:`delta_source` while it opens an archive; an
archive of any other writer goes through them untouched.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .delta import delta_source
    from .hot import hot_source
    from .layouts import rust_rows

__all__ = ["delta_source", "hot_source", "rust_rows"]

#: imported when first asked for: a writer that needs one submodule (``git import``'s tail:
#: ``layouts``, ``meta``) does not import the codecs ``delta`` brings
_HOME = {"delta_source": "delta", "hot_source": "hot", "rust_rows": "layouts"}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{home}", __name__), name)
