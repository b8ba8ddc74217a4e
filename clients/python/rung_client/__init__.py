"""Python client for `rung serve` (standard library only)."""
from .client import (BadRequest, Conflict, ExecChunk, ExecResult, ExecStream, FileEntry,
                     Forbidden, Isolation, NotFound, PayloadTooLarge, RungError, Sandbox,
                     SandboxBackend, SandboxKey, SandboxSpec, TooManyRequests, Unauthorized)

__all__ = ["BadRequest", "Conflict", "ExecChunk", "ExecResult", "ExecStream", "FileEntry",
           "Forbidden", "Isolation", "NotFound", "PayloadTooLarge", "RungError", "Sandbox",
           "SandboxBackend", "SandboxKey", "SandboxSpec", "TooManyRequests", "Unauthorized"]
__version__ = "0.1.0"
