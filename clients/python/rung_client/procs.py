"""Background processes, terminals and shell sessions of a sandbox (docs/procs.md).

A process belongs to the sandbox, not to this client: it outlives the client that started it,
and another client reattaches with ``sb.process(handle)``. Its output is one byte sequence
(stdout and stderr chunks in order of arrival); an offset is a byte position in it, never
reset while the process lives, so ``p.logs(since=n)`` returns exactly what came after n.
"""
from __future__ import annotations

import asyncio
import base64
import json
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, Iterator, Mapping, Sequence

from .client import ExecResult, RungError, _ERRORS

if TYPE_CHECKING:
    from .client import Sandbox

__all__ = ["Process", "Pty", "Session", "ProcessInfo", "LogChunk", "Logs"]


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
        q = {"since": self.offset if since is None else since}
        if follow:
            q["follow"] = 1
        # a follow sees a heartbeat line every few seconds of silence: the backend's read
        # timeout holds
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


class Pty(Process):
    """A process on a terminal of the sandbox's own: resize() it (the program sees
    SIGWINCH); write() goes to the terminal, so "\\x03" is Ctrl-C."""

    def resize(self, rows: int, cols: int) -> None:
        self._backend._json("POST", self._path("resize"), {"rows": rows, "cols": cols})

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
          buffer_bytes: int | None = None) -> Process:
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
    d = sb.backend._json("POST", sb._path("procs"), body)
    return (Pty if pty else Process)(sb, d["handle"])


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
