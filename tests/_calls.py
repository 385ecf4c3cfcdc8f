"""Python function calls counted, not timed (issue 33): ``sys.setprofile`` and
``threading.setprofile`` around one call, so threads the call starts are counted too. A count
cannot be noisy, which is why the native core's "calls a file" targets are tests. The bench
scripts import this module too (one definition of what "a Python call" is)."""

from __future__ import annotations

import collections
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")


def python_calls(fn: Callable[[], T], events: tuple[str, ...] = ("call",)
                 ) -> tuple[T, collections.Counter[str]]:
    """``fn()``'s result and its calls by ``file:function``. ``events`` ``("call",)`` counts
    Python functions; adding ``"c_call"`` counts builtins called from Python too (a hasher
    built and asked for its digest)."""
    calls: collections.Counter[str] = collections.Counter()

    def count(frame: FrameType, event: str, arg: Any) -> None:
        if event in events:
            calls[f"{frame.f_code.co_filename}:{frame.f_code.co_name}"] += 1

    sys.setprofile(count)
    threading.setprofile(count)
    try:
        result = fn()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return result, calls
