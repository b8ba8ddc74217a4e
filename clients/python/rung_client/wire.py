"""The client's connections to the daemon: http.client's, over TCP or AF_UNIX, and for a
request whose answer is read whole, send_whole() and read_answer(), which write the request
in one write and read the answer without http.client.

Why not http.client for those: it writes the head and the body apart (the daemon woke for
each) and parses the answer's head with the email package, which cost the client ~0.2 ms of
a 2.5 ms exec on a quiet host (bench/README.md, "The API exec's client"). Streams (exec
with output as it comes, archives, process attach) still use http.client.
"""
from __future__ import annotations

import http.client
import select
import socket
from dataclasses import dataclass
from typing import Any

_HEAD_MAX = 65536  # the daemon's header block is 32 KiB at most (docs/configuration.md)


def quiet(sock: socket.socket) -> bool:
    """Nothing to read on an idle connection: its peer has neither closed it nor sent."""
    p = select.poll()
    p.register(sock, select.POLLIN)
    return not p.poll(0)


@dataclass
class Answer:
    """An HTTP answer read whole: its status, headers (lower-case names), body, and whether
    the connection ends with it."""

    status: int
    headers: dict[str, str]
    body: bytes
    will_close: bool

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)


def _check(what: str, value: str) -> str:
    """No control character may end a request line or a header early (request smuggling):
    refused as http.client refuses them."""
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"{what}: a control character (CR, LF or NUL) in {value!r}")
    return value


class _Reader:
    """An answer's bytes off one socket, buffered."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()

    def fill(self, what: str) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            if what == "head" and not self.buf:
                raise http.client.RemoteDisconnected(
                    "Remote end closed connection without response")
            raise http.client.IncompleteRead(bytes(self.buf))
        self.buf += chunk

    def line(self, limit: int = _HEAD_MAX) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                out = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return out
            if len(self.buf) > limit:
                raise http.client.LineTooLong("answer line")
            self.fill("body")

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self.fill("body")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def to_eof(self) -> bytes:
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                out = bytes(self.buf)
                self.buf.clear()
                return out
            self.buf += chunk


def _head(r: _Reader) -> tuple[str, int, dict[str, str]]:
    """One answer's status line and headers (1xx interim answers skipped)."""
    while True:
        while b"\r\n\r\n" not in r.buf:
            if len(r.buf) > _HEAD_MAX:
                raise http.client.LineTooLong("answer head")
            r.fill("head")
        status_line = r.line().decode("iso-8859-1")
        version, _, rest = status_line.partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise http.client.BadStatusLine(status_line)
        headers: dict[str, str] = {}
        while True:
            ln = r.line().decode("iso-8859-1")
            if not ln:
                break
            name, sep, value = ln.partition(":")
            if not sep or not name or name != name.strip():
                raise http.client.HTTPException(f"malformed header line {ln!r}")
            k, v = name.lower(), value.strip()
            headers[k] = f"{headers[k]}, {v}" if k in headers else v
        status = int(code)
        if not 100 <= status < 200 or status == 101:
            return version, status, headers


def _chunked(r: _Reader) -> bytes:
    out = bytearray()
    while True:
        size = r.line().split(b";", 1)[0].strip()
        try:
            n = int(size, 16)
        except ValueError:
            raise http.client.HTTPException(f"bad chunk size {size!r}") from None
        if n < 0:
            raise http.client.HTTPException(f"bad chunk size {size!r}")
        if n == 0:
            while r.line():  # trailers, up to the blank line
                pass
            return bytes(out)
        out += r.exactly(n)
        if r.exactly(2) != b"\r\n":
            raise http.client.HTTPException("a chunk not followed by CRLF")


class HTTPConnection(http.client.HTTPConnection):
    """http.client's, plus send_whole() and read_answer(): one request and its whole
    answer, without http.client's request and response objects."""

    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == self.default_port else f"{host}:{self.port}"

    def send_whole(self, method: str, path: str, body: bytes | None,
                   headers: dict[str, str]) -> None:
        """Send a request, in one write unless its body is past 64 KiB; read_answer() reads
        what comes back. Raises OSError (BrokenPipeError, ConnectionResetError) as the
        socket does, ValueError for a control character in the path, method or headers."""
        if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in path):
            raise ValueError(f"path: a control character or space in {path!r}")
        lines = [f"{_check('method', method)} {path} HTTP/1.1", f"Host: {self.host_header()}",
                 "Accept-Encoding: identity"]
        lines += [f"{_check('header', k)}: {_check(k, v)}" for k, v in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if self.sock is None:
            self.connect()
        if body and len(body) > 65536:
            self.sock.sendall(head)
            self.sock.sendall(body)
        else:
            self.sock.sendall(head + body if body else head)

    def read_answer(self, method: str) -> Answer:
        """The answer to the request send_whole() sent, read whole. Raises OSError
        (TimeoutError, ConnectionResetError) from the socket, http.client.RemoteDisconnected
        when the daemon closed before answering, another HTTPException for a malformed
        answer. A connection that ends with the answer is closed."""
        if self.sock is None:
            raise http.client.NotConnected("no request sent")
        r = _Reader(self.sock)
        version, status, hdrs = _head(r)
        conn_tokens = {t.strip().lower() for t in hdrs.get("connection", "").split(",")}
        close = "close" in conn_tokens or (version == "HTTP/1.0" and
                                           "keep-alive" not in conn_tokens)
        te = hdrs.get("transfer-encoding", "").lower()
        if method == "HEAD" or status in (204, 304):
            data = b""
        elif te:
            if te != "chunked":
                raise http.client.HTTPException(f"Transfer-Encoding {te!r} not understood")
            data = _chunked(r)
        elif "content-length" in hdrs:
            cl = hdrs["content-length"]
            if not cl.isdigit():
                raise http.client.HTTPException(f"bad Content-Length {cl!r}")
            data = r.exactly(int(cl))
        else:
            data, close = r.to_eof(), True
        if r.buf:  # bytes past the answer: the connection is out of step, not kept
            close = True
        if close:
            self.close()
        return Answer(status, hdrs, data, close)


class UnixHTTPConnection(HTTPConnection):
    """http.client over AF_UNIX."""

    def __init__(self, path: str, timeout: float | None = None, **kw: Any):
        super().__init__("localhost", timeout=timeout, **kw)
        self._path = path

    def host_header(self) -> str:
        return "localhost"

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s
