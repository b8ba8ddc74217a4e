"""unittest suite for rung_client against a real `rung serve` started per test class."""
import asyncio
import os
import sys
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rung_client import (BadRequest, ExecResult, Isolation, NotFound, RungError,  # noqa: E402
                         Sandbox, SandboxBackend, SandboxKey, SandboxSpec, Unauthorized)
from rung_client.testing import Daemon  # noqa: E402

KEY = SandboxKey(thread="thread-1", agent="agent-1")


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(scopes=("alpha", "beta"), tcp=True).start()
        cls.alpha = SandboxBackend(socket_path=cls.d.socket_path, token=cls.d.tokens["alpha"])
        cls.beta = SandboxBackend(socket_path=cls.d.socket_path, token=cls.d.tokens["beta"])

    @classmethod
    def tearDownClass(cls):
        cls.d.close()

    def tearDown(self):
        self.alpha.dispose_scope()
        self.beta.dispose_scope()

    def sandbox(self, kind="pytest", key=KEY, backend=None, **kw) -> Sandbox:
        return (backend or self.alpha).acquire(key, SandboxSpec(kind=kind, **kw))

    def test_acquire_exec(self):
        sb = self.sandbox()
        self.assertTrue(sb.created)
        self.assertIsInstance(sb.isolation, Isolation)
        r = sb.exec(["python3", "-c", "import sys; print('hi'); print('oops', file=sys.stderr); sys.exit(3)"])
        self.assertIsInstance(r, ExecResult)
        self.assertEqual(r.exit_code, 3)
        self.assertEqual(r.stdout, "hi\n")
        self.assertEqual(r.stderr, "oops\n")
        self.assertFalse(r.timed_out)
        self.assertFalse(r.ok)
        self.assertGreater(r.duration_ms, 0)

    def test_warm_reuse_and_files(self):
        sb = self.sandbox()
        sb.write_file("hello.txt", b"hello \xff\x00 world")
        self.assertEqual(sb.read_file("hello.txt"), b"hello \xff\x00 world")
        again = self.sandbox()
        self.assertEqual(again.id, sb.id)
        self.assertFalse(again.created)
        self.assertEqual(again.read_file("hello.txt"), b"hello \xff\x00 world")
        sb.write_file("run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
        self.assertEqual(sb.exec(["./run.sh"]).stdout, "ran\n")
        with self.assertRaises(NotFound):
            sb.read_file("missing.txt")

    def test_exec_options_and_binary_output(self):
        sb = self.sandbox()
        r = sb.exec(["sh", "-c", 'printf "%s" "$GREETING"; cat'], env={"GREETING": "hey "},
                    stdin="from stdin")
        self.assertEqual(r.stdout, "hey from stdin")
        r = sb.exec(["sh", "-c", r"printf '\377\000A'"])
        self.assertEqual(r.stdout_bytes, b"\xff\x00A")
        # control-heavy output comes as base64 (one encoding), text as text
        r = sb.exec(["sh", "-c", r"head -c 3000 /dev/zero | tr '\000' '\001'; printf 'h\303\251\n' >&2"])
        self.assertEqual(r.stdout_bytes, b"\x01" * 3000)
        self.assertEqual(r.stderr, "h\u00e9\n")
        r = sb.exec(["sh", "-c", "head -c 5000 /dev/zero"], output_bytes=1024)
        self.assertTrue(r.truncated)
        self.assertEqual(r.stdout_bytes, b"\0" * 1024)
        with self.assertRaises(BadRequest) as cm:  # above what a collected reply carries
            sb.exec(["true"], output_bytes=64 << 20)
        self.assertIn("output_bytes", cm.exception.message)
        chunks = list(sb.exec_stream(["sh", "-c", r"printf '\001\002\003'"]))
        self.assertEqual(b"".join(c.data for c in chunks), b"\x01\x02\x03")
        with self.assertRaises(TypeError):
            sb.exec("ls -l")  # a command string is refused: argv only

    def test_spec_fields(self):
        sb = self.sandbox(kind="spec", env={"FOO": "bar"}, work_dir="/work",
                          limits={"exec_timeout_s": 5}, egress_allow=[])
        self.assertEqual(sb.exec(["sh", "-c", "echo $FOO; pwd"]).stdout, "bar\n/work\n")
        spec = sb.describe()["spec"]
        self.assertEqual(spec["kind"], "spec")
        self.assertEqual(spec["egress_allow"], [])

    def test_run_code(self):
        sb = self.sandbox()
        r = sb.run_code("python", "print(6 * 7)")
        self.assertEqual((r.exit_code, r.stdout), (0, "42\n"))
        with self.assertRaises(BadRequest):
            sb.run_code("cobol", "DISPLAY 'X'")

    def test_streaming(self):
        sb = self.sandbox()
        t0 = time.monotonic()
        chunks, first = [], None
        stream = sb.exec_stream(["sh", "-c", "echo one; sleep 1; echo two >&2; echo three"])
        for chunk in stream:
            if first is None:
                first = time.monotonic() - t0
            chunks.append((chunk.stream, chunk.text))
        self.assertLess(first, 0.9)  # arrived while the command still ran
        self.assertIn(("stdout", "one\n"), chunks)
        self.assertIn(("stderr", "two\n"), chunks)
        self.assertEqual(stream.result.exit_code, 0)
        self.assertEqual(stream.result.stdout, "one\nthree\n")
        seen = []
        r = sb.exec(["sh", "-c", "echo cb"], on_output=lambda s, d: seen.append((s, d)))
        self.assertEqual(seen, [("stdout", b"cb\n")])
        self.assertEqual(r.stdout, "cb\n")

    def test_timeout(self):
        sb = self.sandbox()
        t0 = time.monotonic()
        r = sb.exec(["sleep", "30"], timeout=1)
        self.assertTrue(r.timed_out)
        self.assertLess(time.monotonic() - t0, 5)
        s = sb.exec_stream(["sleep", "30"], timeout=0.5)
        self.assertTrue(s.wait().timed_out)

    def test_suspend_resume_describe(self):
        sb = self.sandbox()
        sb.suspend()
        self.assertEqual(sb.describe()["state"], "suspended")
        sb.resume()
        self.assertEqual(sb.describe()["state"], "running")
        self.assertEqual(sb.exec(["true"]).exit_code, 0)
        # to disk is the vm rung's: refused here, clearly, and the sandbox keeps running
        with self.assertRaises(RungError) as e:
            sb.suspend(to_disk=True)
        self.assertIn("suspend --to-disk needs the vm rung", e.exception.message)
        self.assertEqual(sb.describe()["state"], "running")

    def test_snapshot_refused_off_vm(self):
        # templates are the vm rung's (their cases run in the nested stage): here the refusal,
        # the body's and the name's checks, and the scope rule of the list and the removal
        sb = self.sandbox()
        with self.assertRaises(RungError) as e:
            sb.snapshot("base")
        self.assertIn("snapshot needs the vm rung", e.exception.message)
        with self.assertRaises(BadRequest):
            sb.snapshot("Not/A/Name")
        self.assertEqual(sb.describe()["state"], "running")
        self.assertEqual(self.alpha.snapshots(), [])
        with self.assertRaises(NotFound):
            self.alpha.remove_snapshot("base")
        with self.assertRaises(BadRequest) as e:
            self.sandbox(kind="clone", from_snapshot="base")
        self.assertIn("from_snapshot: a snapshot starts a vm sandbox", e.exception.message)
        self.assertEqual(asyncio.run(self.beta.snapshots_async()), [])
        with self.assertRaises(RungError):
            asyncio.run(sb.snapshot_async("base"))

    def test_list_dispose_scope(self):
        a = self.sandbox(key=SandboxKey("t-a", "ag"))
        b = self.sandbox(key=SandboxKey("t-b", "ag"))
        ids = {s["id"] for s in self.alpha.list()}
        self.assertEqual(ids, {a.id, b.id})
        self.assertEqual([s["id"] for s in self.alpha.list(thread="t-a")], [a.id])
        self.assertEqual(self.alpha.dispose_scope(thread="t-a"), 1)
        self.assertEqual({s["id"] for s in self.alpha.list()}, {b.id})
        b.dispose()
        self.assertEqual(self.alpha.list(), [])
        with self.assertRaises(NotFound):
            b.exec(["true"])

    def test_scopes_are_isolated(self):
        mine = self.sandbox()
        mine.write_file("secret", "alpha only")
        theirs = self.sandbox(backend=self.beta)
        self.assertNotEqual(mine.id, theirs.id)
        self.assertEqual(self.beta.list()[0]["id"], theirs.id)
        spoof = Sandbox(self.beta, {"id": mine.id})
        for call in (lambda: spoof.exec(["cat", "secret"]), lambda: spoof.read_file("secret"),
                     lambda: spoof.write_file("x", "y"), spoof.suspend, spoof.resume,
                     spoof.describe, spoof.dispose, lambda: spoof.run_code("sh", "id"),
                     lambda: self.beta.get(mine.id)):
            with self.assertRaises(NotFound):
                call()
        self.assertEqual(self.beta.dispose_scope(), 1)
        self.assertEqual(mine.read_file("secret"), b"alpha only")

    def test_auth_errors(self):
        for tok in (None, "tok-" + "0" * 32):
            bad = SandboxBackend(socket_path=self.d.socket_path, token=tok)
            with self.assertRaises(Unauthorized) as cm:
                bad.list()
            self.assertEqual(cm.exception.status, 401)
            self.assertEqual(cm.exception.code, "unauthorized")
        self.assertEqual(SandboxBackend(socket_path=self.d.socket_path).health()["status"], "ok")

    def test_bad_spec(self):
        with self.assertRaises(BadRequest) as cm:
            self.alpha.acquire(KEY, SandboxSpec(kind="k", extra={"no_such_field": 1}))
        self.assertIn("no_such_field", cm.exception.message)

    def test_tcp(self):
        tcp = SandboxBackend(url=self.d.url, token=self.d.tokens["alpha"])
        sb = tcp.acquire(KEY, SandboxSpec(kind="tcp"))
        self.assertEqual(sb.exec(["echo", "over tcp"]).stdout, "over tcp\n")
        self.assertIn(sb.id, {s["id"] for s in self.alpha.list()})
        m = tcp.metrics()  # a scope's view: its own sandboxes and limits, no daemon-wide counters
        self.assertIn("rung_scope_requests_limit", m)
        self.assertNotIn("rung_exec_total", m)

    def test_async(self):
        async def main():
            sbs = await asyncio.gather(*[
                self.alpha.acquire_async(SandboxKey(f"t{i}", "a"), SandboxSpec(kind="k"))
                for i in range(4)])
            rs = await asyncio.gather(*[sb.exec_async(["sh", "-c", "sleep 0.5; echo $0", str(i)])
                                        for i, sb in enumerate(sbs)])
            await sbs[0].write_file_async("f", b"async")
            data = await sbs[0].read_file_async("f")
            n = await self.alpha.dispose_scope_async()
            return rs, data, n
        t0 = time.monotonic()
        rs, data, n = asyncio.run(main())
        self.assertLess(time.monotonic() - t0, 4)  # the four 0.5 s execs overlapped
        self.assertEqual([r.stdout for r in rs], [f"{i}\n" for i in range(4)])
        self.assertEqual(data, b"async")
        self.assertEqual(n, 4)

    def test_example_run_tests(self):
        sys.path.insert(0, str(HERE.parent / "examples"))
        import run_tests as ex
        out = ex.run_tests(self.alpha, {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "test_calc.py": "import unittest\nfrom calc import add\n\n"
                            "class T(unittest.TestCase):\n"
                            "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
        }, command=["python3", "-m", "unittest", "-q"])
        self.assertTrue(out["passed"], out)
        self.assertIn("OK", out["output"])
        out = ex.run_tests(self.alpha, {"test_bad.py": "import unittest\nclass T(unittest.TestCase):\n"
                                        "    def test_x(self):\n        self.fail('no')\n"},
                           command=["python3", "-m", "unittest", "-q"])
        self.assertFalse(out["passed"])


class DaemonLifecycleTest(unittest.TestCase):
    def test_unix_peer_without_token(self):
        with Daemon(scopes=("alpha",), extra_token_lines=f"unix-peer-uid:{os.getuid()} local\n") as d:
            local = SandboxBackend(socket_path=d.socket_path)
            sb = local.acquire(KEY, SandboxSpec(kind="k"))
            self.assertEqual(sb.exec(["echo", "ok"]).stdout, "ok\n")
            alpha = SandboxBackend(socket_path=d.socket_path, token=d.tokens["alpha"])
            self.assertEqual(alpha.list(), [])
            self.assertEqual(local.dispose_scope(), 1)

    def test_silent_exec_outlives_idle_timeout(self):
        # Heartbeats keep a silent stream alive; a collected exec is not an idle connection.
        with Daemon(scopes=("alpha",), extra_args=["--idle-timeout", "2"]) as d:
            b = SandboxBackend(socket_path=d.socket_path, token=d.tokens["alpha"])
            sb = b.acquire(KEY, SandboxSpec(kind="k"))
            self.assertEqual(sb.exec(["sh", "-c", "sleep 3; echo a"]).stdout, "a\n")
            s = sb.exec_stream(["sh", "-c", "sleep 3.5; echo b"])
            self.assertEqual(s.wait().stdout, "b\n")
            self.assertEqual(b.dispose_scope(), 1)

    def test_deployed_policy(self):
        with Daemon(scopes=("alpha",), extra_args=["--deployed"]) as d:
            b = SandboxBackend(socket_path=d.socket_path, token=d.tokens["alpha"])
            from rung_client import Forbidden
            with self.assertRaises(Forbidden) as cm:  # shell-capable on a shared kernel
                b.acquire(KEY, SandboxSpec(kind="shell", requires=["exec"]))
            self.assertEqual(cm.exception.status, 403)
            self.assertIn("shell-capable", cm.exception.message)
            sb = b.acquire(KEY, SandboxSpec(kind="calc", requires=["run_code"], egress_allow=[]))
            self.assertEqual(sb.run_code("python", "print(2 + 2)").stdout, "4\n")
            # granted run_code only: no shell, whether through exec or run_code sh
            with self.assertRaises(Forbidden) as cm:
                sb.exec(["sh", "-c", "id"])
            self.assertIn("exec: not granted", cm.exception.message)
            with self.assertRaises(Forbidden):
                sb.run_code("sh", "id")
            b.dispose_scope()

    def test_scope_limit(self):
        # one tenant at its limit is told so (429); another is served
        with Daemon(scopes=("alpha", "beta"), extra_token_lines="limits alpha requests=1\n") as d:
            from rung_client import TooManyRequests
            a = SandboxBackend(socket_path=d.socket_path, token=d.tokens["alpha"])
            b = SandboxBackend(socket_path=d.socket_path, token=d.tokens["beta"])
            sa = a.acquire(KEY, SandboxSpec(kind="k"))
            sb = b.acquire(KEY, SandboxSpec(kind="k"))
            s = sa.exec_stream(["sleep", "2"])  # holds alpha's one request slot
            with self.assertRaises(TooManyRequests) as cm:
                sa.exec(["true"])
            self.assertEqual(cm.exception.status, 429)
            self.assertIn("requests in flight", cm.exception.message)
            self.assertEqual(sb.exec(["echo", "b"]).stdout, "b\n")
            self.assertEqual(s.wait().exit_code, 0)
            for _ in range(50):  # the slot is free once the daemon has finished the stream
                try:
                    self.assertEqual(sa.exec(["echo", "a"]).stdout, "a\n")
                    break
                except TooManyRequests:
                    time.sleep(0.05)
            else:
                self.fail("alpha was not served again after its stream ended")
            a.dispose_scope()
            b.dispose_scope()

    def test_restart_keeps_sandboxes(self):
        d = Daemon(scopes=("alpha",)).start()
        try:
            b = SandboxBackend(socket_path=d.socket_path, token=d.tokens["alpha"])
            sb = b.acquire(KEY, SandboxSpec(kind="k"))
            sb.write_file("f", "persist")
            self.assertEqual(d.stop(), 0)  # SIGTERM: clean exit
            d.start()
            self.assertEqual(b.acquire(KEY, SandboxSpec(kind="k")).id, sb.id)
            self.assertEqual(sb.read_file("f"), b"persist")
            self.assertEqual(b.dispose_scope(), 1)
        finally:
            d.close()


def mhd_threads(pid: int) -> int:
    """The daemon's connection threads: one per open connection (thread per connection)."""
    n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                n += f.read().strip() == "MHD-connection"
        except OSError:
            pass
    return n


class KeepAliveTest(unittest.TestCase):
    """Requests whose answer is read whole go on one kept connection while it is fresh."""

    def test_back_to_back_on_one_connection(self):
        with Daemon(scopes=("alpha",)) as d:
            b = SandboxBackend(socket_path=d.socket_path, token=d.tokens["alpha"])
            sb = b.acquire(KEY, SandboxSpec(kind="k"))
            self.assertEqual(sb.exec(["echo", "1"]).stdout, "1\n")
            self.assertEqual(len(b._idle), 1)
            conn = b._idle[0][0]
            for i in range(5):
                self.assertEqual(sb.exec(["echo", str(i)]).stdout, f"{i}\n")
                with self.assertRaises(NotFound):  # an error answer keeps it too
                    b.get("0" * 32)
            self.assertEqual(len(b._idle), 1)
            self.assertIs(b._idle[0][0], conn)
            self.assertEqual(mhd_threads(d.proc.pid), 1)  # the daemon served all on it
            b.close()
            deadline = time.time() + 5
            while mhd_threads(d.proc.pid) and time.time() < deadline:
                time.sleep(0.05)
            self.assertEqual(mhd_threads(d.proc.pid), 0)
            self.assertEqual(b.dispose_scope(), 1)

    def test_keep_alive_header_is_the_header_timeout(self):
        import http.client
        import socket
        for args, want in (([], "timeout=10"), (["--header-timeout", "3"], "timeout=3")):
            with Daemon(scopes=("alpha",), extra_args=args) as d:
                c = http.client.HTTPConnection("localhost")
                c.sock = socket.socket(socket.AF_UNIX)
                c.sock.connect(d.socket_path)
                c.request("GET", "/healthz")
                r = c.getresponse()
                r.read()
                self.assertEqual(r.getheader("Keep-Alive"), want)
                c.close()

    def test_cut_or_closed_connection_is_not_used(self):
        # --header-timeout 1: the daemon cuts an idle connection after 1 s; the client keeps
        # it for half that
        with Daemon(scopes=("alpha",), extra_args=["--header-timeout", "1"]) as d:
            b = SandboxBackend(socket_path=d.socket_path, token=d.tokens["alpha"])
            sb = b.acquire(KEY, SandboxSpec(kind="k"))
            for _ in range(3):
                sb.exec(["true"])
                time.sleep(1.5)  # past both: cut by the daemon, and expired here
                self.assertEqual(sb.exec(["echo", "ok"]).stdout, "ok\n")
            # closed by a restart while kept (fresh here): seen closed, not used
            kept = b._idle[0][0]
            self.assertEqual(d.stop(), 0)
            d.start()
            self.assertEqual(sb.exec(["echo", "again"]).stdout, "again\n")
            self.assertIsNot(b._idle[0][0], kept)
            self.assertEqual(b.dispose_scope(), 1)


if __name__ == "__main__":
    unittest.main()
