"""Background processes, terminals and shell sessions of a sandbox (docs/procs.md).

A process belongs to the sandbox, not to this client: it outlives the client that started it,
and another client reattaches with ``sb.process(handle)``. Its output is one byte sequence
(stdout and stderr chunks in order of arrival); an offset is a byte position in it, never
reset while the process lives, so ``p.logs(since=n)`` returns exactly what came after n.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import socket
import struct
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, Iterator, Mapping, Sequence

from .client import ExecResult, RungError, _ERRORS

if TYPE_CHECKING:
    from .client import Sandbox

__all__ = ["Process", "Pty", "Session", "ProcessInfo", "LogChunk", "Logs", "Attach"]

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


@dataclass
class ProcessInfo:
    handle: str
    name: str
    argv: list[str]
    pty: bool
    session: bool
    state: str  # "running" or "exited"
    exit_code: int | None
    signal: int | None
    pid: int
    started_ms: int
    end_offset: int
    dropped_out: int = 0
    dropped_err: int = 0

    @property
    def running(self) -> bool:
        return self.state == "running"

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ProcessInfo":
        return cls(handle=d["handle"], name=d.get("name", ""), argv=list(d.get("argv", [])),
                   pty=bool(d.get("pty")), session=bool(d.get("session")), state=d["state"],
                   exit_code=d.get("exit_code"), signal=d.get("signal"), pid=d.get("pid", 0),
                   started_ms=d.get("started_ms", 0), end_offset=d.get("end_offset", 0),
                   dropped_out=d.get("dropped_out", 0), dropped_err=d.get("dropped_err", 0))


@dataclass
class LogChunk:
    stream: str  # "stdout" or "stderr"
    offset: int  # of its first byte in the process's log
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


@dataclass
class Logs:
    """What logs() returns: the chunks, where to resume (end_offset), what fell out of the
    replay buffer (dropped) and whether the process had exited."""
    chunks: list[LogChunk] = field(default_factory=list)
    end_offset: int = 0
    dropped: int = 0
    exited: bool = False

    @property
    def data(self) -> bytes:
        return b"".join(c.data for c in self.chunks)

    @property
    def stdout(self) -> bytes:
        return b"".join(c.data for c in self.chunks if c.stream == "stdout")

    @property
    def stderr(self) -> bytes:
        return b"".join(c.data for c in self.chunks if c.stream == "stderr")


def _chunk(msg: Mapping[str, Any]) -> LogChunk:
    data = base64.b64decode(msg["data_b64"]) if "data_b64" in msg else msg["data"].encode()
    return LogChunk(msg["type"], int(msg.get("offset", 0)), data)


class Process:
    """A background process of a sandbox, by handle. Every method is one request: the object
    holds nothing but the handle and the offset reached by follow()/logs()."""

    def __init__(self, sandbox: "Sandbox", handle: str):
        self.sandbox = sandbox
        self.handle = handle
        self.offset = 0  # where the next logs()/follow() without since= resumes
        self._pending: Any = None  # start(follow=True)'s open stream

    def __repr__(self) -> str:
        return f"{type(self).__name__}(handle={self.handle!r}, sandbox={self.sandbox.id!r})"

    def _path(self, sub: str = "") -> str:
        h = urllib.parse.quote(self.handle, safe="")
        return self.sandbox._path(f"procs/{h}" + (f"/{sub}" if sub else ""))

    @property
    def _backend(self):
        return self.sandbox.backend

    def info(self) -> ProcessInfo:
        return ProcessInfo.from_json(self._backend._json("GET", self._path()))

    def _logs_stream(self, since: int | None, follow: bool) -> Iterator[Any]:
        pending, self._pending = getattr(self, "_pending", None), None
        if pending is not None and follow and not since:
            conn, resp = pending  # start(follow=True)'s own stream, from offset 0
        else:
            if pending is not None:
                pending[0].close()
            q = {"since": self.offset if since is None else since}
            if follow:
                q["follow"] = 1
            # a follow sees a heartbeat line every few seconds of silence: the backend's
            # read timeout holds
            conn, resp = self._backend._open("GET", self._path("logs") + "?" +
                                             urllib.parse.urlencode(q))
        try:
            while True:
                line = resp.readline()
                if not line:
                    raise RungError(200, "stream_truncated",
                                    "the log stream ended without an end line")
                msg = json.loads(line)
                t = msg.get("type")
                if t in ("stdout", "stderr"):
                    c = _chunk(msg)
                    self.offset = c.offset + len(c.data)
                    yield c
                elif t == "end":
                    self.offset = int(msg["end_offset"])
                    yield msg
                    return
                elif t == "error":
                    e = msg["error"]
                    raise _ERRORS.get(e["code"], RungError)(200, e["code"], e["message"])
        finally:
            conn.close()

    def logs(self, since: int = 0) -> Logs:
        """Everything buffered from byte offset since (0: from the start) up to now."""
        out = Logs()
        for m in self._logs_stream(since, False):
            if isinstance(m, LogChunk):
                out.chunks.append(m)
            else:
                out.end_offset, out.dropped = int(m["end_offset"]), int(m.get("dropped", 0))
                out.exited = bool(m.get("exited"))
        return out

    def follow(self, since: int | None = None) -> Iterator[LogChunk]:
        """Chunks from since (default: where the last logs()/follow() ended) as they come,
        until the process exits. Breaking out of the loop leaves the process running; a
        later follow() resumes at self.offset with nothing lost or repeated."""
        for m in self._logs_stream(since, True):
            if isinstance(m, LogChunk):
                yield m

    def write(self, data: bytes | str) -> None:
        """Bytes to its stdin (its terminal with pty)."""
        if isinstance(data, str):
            data = data.encode()
        self._backend._request("POST", self._path("stdin"), raw_body=data)

    def close_stdin(self) -> None:
        """EOF on its stdin (a terminal's EOF character with pty)."""
        self._backend._request("POST", self._path("stdin") + "?eof=1", raw_body=b"")

    def signal(self, sig: str | int) -> None:
        """A signal, by name ("TERM", "SIGINT") or number, to its process group."""
        self._backend._json("POST", self._path("signal"), {"signal": sig})

    def wait(self, timeout: float | None = None) -> ProcessInfo | None:
        """Its info once it exited, or None if it still runs after timeout seconds
        (None: wait as long as the daemon allows, a day)."""
        body = {} if timeout is None else {"timeout": max(timeout, 0.001)}
        d = self._backend._json("POST", self._path("wait"), body,
                                timeout=(timeout if timeout is not None else 86400.0))
        return ProcessInfo.from_json(d) if d.get("exited") else None

    def kill(self) -> None:
        """Kill it and everything it started (daemons included); the handle is forgotten."""
        self._backend._json("DELETE", self._path())

    # asyncio: the blocking calls run in a worker thread.
    async def info_async(self) -> ProcessInfo:
        return await asyncio.to_thread(self.info)

    async def logs_async(self, since: int = 0) -> Logs:
        return await asyncio.to_thread(self.logs, since)

    async def follow_async(self, since: int | None = None) -> AsyncIterator[LogChunk]:
        it = self.follow(since)
        end = object()
        while True:
            c = await asyncio.to_thread(next, it, end)
            if c is end:
                return
            yield c

    async def write_async(self, data: bytes | str) -> None:
        await asyncio.to_thread(self.write, data)

    async def close_stdin_async(self) -> None:
        await asyncio.to_thread(self.close_stdin)

    async def signal_async(self, sig: str | int) -> None:
        await asyncio.to_thread(self.signal, sig)

    async def wait_async(self, timeout: float | None = None) -> ProcessInfo | None:
        return await asyncio.to_thread(self.wait, timeout)

    async def kill_async(self) -> None:
        await asyncio.to_thread(self.kill)


class Attach:
    """An interactive attach over the daemon's WebSocket (server/README.md): send() bytes
    to the process, recv() its output (the replay from since first), resize() its terminal,
    close() to detach (the process runs on). recv() returns None once the process exited
    (then .exit is its ProcessInfo) or the connection closed."""

    def __init__(self, proc: "Process", since: int = 0, timeout: float | None = 30.0):
        b = proc._backend
        if b.socket_path is not None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sock.settimeout(timeout)
            self._sock.connect(b.socket_path)
        else:
            self._sock = socket.create_connection((b._host, b._port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        head = [f"GET {proc._path('attach')}?since={int(since)} HTTP/1.1", "Host: rung",
                "Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key}",
                "Sec-WebSocket-Version: 13"]
        if b.token:
            head.append(f"Authorization: Bearer {b.token}")
        self._sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        self._buf = b""
        while b"\r\n\r\n" not in self._buf:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise RungError(0, "closed", "attach: the daemon closed the connection")
            self._buf += chunk
        resp, self._buf = self._buf.split(b"\r\n\r\n", 1)
        status = int(resp.split(b" ", 2)[1])
        if status != 101:
            from .client import _raise_for
            body = self._buf
            try:
                n = int([ln.split(b":", 1)[1] for ln in resp.split(b"\r\n")
                         if ln.lower().startswith(b"content-length:")][0])
                while len(body) < n:
                    body += self._sock.recv(65536) or b"x" * n
            except (IndexError, ValueError):
                pass
            self._sock.close()
            _raise_for(status, body)
        want = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest())
        if b"sec-websocket-accept: " + want.lower() not in resp.lower():
            self._sock.close()
            raise RungError(101, "protocol", "attach: wrong Sec-WebSocket-Accept")
        self.exit: ProcessInfo | None = None
        self.closed = False

    def _send(self, op: int, data: bytes) -> None:
        mask = os.urandom(4)
        n = len(data)
        hdr = bytes([0x80 | op]) + (bytes([0x80 | n]) if n < 126 else
                                    bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                    bytes([0x80 | 127]) + struct.pack(">Q", n))
        body = bytes(b ^ mask[i & 3] for i, b in enumerate(data))
        self._sock.sendall(hdr + mask + body)

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise EOFError
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def send(self, data: bytes | str) -> None:
        self._send(2, data.encode() if isinstance(data, str) else data)

    def resize(self, rows: int, cols: int) -> None:
        self._send(1, json.dumps({"type": "resize", "rows": rows, "cols": cols}).encode())

    def recv(self, timeout: float | None = None) -> bytes | None:
        """The next output bytes; None when the process exited or the connection closed.
        socket.timeout when nothing came within timeout seconds."""
        self._sock.settimeout(timeout)
        while not self.closed:
            try:
                h = self._read(2)
                n = h[1] & 0x7F
                if n == 126:
                    n = struct.unpack(">H", self._read(2))[0]
                elif n == 127:
                    n = struct.unpack(">Q", self._read(8))[0]
                data, op = self._read(n), h[0] & 0x0F
            except EOFError:
                self.closed = True
                break
            if op in (0, 2):
                return data
            if op == 1:
                msg = json.loads(data)
                if msg.get("type") == "exit":
                    self.exit = ProcessInfo.from_json(msg)
                elif msg.get("type") == "error":
                    raise RungError(0, "attach", msg.get("message", "attach failed"))
            elif op == 9:
                self._send(10, data)
            elif op == 8:
                self.close()
        return None

    def close(self) -> None:
        """Detach (the process runs on)."""
        if not self.closed:
            self.closed = True
            try:
                self._send(8, struct.pack(">H", 1000))
            except OSError:
                pass
        self._sock.close()

    def __enter__(self) -> "Attach":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Pty(Process):
    """A process on a terminal of the sandbox's own: resize() it (the program sees
    SIGWINCH); write() goes to the terminal, so "\\x03" is Ctrl-C; attach() for an
    interactive byte stream both ways."""

    def resize(self, rows: int, cols: int) -> None:
        self._backend._json("POST", self._path("resize"), {"rows": rows, "cols": cols})

    def attach(self, since: int = 0) -> Attach:
        """Interactive: the replay from since, then output as it comes, over one WebSocket."""
        return Attach(self, since)

    async def resize_async(self, rows: int, cols: int) -> None:
        await asyncio.to_thread(self.resize, rows, cols)


class Session(Process):
    """A persistent shell: cd, export and functions carry over between run()s. Where a run
    ends and its exit code travel on a side channel, never in its output."""

    def run(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run one shell command string; stdout and stderr separately. At timeout its job is
        interrupted (SIGINT, then SIGKILL) and result.timed_out is set."""
        body: dict[str, Any] = {"command": command}
        if timeout is not None:
            body["timeout"] = timeout
        h = urllib.parse.quote(self.handle, safe="")
        return ExecResult.from_json(self._backend._json(
            "POST", self.sandbox._path(f"sessions/{h}/run"), body, timeout=timeout))

    async def run_async(self, command: str, timeout: float | None = None) -> ExecResult:
        return await asyncio.to_thread(self.run, command, timeout)


def start(sb: "Sandbox", argv: Sequence[str], pty: bool = False, name: str | None = None,
          cwd: str | None = None, env: Mapping[str, str] | None = None,
          rows: int | None = None, cols: int | None = None,
          buffer_bytes: int | None = None, follow: bool = False) -> Process:
    if isinstance(argv, str):
        raise TypeError("argv must be a list of strings, not a command string")
    body: dict[str, Any] = {"argv": list(argv)}
    for k, v in (("name", name), ("cwd", cwd), ("rows", rows), ("cols", cols),
                 ("buffer_bytes", buffer_bytes)):
        if v is not None:
            body[k] = v
    if env is not None:
        body["env"] = dict(env)
    if pty:
        body["pty"] = True
    cls = Pty if pty else Process
    if not follow:
        return cls(sb, sb.backend._json("POST", sb._path("procs"), body)["handle"])
    # one request: {"type":"started"} then its output, which the first follow() reads
    conn, resp = sb.backend._open("POST", sb._path("procs"), dict(body, follow=True))
    try:
        first = json.loads(resp.readline())
        if first.get("type") != "started":
            raise RungError(200, "protocol", f"start: expected a started line, got {first}")
    except BaseException:
        conn.close()
        raise
    p = cls(sb, first["handle"])
    p._pending = (conn, resp)
    return p


def shell(sb: "Sandbox", shell_path: str | None = None, cwd: str | None = None,
          env: Mapping[str, str] | None = None) -> Session:
    body: dict[str, Any] = {}
    if shell_path is not None:
        body["shell"] = shell_path
    if cwd is not None:
        body["cwd"] = cwd
    if env is not None:
        body["env"] = dict(env)
    d = sb.backend._json("POST", sb._path("sessions"), body)
    return Session(sb, d["handle"])


def processes(sb: "Sandbox") -> list[ProcessInfo]:
    return [ProcessInfo.from_json(p) for p in sb.backend._json("GET", sb._path("procs"))["procs"]]


def process(sb: "Sandbox", handle: str) -> Process:
    """Reattach: the process of this handle (NotFound if the sandbox has none such)."""
    i = ProcessInfo.from_json(sb.backend._json(
        "GET", sb._path("procs/" + urllib.parse.quote(handle, safe=""))))
    cls = Session if i.session else Pty if i.pty else Process
    p = cls(sb, i.handle)
    return p
