"""rung_client: a standard-library-only client for `rung serve` (Python 3.11+).

The sandbox key's scope is bound to the token by the daemon; the client names only the
thread and agent (sent as X-Rung-Thread / X-Rung-Agent headers), never a scope.
"""
from __future__ import annotations

import asyncio
import base64
import enum
import http.client
import inspect
import json
import os
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from .wire import Answer, quiet
from .wire import HTTPConnection as _HTTPConnection
from .wire import UnixHTTPConnection as _UnixHTTPConnection

if TYPE_CHECKING:
    from .procs import Process, ProcessInfo, Session

__all__ = [
    "Isolation", "SandboxSpec", "SandboxKey", "ExecResult", "ExecChunk", "ExecStream",
    "Sandbox", "SandboxBackend", "RungError", "Unauthorized", "NotFound", "BadRequest",
    "Forbidden", "Conflict", "PayloadTooLarge", "TooManyRequests",
]


class Isolation(str, enum.Enum):
    """The isolation rungs, weakest first."""
    PROCESS = "process"
    CONTAINER = "container"
    VM = "vm"


@dataclass
class SandboxSpec:
    """What to run: the daemon parses this strictly (unknown fields are errors).

    Fields left as None are omitted and get the runtime's defaults. An empty or missing
    egress_allow means no network at all.
    """
    kind: str
    image: str | None = None
    egress_allow: Sequence[str] | None = None
    work_dir: str | None = None
    requires: Sequence[str] | None = None
    isolation: Isolation | str | None = None
    limits: Mapping[str, Any] | None = None
    idle_suspend_s: int | None = None
    ttl_s: int | None = None
    env: Any = None
    from_snapshot: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for name in ("image", "work_dir", "idle_suspend_s", "ttl_s", "env", "from_snapshot"):
            v = getattr(self, name)
            if v is not None:
                out[name] = v
        if self.egress_allow is not None:
            out["egress_allow"] = list(self.egress_allow)
        if self.requires is not None:
            out["requires"] = list(self.requires)
        if self.isolation is not None:
            out["isolation"] = Isolation(self.isolation).value
        if self.limits is not None:
            out["limits"] = dict(self.limits)
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class SandboxKey:
    """The host-side identity of a sandbox, minus the scope (which the token decides)."""
    thread: str
    agent: str


@dataclass
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    signal: int = 0
    truncated: bool = False
    oom: bool = False
    duration_ms: float = 0.0
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], out: bytes | None = None,
                  err: bytes | None = None) -> "ExecResult":
        def raw(key: str) -> bytes:
            # One encoding per stream: JSON text, or (not UTF-8, or control-heavy) base64.
            if key + "_b64" in d:
                return base64.b64decode(d[key + "_b64"])
            return d.get(key, "").encode()
        ob = raw("stdout") if out is None else out
        eb = raw("stderr") if err is None else err
        return cls(exit_code=d["exit_code"], signal=d.get("signal", 0),
                   stdout=ob.decode("utf-8", "replace"), stderr=eb.decode("utf-8", "replace"),
                   timed_out=d.get("timed_out", False), truncated=d.get("truncated", False),
                   oom=d.get("oom", False), duration_ms=d.get("duration_ms", 0.0),
                   stdout_bytes=ob, stderr_bytes=eb)


@dataclass
class ExecChunk:
    stream: str  # "stdout" or "stderr"
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


class RungError(Exception):
    """An error answer from the daemon: .status (HTTP), .code (stable string), .message, and
    .reason: the stable name of the underlying error where the daemon gives one ("not_found",
    "not_a_directory", "is_a_directory", "permission_denied", "exists", "not_empty", ...)."""

    def __init__(self, status: int, code: str, message: str, reason: str | None = None):
        super().__init__(f"{code} ({status}): {message}")
        self.status, self.code, self.message = status, code, message
        self.reason = reason


@dataclass
class FileEntry:
    """One file as stat/list_dir report it (a symlink is never followed: kind "symlink")."""
    name: str  # list_dir: the entry's name; stat: the path
    kind: str  # "file", "dir", "symlink", "fifo", "socket", "char", "block", "other"
    mode: int  # permission bits
    size: int
    mtime_ns: int
    uid: int
    gid: int
    target: str | None = None  # a symlink's target

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FileEntry":
        return cls(name=d["name"], kind=d["kind"], mode=d["mode"], size=d["size"],
                   mtime_ns=d["mtime_ns"], uid=d["uid"], gid=d["gid"], target=d.get("target"))


class Unauthorized(RungError): pass
class Forbidden(RungError): pass
class NotFound(RungError): pass
class BadRequest(RungError): pass
class Conflict(RungError): pass
class PayloadTooLarge(RungError): pass
class TooManyRequests(RungError): pass  # the scope is at its limit (429): retry later


_ERRORS = {"unauthorized": Unauthorized, "forbidden": Forbidden, "not_found": NotFound,
           "bad_request": BadRequest, "conflict": Conflict, "payload_too_large": PayloadTooLarge,
           "too_many_requests": TooManyRequests}


def _raise_for(status: int, body: bytes) -> None:
    try:
        e = json.loads(body)["error"]
        code, message, reason = e["code"], e["message"], e.get("reason")
    except (ValueError, KeyError, TypeError, AttributeError):
        code, message, reason = "http_error", body.decode("utf-8", "replace")[:500], None
    raise _ERRORS.get(code, RungError)(status, code, message, reason)


class ExecStream:
    """Iterate over ExecChunk objects as the command produces output; .result is the
    ExecResult once the iteration ends (stdout/stderr hold what was streamed)."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse,
                 on_callback: Callable[[Mapping[str, Any]], None] | None = None):
        self._conn, self._resp = conn, resp
        self._on_callback = on_callback
        self._answers: list[http.client.HTTPConnection | None] = [None]  # kept alive
        self.result: ExecResult | None = None
        self._out: list[bytes] = []
        self._err: list[bytes] = []

    def __iter__(self) -> Iterator[ExecChunk]:
        try:
            while True:
                line = self._resp.readline()
                if not line:
                    break
                msg = json.loads(line)
                if "callback" in msg and self._on_callback is not None:
                    self._on_callback(msg["callback"])  # answered before reading on
                    continue
                t = msg.get("type")
                if t in ("stdout", "stderr"):
                    data = (base64.b64decode(msg["data_b64"]) if "data_b64" in msg
                            else msg["data"].encode())
                    (self._out if t == "stdout" else self._err).append(data)
                    yield ExecChunk(t, data)
                elif t == "exit":
                    self.result = ExecResult.from_json(msg, b"".join(self._out),
                                                       b"".join(self._err))
                elif t == "error":
                    e = msg["error"]
                    raise _ERRORS.get(e["code"], RungError)(200, e["code"], e["message"])
        finally:
            self.close()
        if self.result is None:
            raise RungError(200, "stream_truncated", "the stream ended without an exit line")

    def wait(self) -> ExecResult:
        for _ in self:
            pass
        assert self.result is not None
        return self.result

    def close(self) -> None:
        self._conn.close()
        if self._answers[0] is not None:
            self._answers[0].close()
            self._answers[0] = None


class Sandbox:
    """A handle on one sandbox. Closing nothing: the sandbox lives until dispose/TTL."""

    def __init__(self, backend: "SandboxBackend", info: Mapping[str, Any]):
        self.backend = backend
        self.id: str = info["id"]
        self.info = dict(info)
        self.created: bool = bool(info.get("created", False))
        iso = info.get("isolation")
        self.isolation: Isolation | None = (
            Isolation(iso) if iso in {i.value for i in Isolation} else None)

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, isolation={self.isolation})"

    def _path(self, sub: str = "") -> str:
        return f"/v1/sandboxes/{self.id}" + (f"/{sub}" if sub else "")

    @staticmethod
    def _exec_body(argv: Sequence[str], timeout: float | None, cwd: str | None,
                   env: Mapping[str, str] | None, stdin: str | bytes | None) -> dict[str, Any]:
        if isinstance(argv, str):
            raise TypeError("argv must be a list of strings, not a command string")
        body: dict[str, Any] = {"argv": list(argv)}
        if timeout is not None:
            body["timeout"] = timeout
        if cwd is not None:
            body["cwd"] = cwd
        if env is not None:
            body["env"] = dict(env)
        if stdin is not None:
            body["stdin"] = stdin.decode() if isinstance(stdin, bytes) else stdin
        return body

    def exec(self, argv: Sequence[str], timeout: float | None = None, cwd: str | None = None,
             env: Mapping[str, str] | None = None, stdin: str | bytes | None = None,
             on_output: Callable[[str, bytes], None] | None = None,
             output_bytes: int | None = None,
             callbacks: Mapping[str, Callable[..., Any]] | None = None) -> ExecResult:
        """Run argv (no shell). With on_output, output is streamed to it as it comes.
        output_bytes: keep at most this much per stream (a collected reply carries at most
        16 MiB per stream; stream with on_output for more, up to the spec's limit).
        callbacks: host functions the command may call by name (docs/callbacks.md): each is
        called with the call's arguments (keywords for an object, positional for an array)
        and returns something JSON-serialisable; an exception goes back as an error."""
        body = self._exec_body(argv, timeout, cwd, env, stdin)
        if output_bytes is not None:
            body["output_bytes"] = output_bytes
        if on_output is None and not callbacks:
            return ExecResult.from_json(self.backend._json("POST", self._path("exec"), body,
                                                           timeout=timeout))
        return self._run_stream("exec", body, timeout, on_output, callbacks)

    def _run_stream(self, sub: str, body: dict[str, Any], timeout: float | None,
                    on_output: Callable[[str, bytes], None] | None,
                    callbacks: Mapping[str, Callable[..., Any]] | None) -> ExecResult:
        s = self._stream(sub, body, timeout, callbacks)
        for chunk in s:
            if on_output is not None:
                on_output(chunk.stream, chunk.data)
        assert s.result is not None
        return s.result

    def _answer_callback(self, callbacks: Mapping[str, Callable[..., Any]],
                         ev: Mapping[str, Any],
                         keep: list[http.client.HTTPConnection | None]) -> None:
        fn, args = callbacks.get(ev.get("name", "")), ev.get("args", {})
        try:
            if fn is None:
                raise LookupError(f"no callback {ev.get('name')!r} in this client")
            res = fn(*args) if isinstance(args, list) else fn(**args)
            answer: dict[str, Any] = {"result": json.loads(json.dumps(res))}
        except Exception as e:  # the sandbox sees the message, the exec goes on
            answer = {"error": f"{type(e).__name__}: {e}"}
        try:
            self.backend._post_kept(keep, self._path(f"callbacks/{ev['id']}"), answer)
        except NotFound:
            pass  # timed out meanwhile: the sandbox was told so

    @staticmethod
    def _await_in_loop(kw: dict[str, Any], loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
        """async callbacks, awaited on the caller's loop from the worker thread."""
        cbs = kw.get("callbacks")
        if not cbs:
            return kw

        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            if not inspect.iscoroutinefunction(fn):
                return fn
            return lambda *a, **k: asyncio.run_coroutine_threadsafe(fn(*a, **k), loop).result()
        return dict(kw, callbacks={n: wrap(f) for n, f in cbs.items()})

    def exec_stream(self, argv: Sequence[str], timeout: float | None = None,
                    cwd: str | None = None, env: Mapping[str, str] | None = None,
                    stdin: str | bytes | None = None) -> ExecStream:
        return self._stream("exec", self._exec_body(argv, timeout, cwd, env, stdin), timeout)

    def _stream(self, sub: str, body: dict[str, Any], timeout: float | None,
                callbacks: Mapping[str, Callable[..., Any]] | None = None) -> ExecStream:
        body = dict(body, stream=True)
        if callbacks:
            body["callbacks"] = list(callbacks)
        conn, resp = self.backend._open("POST", self._path(sub), body, timeout=timeout)
        s = ExecStream(conn, resp)
        if callbacks:
            s._on_callback = lambda ev: self._answer_callback(callbacks, ev, s._answers)
        return s

    def run_code(self, language: str, code: str, timeout: float | None = None,
                 callbacks: Mapping[str, Callable[..., Any]] | None = None) -> ExecResult:
        """Run code; with callbacks, it calls them as rung_host.tools.NAME(...) (Python) or
        rung-call NAME JSON (sh): see exec."""
        body: dict[str, Any] = {"language": language, "code": code}
        if timeout is not None:
            body["timeout"] = timeout
        if callbacks:
            return self._run_stream("run-code", body, timeout, None, callbacks)
        return ExecResult.from_json(self.backend._json("POST", self._path("run-code"), body,
                                                       timeout=timeout))

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        if isinstance(data, str):
            data = data.encode()
        q = urllib.parse.urlencode({"path": path, "mode": f"{mode:04o}"})
        self.backend._request("PUT", self._path("files") + "?" + q, raw_body=data)

    def read_file(self, path: str) -> bytes:
        q = urllib.parse.urlencode({"path": path})
        _, data = self.backend._request("GET", self._path("files") + "?" + q)
        return data

    def port_url(self, port: int, path: str = "/") -> str:
        """The preview URL of TCP port `port` inside (the daemon's route
        /v1/sandboxes/ID/ports/PORT/...): a full http:// URL on a TCP backend, the path alone on
        a Unix-socket one. Requests to it need this backend's token; the sandbox needs no egress."""
        if not 1 <= int(port) <= 65535:
            raise ValueError(f"port: {port!r} is not a TCP port (1..65535)")
        p = self._path(f"ports/{int(port)}") + "/" + path.lstrip("/")
        if self.backend.socket_path is not None:
            return p
        return f"http://{self.backend._host}:{self.backend._port}{p}"

    def port_request(self, port: int, method: str = "GET", path: str = "/",
                     body: bytes | str | None = None, headers: Mapping[str, str] | None = None,
                     timeout: float | None = None) -> tuple[int, dict[str, str], bytes]:
        """One HTTP request to the app on `port` inside, through the daemon: (status, headers,
        body) as the app answered (the daemon's own errors: 404 for another scope's sandbox,
        503 when nothing listens, with a JSON error body)."""
        self.port_url(port)  # checks the port
        target = self._path(f"ports/{int(port)}") + "/" + path.lstrip("/")
        h = {"Authorization": f"Bearer {self.backend.token}"} if self.backend.token else {}
        h.update(headers or {})
        data = body.encode() if isinstance(body, str) else body
        conn = self.backend._conn(timeout)
        try:
            conn.request(method, target, body=data, headers=h)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()
    # ---- file operations: confined to the sandbox's root; relative paths: its work dir ----
    def _fs(self, method: str, op: str, **q: Any) -> Any:
        query = urllib.parse.urlencode({k: v for k, v in q.items() if v is not None})
        return self.backend._json(method, self._path("fs/" + op) + "?" + query)

    def list_dir(self, path: str = ".") -> list[FileEntry]:
        """The directory's entries (not . or ..); a symlink to a directory lists it."""
        return [FileEntry.from_json(e) for e in self._fs("GET", "ls", path=path)["entries"]]

    def stat(self, path: str) -> FileEntry:
        return FileEntry.from_json(self._fs("GET", "stat", path=path))

    def remove(self, path: str, recursive: bool = False) -> None:
        """A directory needs recursive=True (else reason "is_a_directory")."""
        self._fs("POST", "rm", path=path, recursive="1" if recursive else None)

    def make_dir(self, path: str, mode: int = 0o755, parents: bool = False) -> None:
        self._fs("POST", "mkdir", path=path, mode=f"{mode:04o}",
                 parents="1" if parents else None)

    def move(self, src: str, dst: str) -> None:
        """rename(2): dst is the new path."""
        self._fs("POST", "mv", path=src, to=dst)

    def upload_dir(self, local_dir: "str | os.PathLike[str]", remote_dir: str,
                   timeout: float | None = None) -> dict[str, Any]:
        """Copy the local directory's tree into remote_dir (made, with its parents; files
        there are replaced) as one tar stream, never held whole in memory. Entries the daemon
        refuses (a hard link, a device; symlinks until the runtime takes them) raise
        Forbidden naming the entry. Returns {"path", "bytes"} (the tar's size)."""
        from .archive import upload_dir
        return upload_dir(self, local_dir, remote_dir, timeout)

    def download_dir(self, remote_dir: str, local_dir: "str | os.PathLike[str]",
                     timeout: float | None = None) -> None:
        """Copy remote_dir's tree to local_dir, which must not exist (its parent must). The
        tree is the sandbox's, so hostile: every entry is checked (no absolute path, no '..',
        no link out, no device: Forbidden naming it) and unpacked with tarfile's "data"
        filter, into a temporary directory beside local_dir renamed into place once the
        whole tar is in; on any error nothing is left. A transfer the daemon cut short raises
        RungError with code "truncated"."""
        from .archive import download_dir
        download_dir(self, remote_dir, local_dir, timeout)

    def stats(self) -> dict[str, Any]:
        """What the sandbox uses now (measured): {"source", "cpu_usage_us", "memory": {current,
        peak, limit, oom_kills}, "pids": {current, limit}, "disk": {used, total, limit},
        "procs": {live, exited}, "vmm_rss", "net": {rx_bytes, tx_bytes, refused_packets} or
        None (no network)}."""
        return self.backend._json("GET", self._path("stats"))

    def suspend(self, to_disk: bool = False) -> None:
        """Suspend; to_disk (vm rung only): save the guest to a file and stop its VMM, freeing
        its memory (docs/snapshots.md). Any use, or resume(), brings it back."""
        if to_disk:
            self.backend._json("POST", self._path("suspend"), {"to_disk": True})
        else:
            self.backend._json("POST", self._path("suspend"))

    def resume(self) -> None:
        self.backend._json("POST", self._path("resume"))

    def snapshot(self, name: str, force: bool = False) -> dict[str, Any]:
        """Save this running vm sandbox as the template `name` (its memory, disk and spec) and
        continue it (docs/snapshots.md); the template's description. A name taken is refused
        unless force; the other rungs refuse it. New sandboxes start from it with
        SandboxSpec(from_snapshot=name, ...) on the same image, memory, cpus and disk."""
        return self.backend._json("POST", self._path("snapshot"), {"name": name, "force": force})

    def describe(self) -> dict[str, Any]:
        return self.backend._json("GET", self._path())

    def dispose(self) -> None:
        self.backend.dispose(self.id)

    # ---- background processes, terminals, shell sessions (procs.py) ----
    def start(self, argv: Sequence[str], pty: bool = False, **kw: Any) -> "Process":
        """Start argv in the background (name=, cwd=, env=, rows=/cols= with pty,
        buffer_bytes=); a Process (a Pty with pty=True) that outlives this client.
        follow=True: one request that also streams its output; the first p.follow() reads
        it from offset 0 (the fastest way to a new process's first output)."""
        from . import procs
        return procs.start(self, argv, pty=pty, **kw)

    def processes(self) -> "list[ProcessInfo]":
        from . import procs
        return procs.processes(self)

    def process(self, handle: str) -> "Process":
        """Reattach to a process by handle, e.g. one another client started."""
        from . import procs
        return procs.process(self, handle)

    def shell(self, shell: str | None = None, cwd: str | None = None,
              env: Mapping[str, str] | None = None) -> "Session":
        """A persistent shell session: sess.run("cd x"), then sess.run("pwd")."""
        from . import procs
        return procs.shell(self, shell, cwd, env)

    async def start_async(self, argv: Sequence[str], pty: bool = False, **kw: Any) -> "Process":
        return await asyncio.to_thread(self.start, argv, pty, **kw)

    async def processes_async(self) -> "list[ProcessInfo]":
        return await asyncio.to_thread(self.processes)

    async def process_async(self, handle: str) -> "Process":
        return await asyncio.to_thread(self.process, handle)

    async def shell_async(self, shell: str | None = None, cwd: str | None = None,
                          env: Mapping[str, str] | None = None) -> "Session":
        return await asyncio.to_thread(self.shell, shell, cwd, env)

    # asyncio: the blocking calls run in a worker thread.
    async def exec_async(self, argv: Sequence[str], **kw: Any) -> ExecResult:
        kw = self._await_in_loop(kw, asyncio.get_running_loop())
        return await asyncio.to_thread(self.exec, argv, **kw)

    async def run_code_async(self, language: str, code: str, **kw: Any) -> ExecResult:
        kw = self._await_in_loop(kw, asyncio.get_running_loop())
        return await asyncio.to_thread(self.run_code, language, code, **kw)

    async def write_file_async(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        await asyncio.to_thread(self.write_file, path, data, mode)

    async def read_file_async(self, path: str) -> bytes:
        return await asyncio.to_thread(self.read_file, path)

    async def list_dir_async(self, path: str = ".") -> list[FileEntry]:
        return await asyncio.to_thread(self.list_dir, path)

    async def stat_async(self, path: str) -> FileEntry:
        return await asyncio.to_thread(self.stat, path)

    async def remove_async(self, path: str, recursive: bool = False) -> None:
        await asyncio.to_thread(self.remove, path, recursive)

    async def make_dir_async(self, path: str, mode: int = 0o755, parents: bool = False) -> None:
        await asyncio.to_thread(self.make_dir, path, mode, parents)

    async def move_async(self, src: str, dst: str) -> None:
        await asyncio.to_thread(self.move, src, dst)

    async def upload_dir_async(self, local_dir: "str | os.PathLike[str]", remote_dir: str,
                               timeout: float | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.upload_dir, local_dir, remote_dir, timeout)

    async def download_dir_async(self, remote_dir: str, local_dir: "str | os.PathLike[str]",
                                 timeout: float | None = None) -> None:
        await asyncio.to_thread(self.download_dir, remote_dir, local_dir, timeout)

    async def stats_async(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.stats)

    async def snapshot_async(self, name: str, force: bool = False) -> dict[str, Any]:
        return await asyncio.to_thread(self.snapshot, name, force)

    async def dispose_async(self) -> None:
        await asyncio.to_thread(self.dispose)


class SandboxBackend:
    """The daemon, reached over its Unix socket (socket_path=) or TCP (url="http://h:p")."""

    def __init__(self, socket_path: str | None = None, url: str | None = None,
                 token: str | None = None, timeout: float | None = 120.0):
        if (socket_path is None) == (url is None):
            raise ValueError("give exactly one of socket_path= or url=")
        self.socket_path = socket_path
        self.token = token
        self.timeout = timeout
        if url is not None:
            u = urllib.parse.urlsplit(url)
            if u.scheme != "http" or not u.hostname:
                raise ValueError(f"url: expected http://HOST:PORT, got {url!r}")
            self._host, self._port = u.hostname, u.port or 80
        # idle keep-alive connections for the next request: (conn, kept until), newest last
        self._idle: list[tuple[_HTTPConnection, float]] = []
        self._idle_lock = threading.Lock()
        self._idle_pid = os.getpid()

    def _conn_timeout(self, timeout: float | None) -> float | None:
        t = self.timeout
        if timeout is not None and t is not None:
            t = max(t, timeout + 30.0)
        return t

    def _conn(self, timeout: float | None) -> _HTTPConnection:
        t = self._conn_timeout(timeout)
        if self.socket_path is not None:
            return _UnixHTTPConnection(self.socket_path, timeout=t)
        return _HTTPConnection(self._host, self._port, timeout=t)

    # ---- kept connections: a request right after another costs no new connection (nor a
    # new thread in the daemon). Only requests whose answer is read whole use them.
    _KEEP_MAX = 4

    def _take(self, timeout: float | None) -> tuple[_HTTPConnection, bool]:
        """An idle kept connection (and True), else a new one. One the daemon has closed, or
        that has anything to read while idle, is dropped; so is one past the time the daemon
        said it keeps an idle connection (its Keep-Alive header), less a second's margin."""
        now = time.monotonic()
        with self._idle_lock:
            if self._idle_pid != os.getpid():  # a forked child: the parent's sockets
                self._idle, self._idle_pid = [], os.getpid()
            while self._idle:
                conn, until = self._idle.pop()
                sock = conn.sock
                if now < until and sock is not None and quiet(sock):
                    t = self._conn_timeout(timeout)
                    if conn.timeout != t:
                        conn.timeout = t
                        sock.settimeout(t)
                    return conn, True
                conn.close()
        return self._conn(timeout), False

    def _give_back(self, conn: _HTTPConnection, resp: Answer) -> None:
        ka = resp.getheader("Keep-Alive") or ""
        secs = 0.0
        for part in ka.split(","):
            k, _, v = part.strip().partition("=")
            if k.strip().lower() == "timeout":
                try:
                    secs = float(v)
                except ValueError:
                    secs = 0.0
        keep = secs - 1.0 if secs >= 2.0 else secs / 2
        if resp.will_close or keep <= 0 or conn.sock is None:
            conn.close()
            return
        with self._idle_lock:
            if self._idle_pid == os.getpid() and len(self._idle) < self._KEEP_MAX:
                self._idle.append((conn, time.monotonic() + keep))
                return
        conn.close()

    def close(self) -> None:
        """Close the idle kept connections (the backend stays usable)."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def __enter__(self) -> "SandboxBackend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:  # at interpreter exit, or after a failed __init__, close may not get far
            self.close()
        except Exception:
            pass

    def _headers(self, key: SandboxKey | None = None) -> dict[str, str]:
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if key is not None:
            h["X-Rung-Thread"] = key.thread
            h["X-Rung-Agent"] = key.agent
        return h

    def _payload(self, body: Any, raw_body: bytes | None, key: SandboxKey | None
                 ) -> tuple[dict[str, str], bytes | None]:
        """A request's headers and body: body as JSON, else raw_body as it is."""
        headers = self._headers(key)
        if body is None:
            return headers, raw_body
        headers["Content-Type"] = "application/json"
        return headers, json.dumps(body).encode()

    def _open(self, method: str, path: str, body: Any = None, raw_body: bytes | None = None,
              key: SandboxKey | None = None, timeout: float | None = None
              ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        headers, data = self._payload(body, raw_body, key)
        conn = self._conn(timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        if resp.status >= 400:
            try:
                _raise_for(resp.status, resp.read())
            finally:
                conn.close()
        return conn, resp

    def _post_kept(self, keep: list[http.client.HTTPConnection | None], path: str,
                   body: Any) -> Any:
        """POST on a kept-alive connection (keep[0], made on first use, made again once if
        the daemon closed it): a callback answer costs no new connection."""
        headers, data = self._payload(body, None, None)
        for attempt in (0, 1):
            if keep[0] is None:
                keep[0] = self._conn(None)
            try:
                keep[0].request("POST", path, body=data, headers=headers)
                resp = keep[0].getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                keep[0].close()
                keep[0] = None
                if attempt:
                    raise
                continue
            if resp.status >= 400:
                _raise_for(resp.status, raw)
            return json.loads(raw) if raw else None
        return None

    def _request(self, method: str, path: str, body: Any = None,
                 raw_body: bytes | None = None, key: SandboxKey | None = None,
                 timeout: float | None = None) -> tuple[int, bytes]:
        """One request whose answer is read whole, on a kept connection when there is one."""
        headers, data = self._payload(body, raw_body, key)
        conn, kept = self._take(timeout)
        try:
            try:
                conn.send_whole(method, path, data, headers)
            except (BrokenPipeError, ConnectionResetError):
                if not kept:
                    raise
                # closed by the daemon as we sent: it read no request; once more, anew
                conn.close()
                conn = self._conn(timeout)
                conn.send_whole(method, path, data, headers)
            resp = conn.read_answer(method)
        except BaseException:
            conn.close()
            raise
        self._give_back(conn, resp)
        if resp.status >= 400:
            _raise_for(resp.status, resp.body)
        return resp.status, resp.body

    def _json(self, method: str, path: str, body: Any = None, key: SandboxKey | None = None,
              timeout: float | None = None) -> Any:
        _, data = self._request(method, path, body=body, key=key, timeout=timeout)
        return json.loads(data)

    # ---- the protocol ----
    def acquire(self, key: SandboxKey, spec: SandboxSpec) -> Sandbox:
        """Get-or-create: the same key and kind return the same live sandbox."""
        info = self._json("POST", "/v1/sandboxes", {"spec": spec.to_json()}, key=key)
        return Sandbox(self, info)

    def get(self, sandbox_id: str) -> Sandbox:
        """A handle on an existing sandbox of this token's scope (NotFound otherwise)."""
        info = self._json("GET", f"/v1/sandboxes/{sandbox_id}")
        info.setdefault("id", sandbox_id)
        return Sandbox(self, info)

    def list(self, thread: str | None = None) -> list[dict[str, Any]]:
        q = "?" + urllib.parse.urlencode({"thread": thread}) if thread is not None else ""
        return self._json("GET", "/v1/sandboxes" + q)["sandboxes"]

    def dispose(self, sandbox: "Sandbox | str") -> None:
        sid = sandbox.id if isinstance(sandbox, Sandbox) else sandbox
        self._json("DELETE", f"/v1/sandboxes/{sid}")

    def dispose_scope(self, thread: str | None = None) -> int:
        """Dispose every sandbox of this token's scope (and thread, if given)."""
        q = "?" + urllib.parse.urlencode({"thread": thread}) if thread is not None else ""
        return int(self._json("DELETE", "/v1/sandboxes" + q)["disposed"])

    def snapshots(self) -> list[dict[str, Any]]:
        """This scope's templates (Sandbox.snapshot): name, source, spec, bytes, created_ms."""
        return self._json("GET", "/v1/snapshots")["snapshots"]

    def remove_snapshot(self, name: str) -> None:
        """Remove a template of this scope (another scope's is NotFound); its clones run on."""
        self._json("DELETE", "/v1/snapshots/" + urllib.parse.quote(name, safe=""))

    def health(self) -> dict[str, Any]:
        return self._json("GET", "/healthz")

    def metrics(self) -> str:
        return self._request("GET", "/metrics")[1].decode()

    async def acquire_async(self, key: SandboxKey, spec: SandboxSpec) -> Sandbox:
        return await asyncio.to_thread(self.acquire, key, spec)

    async def dispose_async(self, sandbox: "Sandbox | str") -> None:
        await asyncio.to_thread(self.dispose, sandbox)

    async def dispose_scope_async(self, thread: str | None = None) -> int:
        return await asyncio.to_thread(self.dispose_scope, thread)

    async def list_async(self, thread: str | None = None) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.list, thread)

    async def snapshots_async(self) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.snapshots)

    async def remove_snapshot_async(self, name: str) -> None:
        await asyncio.to_thread(self.remove_snapshot, name)
