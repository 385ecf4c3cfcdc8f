"""One remote object, read by byte ranges: ``obstore`` first, ``fsspec`` for other schemes.

Every reply is checked before it is data: the range is the one asked for, the body has its
length, and the object is the version first seen (each GET carries ``If-Match`` with the
ETag of the first reply, and S3 versions are pinned when the store has them), so a changed
object fails with :class:`RemoteError` instead of mixing bytes of two versions. Failures of
the store become one :class:`RemoteError` each, naming the URL (never credentials).
"""

from __future__ import annotations

import os
import queue
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..errors import RemoteError
from ..native import PASS, describe
from .options import scrubber
from .url import Target

if TYPE_CHECKING:  # obstore's typed dicts exist only in its stubs
    from obstore import Bytes, GetOptions, GetResult, ObjectMeta
    from obstore.store import ObjectStore
    from typing_extensions import Buffer


@dataclass(frozen=True)
class Meta:
    """What identifies one version of the object."""

    size: int
    etag: str | None
    version: str | None


@dataclass(frozen=True)
class Tail:
    meta: Meta
    start: int      # offset of data[0]
    data: Buffer    # bytes-like
    #: more index ranges held (from the tail cache): ``(start, buffer)`` each
    more: tuple[tuple[int, Buffer], ...] = ()


class RemoteObject(Protocol):
    url: str
    requests: int   #: requests sent (retries inside the client not counted)
    fetched: int    #: body bytes received

    def tail(self, n: int, *, unless: Meta | None = None) -> Tail | None:
        """The last ``n`` bytes (all of a smaller object); None if ``unless`` is still the
        current version (one conditional request)."""

    def get(self, start: int, end: int, meta: Meta) -> Buffer:
        """Bytes ``[start, end)`` of version ``meta``."""

    def put_file(self, path: str) -> None:
        """Upload a local file as the object (multipart when large)."""


_T = TypeVar("_T")


class Daemons:
    """Worker threads for requests, daemonic: a request stuck on a stalled server holds up
    neither Ctrl-C (the caller waits on a future, which a signal interrupts) nor the exit of
    the process (``ThreadPoolExecutor`` joins its threads at exit)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._started = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], _T]) -> Future[_T]:
        with self._lock:
            if self._started < self.n:
                self._started += 1
                threading.Thread(target=self._work, name="znippy-remote", daemon=True).start()
        fut: Future[_T] = Future()
        self._jobs.put((fut, fn))
        return fut

    def _work(self) -> None:
        while True:
            fut, fn = self._jobs.get()
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 (handed to the waiting caller)
                fut.set_exception(exc)


#: the parallel requests of a prefetch, and the main thread's own, run on these
DAEMONS = Daemons(4)


def interruptible(fn: Callable[[], _T]) -> _T:
    """``fn()``, run by a daemon worker when called from the main thread, so that Ctrl-C
    interrupts the wait (a Rust call holding the thread would not see it until it returns)."""
    if threading.current_thread() is not threading.main_thread():
        return fn()
    return DAEMONS.submit(fn).result()


def connect(target: Target) -> RemoteObject:
    if target.backend == "obstore":
        return ObstoreObject(target)
    return FsspecObject(target)


# -- obstore ---------------------------------------------------------------------------------
_STORES: dict[tuple[Any, ...], ObjectStore] = {}
_ENV = ("AWS_", "GOOGLE_", "AZURE_")  # what the stores read from the environment
_STORES_LOCK = threading.Lock()


class ObstoreObject:
    def __init__(self, target: Target) -> None:
        self.url = target.url
        self.target = target
        self.key = target.key
        self.requests = 0
        self.fetched = 0
        self.scrub = target.scrub
        self.store = _store(target)

    def tail(self, n: int, *, unless: Meta | None = None) -> Tail | None:
        from obstore.exceptions import NotModifiedError

        options: GetOptions = {"range": {"suffix": n}}
        if unless is not None and unless.etag:
            options["if_none_match"] = unless.etag
        self.requests += 1
        try:
            result, data = interruptible(lambda: _fetch(self.store, self.key, options))
        except NotModifiedError:
            return None
        except BaseException as exc:  # (a panic is a BaseException) worded below
            raise remote_error(exc, self.url, "reading the tail", self.scrub) from None
        meta = _meta(result.meta)
        start, end = result.range
        self.fetched += len(data)
        if end != meta.size or len(data) != end - start or end - start < min(n, meta.size):
            raise RemoteError(f"asked for the last {n} bytes, got bytes [{start}, {end}) "
                              f"({len(data)} received) of {meta.size}: the server does not "
                              f"answer ranges as asked", path=self.url)
        return Tail(meta, start, data)

    def get(self, start: int, end: int, meta: Meta) -> Bytes:
        options: GetOptions = {"range": (start, end)}
        if meta.etag:
            options["if_match"] = meta.etag
        if meta.version:
            options["version"] = meta.version
        self.requests += 1
        try:
            result, data = interruptible(lambda: _fetch(self.store, self.key, options))
        except BaseException as exc:  # noqa: BLE001
            raise remote_error(exc, self.url, f"reading bytes [{start}, {end})",
                               self.scrub) from None
        self.fetched += len(data)
        got = _meta(result.meta)
        if meta.etag and got.etag and got.etag != meta.etag:
            raise changed(self.url, meta.etag, got.etag)
        if tuple(result.range) != (start, end) or len(data) != end - start:
            raise RemoteError(f"asked for bytes [{start}, {end}), got "
                              f"[{result.range[0]}, {result.range[1]}) with {len(data)} "
                              f"bytes: a short read or a server ignoring Range", path=self.url)
        return data

    def put_file(self, path: str) -> None:
        import obstore

        self.requests += 1
        try:
            with open(path, "rb") as fh:
                interruptible(lambda: obstore.put(self.store, self.key, fh,
                                                  chunk_size=8 << 20, max_concurrency=4))
        except RemoteError:
            raise
        except BaseException as exc:  # noqa: BLE001
            raise remote_error(exc, self.url, "uploading", self.scrub) from None


def _store(target: Target) -> ObjectStore:
    """One store per root, options and credential environment in this process (its
    connections are reused)."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV)))
    key = (target.root, tuple(sorted((k, str(v)) for k, v in target.config.items())),
           tuple(sorted(target.client.items())), env)
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is None:
            try:
                from obstore.store import from_url
            except ImportError:  # pragma: no cover - a dependency
                raise RemoteError("reading remote archives needs obstore (pip install obstore)",
                                  path=target.url) from None
            try:
                # the options are the user's (obstore refuses an unknown key at run time) and
                # the scheme, known only then, picks the overload: hence the ignore
                store = from_url(  # type: ignore[call-overload]  # options: see above
                    target.root, config=target.config or None,
                    client_options=target.client_options(), retry_config=target.retry_config())
            except BaseException as exc:  # noqa: BLE001 (a panic too)
                raise remote_error(exc, target.url, "setting up the store",
                                   target.scrub) from None
            _STORES[key] = store
        return store


def _fetch(store: ObjectStore, key: str, options: GetOptions) -> tuple[GetResult, Bytes]:
    import obstore

    result = obstore.get(store, key, options=options)
    return result, result.bytes()


def _meta(meta: ObjectMeta) -> Meta:
    return Meta(int(meta["size"]), meta.get("e_tag"), meta.get("version"))


# -- fsspec ----------------------------------------------------------------------------------
class FsspecObject:
    """An object of any fsspec filesystem: ``info`` for its size and ETag, ``cat_file`` for
    ranges. fsspec has no conditional reads, so a change is caught by comparing the ETag (or
    modification time) of ``info`` once per batch of reads, not by the server."""

    def __init__(self, target: Target) -> None:
        self.url = target.url
        self.requests = 0
        self.fetched = 0
        self.scrub = target.scrub
        try:
            import fsspec
        except ImportError:
            raise RemoteError(f"no client for {target.scheme}:// (pip install fsspec)",
                              path=target.url) from None
        try:
            self.fs, self.path = fsspec.core.url_to_fs(target.key, **target.config)
        except (ImportError, ValueError) as exc:
            raise RemoteError(f"no reader for scheme {target.scheme}://: "
                              f"{describe(exc, scrub=self.scrub)}", path=target.url) from None
        except BaseException as exc:  # noqa: BLE001 (connecting, in some filesystems)
            raise remote_error(exc, self.url, "connecting", self.scrub) from None

    def _info(self) -> Meta:
        self.requests += 1
        try:
            info = self.fs.info(self.path)
        except FileNotFoundError:
            raise RemoteError("no such object", path=self.url) from None
        except PermissionError:
            raise RemoteError("access denied", path=self.url) from None
        except BaseException as exc:  # noqa: BLE001
            raise remote_error(exc, self.url, "looking up the object", self.scrub) from None
        tag = info.get("ETag") or info.get("etag") or info.get("mtime") or info.get("created")
        return Meta(int(info["size"]), None if tag is None else str(tag), None)

    def tail(self, n: int, *, unless: Meta | None = None) -> Tail | None:
        meta = self._info()
        if unless is not None and meta == unless and meta.etag is not None:
            return None
        start = max(meta.size - n, 0)
        data = self._cat(start, meta.size)
        return Tail(meta, start, data)

    def get(self, start: int, end: int, meta: Meta) -> bytes:
        data = self._cat(start, end)
        now = self._info()
        if now != meta:
            raise changed(self.url, meta.etag, now.etag)
        return data

    def _cat(self, start: int, end: int) -> bytes:
        self.requests += 1
        try:
            data = self.fs.cat_file(self.path, start=start, end=end)
        except BaseException as exc:  # noqa: BLE001
            raise remote_error(exc, self.url, f"reading bytes [{start}, {end})",
                               self.scrub) from None
        self.fetched += len(data)
        if len(data) != end - start:
            raise RemoteError(f"asked for bytes [{start}, {end}), got {len(data)} bytes",
                              path=self.url)
        return bytes(data)

    def put_file(self, path: str) -> None:
        self.requests += 1
        try:
            self.fs.put_file(path, self.path)
        except BaseException as exc:  # noqa: BLE001
            raise remote_error(exc, self.url, "uploading", self.scrub) from None


# -- errors ----------------------------------------------------------------------------------
_QUERY = re.compile(r"\?[^\s\"']*")


_TRIES = re.compile(r"after (\d+) retries")
_WRONG_RANGE = re.compile(r"Requested (\d+\.\.\d+), got (\d+\.\.\d+)")
_STATUS = re.compile(r"status code: (\d{3}[^:]*)")
_TIMEOUT = re.compile(r"TimedOut|timed out|operation timed out|deadline has elapsed", re.I)
_CONNECT = re.compile(r"ConnectionRefused|ConnectionReset|connection closed|tcp connect error|"
                      r"error sending request|dns error|BrokenPipe|IncompleteMessage", re.I)


def _why(text: str) -> str:
    """``after 3 retries: 503 Service Unavailable`` from an object_store error text."""
    tries = _TRIES.search(text)
    status = _STATUS.search(text)
    said = f" after {tries.group(1)} retries" if tries else ""
    if status:
        return f"{said}: the server answered {status.group(1).strip()}"
    if _TIMEOUT.search(text):
        return f"{said}: timed out (storage options timeout, connect_timeout)"
    if _CONNECT.search(text):
        return f"{said}: the connection failed or was dropped"
    return ""


def changed(url: str, was: str | None, now: str | None) -> RemoteError:
    return RemoteError(f"the object changed while it was read (ETag {was} when opened, now "
                       f"{now}): open it again", path=url)


def remote_error(exc: BaseException, url: str, doing: str,
                 scrub: Callable[[str], str] | None = None) -> RemoteError:
    """A store failure (a panic too) as a one-line :class:`RemoteError` that says which kind
    it is; an interrupt is raised again. ``scrub`` removes the secrets of the options."""
    if isinstance(exc, PASS):
        raise exc
    from obstore import exceptions as ox

    text = str(exc) if scrub is None else scrub(str(exc))
    first = _QUERY.sub("", describe(exc, scrub=scrub))[:240]
    if isinstance(exc, ox.NotFoundError) or isinstance(exc, FileNotFoundError):
        if "NoSuchBucket" in text or "ContainerNotFound" in text:
            return RemoteError("no such bucket", path=url)
        return RemoteError("no such object", path=url)
    if isinstance(exc, (ox.PermissionDeniedError, ox.UnauthenticatedError, PermissionError)):
        return RemoteError("access denied (check the credentials in the environment or "
                           "the storage options)", path=url)
    if isinstance(exc, ox.PreconditionError):
        return RemoteError("the object changed while it was read (its ETag no longer "
                           "matches): open it again", path=url)
    if isinstance(exc, ox.UnknownConfigurationKeyError):
        return RemoteError(f"unknown storage option: {first}", path=url)
    if isinstance(exc, ox.NotSupportedError) and "range" in text.lower():
        return RemoteError(f"{doing}: the server does not answer Range requests (it sent "
                           f"the whole object)", path=url)
    wrong = _WRONG_RANGE.search(text)
    if wrong:
        return RemoteError(f"{doing}: the server answered another range than asked "
                           f"(asked {wrong.group(1)}, got {wrong.group(2)})", path=url)
    if "non-partial" in text.lower() or "NotPartial" in text or "Content-Range" in text:
        return RemoteError(f"{doing}: the server ignored the Range header (it sent the "
                           f"whole object)", path=url)
    if isinstance(exc, (ox.GenericError, ox.BaseError, OSError, TimeoutError)):
        return RemoteError(f"{doing} failed{_why(text) or ': ' + first}", path=url)
    if isinstance(exc, ConnectionError) or _CONNECT.search(text):
        return RemoteError(f"{doing} failed: the connection failed ({first})", path=url)
    return RemoteError(f"{doing} failed: {type(exc).__name__}: {first}", path=url)


def list_keys(target: Target, prefix: str | None) -> list[str]:
    """The keys under ``prefix`` in ``target``'s store (its options and credentials): what a
    URL pattern of the engines (``s3://bucket/dumps/*.znippy``) matches against."""
    import obstore

    try:
        return [m["path"] for page in obstore.list(_store(target), prefix=prefix or None)
                for m in page]
    except RemoteError:
        raise
    except Exception as exc:  # noqa: BLE001  (the store's own errors, worded once)
        raise remote_error(exc, target.url, "listing") from None
