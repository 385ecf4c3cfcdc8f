"""The write options: one frozen :class:`WriteOptions`, one :class:`Provenance`, one mapping.

Every writer (``write_archive``, ``ArchiveWriter``, ``append_archive``, ``compact``, the store
and its seal, the CLI) takes ``options=WriteOptions(...)`` and ``provenance=Provenance(...)``.
The keyword arguments they took before (``level=``, ``meta=``, ...) are still accepted: each
writer hands them to :func:`resolve`, the one place they become options. A keyword left at
``None`` is "not given": the options' value (or, for an append, the archive's own) stands.

The defaults are the :class:`WriteOptions` fields (``write/ingest.py``) and nowhere else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ..errors import OptionError
from .compat import Compat
from .ingest import WriteOptions

if TYPE_CHECKING:
    from ..provenance.meta import Meta
    from ..provenance.sign import Signer

__all__ = ["OptionKwargs", "Provenance", "WriteOptions", "option_names", "resolve"]


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
