"""Python client for `rung serve` (standard library only)."""
from .client import (BadRequest, Conflict, ExecChunk, ExecResult, ExecStream, FileEntry,
                     Forbidden, Isolation, NotFound, PayloadTooLarge, RungError, Sandbox,
                     SandboxBackend, SandboxKey, SandboxSpec, TooManyRequests, Unauthorized)
from .procs import Attach, LogChunk, Logs, Process, ProcessInfo, Pty, Session

__all__ = ["Attach", "BadRequest", "Conflict", "ExecChunk", "ExecResult", "ExecStream",
           "FileEntry", "Forbidden", "Isolation", "LogChunk", "Logs", "NotFound",
           "PayloadTooLarge", "Process", "ProcessInfo", "Pty", "RungError", "Sandbox",
           "SandboxBackend", "SandboxKey", "SandboxSpec", "Session", "TooManyRequests",
           "Unauthorized"]
__version__ = "0.1.0"
