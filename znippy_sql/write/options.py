"""The write options: one frozen :class:`WriteOptions`, one :class:`Provenance`, one mapping.

Every writer (``write_archive``, ``ArchiveWriter``, ``append_archive``, ``compact``, the store
and its seal, the CLI) takes ``options=WriteOptions(...)`` and ``provenance=Provenance(...)``.
The keyword arguments they took before (``level=``, ``meta=``, ...) are still accepted: each
writer hands them to :func:`resolve`, the one place they become options. A keyword left at
``None`` is "not given": the options' value (or, for an append, the archive's own) stands.

The defaults are the :class:`WriteOptions` fields (here) and nowhere else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ..errors import OptionError
from ..format import codec
from ..format.pkgnames import DEFAULT_BLOCK_SIZE
from .compat import COMPAT_MODES, Compat
from .limits import LEVELS, MAX_BLOCK_SIZE

if TYPE_CHECKING:
    from ..provenance.meta import Meta
    from ..provenance.sign import Signer

__all__ = ["OptionKwargs", "Provenance", "WriteOptions", "check", "option_names", "resolve"]

#: recorded on the sub-indexes of an archive written with packing on (append follows it)
PACK_KEY = "znippy.pack"
#: recorded when the index streams were written with body compression
INDEX_KEY = "znippy.index_compression"


@dataclass(frozen=True, kw_only=True)
class WriteOptions:
    """How every writer writes: ``write_archive``, ``ArchiveWriter``, ``append_archive``,
    ``compact``, the store and its seal, and the CLI (``znippy_sql.WriteOptions``).

    Frozen and checked once, when made: a bad value raises :class:`~znippy_sql.OptionError`
    naming the option, the value and what is accepted. These fields are the one place the
    defaults live (:func:`resolve` maps the keyword arguments onto them). With
    ``compat="rust-0.8"``, ``pack`` and ``index_compression`` are off (the Rust 0.8 reader
    reads neither) and ``posix`` is refused.

    >>> WriteOptions(level=5).block_size == WriteOptions().block_size
    True
    """

    #: ``"rust-0.8"``: an archive the Rust tool 0.8 reads (``write/compat.py``)
    compat: Compat | None = None
    #: record modes, mtimes, symbolic links and directories of a walked source (``__meta__``)
    posix: bool = False
    #: leave out (and report) files whose paths the format refuses, instead of failing
    skip_unsafe: bool = False
    #: leave out (and report) files and directories of a source that cannot be read,
    #: instead of failing with ``UnreadableSourceError``
    skip_unreadable: bool = False
    #: fsync the file and its directory before the rename (False: scratch output only)
    fsync: bool = True
    level: int = codec.DEFAULT_LEVEL
    block_size: int = DEFAULT_BLOCK_SIZE
    workers: int | None = None
    #: zip entries cut apart, skip-listed chunks probed, identical chunks stored once
    dedup: bool = True
    #: small files packed into shared frames (``write/pack.py``; False: the layout before
    #: packing, byte for byte)
    pack: bool = True
    #: Arrow IPC body compression of the index streams (``format/ipc.py``)
    index_compression: bool = True

    def schema_metadata(self) -> dict[str, str]:
        """Recorded on every data sub-index schema (docs/format.md)."""
        return {
            "znippy.codec": "openzl",
            "znippy.openzl.graph": codec.GRAPH,
            "znippy.openzl.level": str(self.level),
            "znippy.openzl.format_version": str(codec.FORMAT_VERSION),
            "znippy.block_size": str(self.block_size),
            **({PACK_KEY: "1"} if self.pack else {}),
            **({INDEX_KEY: "zstd"} if self.index_compression else {}),
        }

    def __post_init__(self) -> None:
        check(self)
        if self.compat is not None:  # the Rust 0.8 reader reads neither (FORMAT §1, §3)
            object.__setattr__(self, "pack", False)
            object.__setattr__(self, "index_compression", False)


def check(options: WriteOptions) -> None:
    """Every field of ``options`` has a value a writer takes; else :class:`OptionError`
    naming it (run by ``WriteOptions`` when made)."""
    def refuse(name: str, why: str) -> None:
        value = getattr(options, name)
        raise OptionError(f"write option {name}={value!r}: {why}")

    for name in ("level", "block_size"):
        value = getattr(options, name)
        if not isinstance(value, int) or isinstance(value, bool):
            refuse(name, "not a whole number")
    if options.level not in LEVELS:
        refuse("level", f"out of range: OpenZL takes levels {LEVELS.start} to {LEVELS.stop - 1}")
    if not 0 < options.block_size <= MAX_BLOCK_SIZE:
        refuse("block_size", f"must be positive and at most {MAX_BLOCK_SIZE} bytes")
    workers = options.workers
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool)
                                or workers < 1):
        refuse("workers", "must be a positive whole number, or None for the CPU count")
    for name in ("dedup", "pack", "index_compression", "posix", "skip_unsafe",
                 "skip_unreadable", "fsync"):
        if not isinstance(getattr(options, name), bool):
            refuse(name, "must be True or False")
    if options.compat is not None:
        if options.compat not in COMPAT_MODES:
            refuse("compat", f"unknown compat mode; known: {', '.join(COMPAT_MODES)}")
        if options.posix and options.compat != "rust-0.10":  # rust-0.10: __znippy_fsmeta__
            raise OptionError(f"write options compat={options.compat!r} and posix=True: a "
                              f"{options.compat} archive holds no __meta__ for POSIX facts")



@dataclass(frozen=True, kw_only=True)
class Provenance:
    """What an archive says about itself: ``meta`` (a :class:`~znippy_sql.provenance.meta.Meta`,
    a mapping of facts, or ``True`` for provenance alone) becomes ``__meta__``; ``signer`` (a
    :class:`~znippy_sql.provenance.sign.Signer`) signs the file digests (FORMAT §4)."""

    meta: Meta | Any = None
    signer: Signer | None = None

    def __bool__(self) -> bool:
        return self.meta is not None or self.signer is not None


class OptionKwargs(TypedDict, total=False):
    """The keyword forms of :class:`WriteOptions` and :class:`Provenance` every writer takes
    (``None``: not given)."""

    level: int | None
    block_size: int | None
    workers: int | None
    dedup: bool | None
    pack: bool | None
    index_compression: bool | None
    compat: Compat | None
    posix: bool | None
    skip_unsafe: bool | None
    skip_unreadable: bool | None
    fsync: bool | None
    meta: Any
    signer: Any


def option_names() -> tuple[str, ...]:
    """The :class:`WriteOptions` field names, in definition order."""
    return tuple(f.name for f in dataclasses.fields(WriteOptions))


def resolve(options: WriteOptions | None, provenance: Provenance | None = None, *,
            what: str = "write", **given: Any) -> tuple[WriteOptions, Provenance]:
    """``options`` (default ``WriteOptions()``) with every keyword of ``given`` that is not
    ``None`` applied, and ``provenance`` with ``meta=``/``signer=`` applied. An unknown
    keyword is refused (``what`` names the caller in the message)."""
    names = option_names()
    unknown = sorted(set(given) - set(names) - {"meta", "signer"})
    if unknown:
        raise TypeError(f"{what}() got unexpected keyword argument(s) {', '.join(unknown)}")
    for name in ("options", "provenance"):
        value = options if name == "options" else provenance
        wanted = WriteOptions if name == "options" else Provenance
        if value is not None and not isinstance(value, wanted):
            raise OptionError(f"{name}= takes a {wanted.__name__}, not "
                              f"{type(value).__name__}")
    changes = {k: v for k, v in given.items() if k in names and v is not None}
    base = options if options is not None else WriteOptions()
    out = dataclasses.replace(base, **changes) if changes else base
    prov = provenance if provenance is not None else Provenance()
    extra = {k: given[k] for k in ("meta", "signer") if given.get(k) is not None}
    if extra:
        prov = dataclasses.replace(prov, **extra)
    return out, prov
