"""rung_host: call the host's functions from inside a rung sandbox (docs/callbacks.md).

    import rung_host
    w = rung_host.call("get_weather", city="Paris")
    w = rung_host.tools.get_weather(city="Paris")

Present in every exec that was given callbacks (rung puts it on PYTHONPATH); pure Python, no
dependency. The channel is the inherited fd named by $RUNG_CALLBACK_FD: one JSON line per call
and per answer. Calls from several threads share it: each waits for its own answer.
"""
import json
import os
import threading

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
_next_id = 0
_buf = b""


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


def _write(fd, data):
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _read_line(fd):
    """One answer line (called by the single reader, without the lock)."""
    global _buf
    while b"\n" not in _buf:
        chunk = os.read(fd, 65536)
        if not chunk:
            raise CallbackError("the host callback channel closed", "ended")
        _buf += chunk
    line, _, _buf = _buf.partition(b"\n")
    return line


def call(name, /, *args, **kwargs):
    """Call the host function `name`; returns its JSON result, raises CallbackError."""
    global _next_id, _reading
    if args and kwargs:
        raise TypeError("pass positional or keyword arguments, not both")
    params = list(args) if args else kwargs
    fd = _fd()
    limit = int(os.environ.get("RUNG_CALLBACK_MAX_BYTES", "0") or 0)
    with _lock:
        _next_id += 1
        cid = _next_id
        line = json.dumps({"id": cid, "name": name, "args": params},
                          separators=(",", ":")).encode() + b"\n"
        if limit and len(line) > limit:
            raise CallbackError("call to %s: %d bytes exceeds the %d-byte limit"
                                % (name, len(line), limit), "too_large")
        try:
            _write(fd, line)
        except OSError as e:
            raise CallbackError("the host callback channel is gone: %s" % e, "ended")
        while cid not in _answers:
            if _reading:
                _cond.wait()
                continue
            _reading = True
            _lock.release()
            try:
                ans = json.loads(_read_line(fd))
            except Exception:
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
