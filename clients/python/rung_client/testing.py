"""Start a throwaway `rung serve` (temp store, socket and tokens file) for tests and benchmarks."""
from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def serve_command(build_dir: str | None = None) -> list[str]:
    """The daemon's command line: $RUNG_SERVE_CMD, else `rung serve` if the CLI has it, else
    the build's rung-serve."""
    if os.environ.get("RUNG_SERVE_CMD"):
        return os.environ["RUNG_SERVE_CMD"].split()
    b = Path(build_dir or os.environ.get("RUNG_BUILD_DIR") or "build").resolve()
    rung = b / "rung"
    if rung.exists():
        r = subprocess.run([str(rung), "serve", "--help"], capture_output=True, timeout=10)
        if r.returncode == 0 and b"--tokens" in r.stdout:
            return [str(rung), "serve"]
    return [str(b / "rung-serve")]


def _kill_matching(needle: str) -> int:
    """SIGKILL processes whose command line contains needle, and their children."""
    pids: list[int] = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            if needle.encode() not in (p / "cmdline").read_bytes():
                continue
            pids.append(int(p.name))
            pids += [int(c) for c in (p / "task" / p.name / "children").read_text().split()]
        except OSError:
            continue
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(pids)


class Daemon:
    """A `rung serve` with its own temp dir. tokens: {scope: token} (generated if omitted)."""

    def __init__(self, scopes: tuple[str, ...] = ("alpha", "beta"), tcp: bool = False,
                 extra_args: list[str] | None = None, state_dir: str | None = None,
                 extra_token_lines: str = ""):
        self.dir = Path(tempfile.mkdtemp(prefix="rung-pytest-"))
        self.dir.chmod(0o711)
        self.state_dir = state_dir or str(self.dir / "state")
        self.socket_path = str(self.dir / "rung.sock")
        self.tokens = {s: "tok-" + secrets.token_hex(16) for s in scopes}
        tf = self.dir / "tokens"
        tf.write_text("".join(f"{t} {s}\n" for s, t in self.tokens.items()) + extra_token_lines)
        tf.chmod(0o600)
        self.tokens_path = str(tf)
        self.log_path = self.dir / "daemon.log"
        self.args = ["--tokens", self.tokens_path, "--socket", self.socket_path,
                     "--state-dir", self.state_dir, "--gc-interval", "1"]
        if tcp:
            self.args += ["--listen", "127.0.0.1:0"]
        self.args += extra_args or []
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None

    def start(self) -> "Daemon":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(serve_command() + self.args, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rung serve exited: {self.log_path.read_text()}")
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.socket_path)
                break
            except OSError:
                time.sleep(0.01)
        else:
            raise RuntimeError("rung serve did not come up")
        if "--listen" in self.args:
            m = None
            while m is None and time.monotonic() < deadline:
                m = re.search(r"tcp=127\.0\.0\.1:(\d+)", self.log_path.read_text())
                time.sleep(0.01)
            self.port = int(m.group(1)) if m else None
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def close(self) -> None:
        # Sandboxes outlive the daemon (they live in the store): purge every scope first.
        if self.proc and self.proc.poll() is None:
            from .client import SandboxBackend
            for tok in self.tokens.values():
                try:
                    with SandboxBackend(socket_path=self.socket_path, token=tok,
                                        timeout=30) as b:
                        b.dispose_scope()
                except Exception:  # best effort; the store is removed below anyway
                    pass
        self.stop(signal.SIGKILL)
        # Backstop: sandbox supervisors are forked from the daemon and keep its command line,
        # which names this fresh temp dir; kill what is left of them (and their agents).
        for _ in range(5):
            if not _kill_matching(str(self.dir)):
                break
            time.sleep(0.1)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Daemon":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
