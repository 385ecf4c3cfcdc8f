"""Counts and byte sizes as words, for every message and summary line (one spelling)."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``1 file``, ``2 files``: a count and its noun."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def human(n: float) -> str:
    """A byte count in binary units: ``512 B``, ``1.5 KiB``, ``3.0 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover
