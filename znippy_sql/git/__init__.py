"""The git package format: the push path (writers, journal, lock), the generation-0 seal, and
the git sections (object index, commit graph, reachability bitmaps). See docs/git-sections.md."""

from .journal import TOMBSTONE, JournalState, read_journal, retire_packs
from .refs import Ref, refs_table
from .seal import GitSealReport, seal_generation_zero
from .writers import Faults, FastWriter, InjectedCrash, SafeWriter

__all__ = ["FastWriter", "SafeWriter", "Faults", "InjectedCrash", "read_journal", "retire_packs",
           "JournalState", "TOMBSTONE", "seal_generation_zero", "GitSealReport", "Ref",
           "refs_table"]
