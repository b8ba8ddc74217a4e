#!/usr/bin/env python3
"""An "agent tool": run a test suite the model wrote, inside a rung sandbox.

    run_tests(backend, {"calc.py": "...", "test_calc.py": "..."})
      -> {"passed": bool, "exit_code": int, "output": str, "timed_out": bool, "sandbox": id}

The tool writes the files into the sandbox of the current conversation (thread) and runs a
test command (pytest by default) as an argv: nothing goes through a shell on the host. The
sandbox is kept warm for the thread: a second call reuses it, files and installed packages intact.

Run it against a daemon:
    RUNG_SOCKET=/run/rung/rung.sock RUNG_TOKEN=... python3 examples/run_tests.py
or, with no daemon configured, it starts a throwaway one from ./build (see rung_client.testing).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rung_client import SandboxBackend, SandboxKey, SandboxSpec  # noqa: E402

PYTEST = ["python3", "-m", "pytest", "-q", "--no-header", "-p", "no:cacheprovider"]


def run_tests(backend: SandboxBackend, files: dict[str, str], command: list[str] | None = None,
              thread: str = "demo-thread", agent: str = "test-runner",
              timeout: float = 120) -> dict:
    """Write files (relative paths) into the thread's sandbox and run the test command."""
    spec = SandboxSpec(kind="pytest", egress_allow=[], requires=["exec", "fs_persist"])
    sandbox = backend.acquire(SandboxKey(thread=thread, agent=agent), spec)
    for path, text in files.items():
        if path.startswith("/") or ".." in Path(path).parts:
            raise ValueError(f"{path}: test files take relative paths inside the work dir")
        sandbox.write_file(path, text)
    result = sandbox.exec(command or PYTEST, timeout=timeout)
    return {
        "passed": result.exit_code == 0 and not result.timed_out,
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "output": (result.stdout + result.stderr)[-20000:],  # what the model gets to read
        "sandbox": sandbox.id,
    }


def main() -> int:
    files = {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "test_calc.py": (
            "import unittest\nfrom calc import add\n\n"
            "class TestAdd(unittest.TestCase):\n"
            "    def test_add(self):\n        self.assertEqual(add(2, 2), 4)\n\n"
            "if __name__ == '__main__':\n    unittest.main()\n"),
    }
    # pytest if the sandbox has it; the stdlib runner otherwise.
    command = None if os.environ.get("RUNG_EXAMPLE_PYTEST") else [
        "python3", "-m", "unittest", "-v"]
    sock, token = os.environ.get("RUNG_SOCKET"), os.environ.get("RUNG_TOKEN")
    if sock:
        backend = SandboxBackend(socket_path=sock, token=token)
        print(json.dumps(run_tests(backend, files, command), indent=2))
        return 0
    from rung_client.testing import Daemon
    with Daemon(scopes=("example",)) as d:
        backend = SandboxBackend(socket_path=d.socket_path, token=d.tokens["example"])
        out = run_tests(backend, files, command)
        print(json.dumps(out, indent=2))
        backend.dispose_scope()
        return 0 if out["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
