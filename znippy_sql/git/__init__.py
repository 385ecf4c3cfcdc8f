"""The git package format: the push path (writers, journal, lock), the generation-0 seal, and
the git sections (object index, commit graph, reachability bitmaps). See docs/git-sections.md.

The names below are imported when first asked for, so ``git import`` (which uses the seal,
not the push path's writers) imports only what it uses."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .journal import TOMBSTONE, JournalState, read_journal, retire_packs
    from .refs import Ref, refs_table
    from .seal import GitSealReport, seal_generation_zero
    from .writers import Faults, FastWriter, InjectedCrash, SafeWriter

#: each exported name and the module that defines it
_HOME = {"FastWriter": "writers", "SafeWriter": "writers", "Faults": "writers",
         "InjectedCrash": "writers", "read_journal": "journal", "retire_packs": "journal",
         "JournalState": "journal", "TOMBSTONE": "journal", "seal_generation_zero": "seal",
         "GitSealReport": "seal", "Ref": "refs", "refs_table": "refs"}

__all__ = ["FastWriter", "SafeWriter", "Faults", "InjectedCrash", "read_journal", "retire_packs",
           "JournalState", "TOMBSTONE", "seal_generation_zero", "GitSealReport", "Ref",
           "refs_table"]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{home}", __name__), name)
