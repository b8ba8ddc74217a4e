"""rung_host: call the host's functions from inside a rung sandbox (docs/callbacks.md).

    import rung_host
    w = rung_host.call("get_weather", city="Paris")
    w = rung_host.tools.get_weather(city="Paris")

Present in every exec that was given callbacks (rung puts it on PYTHONPATH); pure Python, no
dependency. The channel is the inherited fd named by $RUNG_CALLBACK_FD: one JSON line per call
and per answer. Calls from several threads share it: each waits for its own answer; several
processes may share it too (ids carry the pid).
"""
import json
import os
import socket
import threading
import time

__all__ = ["call", "tools", "CallbackError", "available"]


class CallbackError(Exception):
    """The host refused the call or its function failed; .code says why."""

    def __init__(self, message, code="failed"):
        super().__init__(message)
        self.code = code


_lock = threading.Lock()
_cond = threading.Condition(_lock)
_answers = {}
_reading = False
_counter = 0
_sock = None
_sock_pid = None
_STUCK_S = 2.0


def _fd():
    v = os.environ.get("RUNG_CALLBACK_FD")
    if not v:
        raise CallbackError("no host callbacks: this exec was not given any", "unavailable")
    return int(v)


def available():
    """True when this process was given a callback channel."""
    try:
        os.fstat(_fd())
        return True
    except (CallbackError, OSError, ValueError):
        return False


def _channel():
    """The channel as a socket of this process (made again after a fork)."""
    global _sock, _sock_pid
    if _sock is None or _sock_pid != os.getpid():
        _sock = socket.socket(fileno=os.dup(_fd()))
        _sock_pid = os.getpid()
    return _sock


def _mine(cid):
    return cid >> 24 == os.getpid()


def _read_answer(sock):
    """The next answer for this process (by the single reader, without the lock). The
    channel may be shared with other processes (children inherit it): a line is taken off
    only by the process its id names; one nobody takes for 2 s (its caller died) is dropped."""
    stuck = None
    while True:
        head = sock.recv(1 << 20, socket.MSG_PEEK)
        if not head:
            raise CallbackError("the host callback channel closed", "ended")
        nl = head.find(b"\n")
        if nl < 0:
            time.sleep(0.001)
            continue
        try:
            ans = json.loads(head[:nl])
            cid = int(ans.get("id", 0))
        except (ValueError, TypeError, AttributeError):
            ans, cid = None, 0
        if ans is not None and _mine(cid):
            _recv_exact(sock, nl + 1)
            return ans
        now = time.monotonic()
        if stuck is not None and now - stuck > _STUCK_S:
            _recv_exact(sock, nl + 1)
            stuck = None
            continue
        if stuck is None:
            stuck = now
        time.sleep(0.001)


def _recv_exact(sock, n):
    while n:
        got = sock.recv(n)
        if not got:
            raise CallbackError("the host callback channel closed", "ended")
        n -= len(got)


def call(name, /, *args, **kwargs):
    """Call the host function `name`; returns its JSON result, raises CallbackError."""
    global _counter, _reading
    if args and kwargs:
        raise TypeError("pass positional or keyword arguments, not both")
    params = list(args) if args else kwargs
    limit = int(os.environ.get("RUNG_CALLBACK_MAX_BYTES", "0") or 0)
    with _lock:
        sock = _channel()
        _counter = (_counter + 1) & 0xFFFFFF
        cid = (os.getpid() << 24) | _counter
        line = json.dumps({"id": cid, "name": name, "args": params},
                          separators=(",", ":")).encode() + b"\n"
        if limit and len(line) > limit:
            raise CallbackError("call to %s: %d bytes exceeds the %d-byte limit"
                                % (name, len(line), limit), "too_large")
        try:
            sock.sendall(line)
        except OSError as e:
            raise CallbackError("the host callback channel is gone: %s" % e, "ended")
        while cid not in _answers:
            if _reading:
                _cond.wait()
                continue
            _reading = True
            _lock.release()
            try:
                ans = _read_answer(sock)
            except BaseException:
                _lock.acquire()
                _reading = False
                _cond.notify_all()
                raise
            _lock.acquire()
            _reading = False
            _answers[ans.get("id")] = ans
            _cond.notify_all()
        ans = _answers.pop(cid)
    if ans.get("ok"):
        return ans.get("result")
    raise CallbackError(ans.get("error", "host callback failed"), ans.get("code", "failed"))


class _Tools:
    """rung_host.tools.NAME(**kwargs) is rung_host.call("NAME", **kwargs)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **kw: call(name, *a, **kw)


tools = _Tools()
