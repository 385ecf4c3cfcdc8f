"""The compiled core's boundary (issue 33 §7): its failures arrive as ``ZnippyError``
subclasses naming the file, and a Rust panic never reaches a caller as a panic."""

from __future__ import annotations

import subprocess
import sys

import pytest

from znippy_sql import corelib, errors
from znippy_sql.native import guard, is_panic


def test_the_core_is_built_into_the_package() -> None:
    assert corelib.version() == "0.1.0"
    assert corelib._native.__file__.endswith((".so", ".pyd"))


def test_a_panic_is_a_panic_below_the_guard_and_a_znippy_error_above() -> None:
    with pytest.raises(BaseException) as raw:
        corelib._native._panic_for_test()
    assert is_panic(raw.value)
    with pytest.raises(errors.FormatError) as err:
        with guard(errors.FormatError, "reading the footer", path="a.znippy"):
            corelib._native._panic_for_test()
    assert str(err.value).startswith("a.znippy: reading the footer: the native library panicked")


@pytest.mark.parametrize("kind, cls", [("format", errors.FormatError),
                                       ("checksum", errors.ChecksumError),
                                       ("codec", errors.CodecError),
                                       ("notfound", errors.NotFoundError),
                                       ("io", errors.ZnippyError)])
def test_each_failure_kind_arrives_as_its_class(kind: str, cls: type[Exception]) -> None:
    with pytest.raises(cls) as err:
        corelib._native._raise_for_test(kind, "footer magic is wrong", "x/a.znippy")
    assert type(err.value) is cls
    assert str(err.value) == "x/a.znippy: footer magic is wrong"
    assert err.value.path == "x/a.znippy"  # type: ignore[attr-defined]


def test_a_panic_in_a_child_process_prints_no_rust_backtrace() -> None:
    """What a user would see: the CLI's one line, never pyo3's panic text on stderr."""
    code = ("from znippy_sql import corelib, errors\n"
            "from znippy_sql.native import guard\n"
            "try:\n"
            "    with guard(errors.ZnippyError, 'x'):\n"
            "        corelib._native._panic_for_test()\n"
            "except errors.ZnippyError as e:\n"
            "    print('caught', type(e).__name__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "caught ZnippyError", done
    assert "Traceback" not in done.stderr
