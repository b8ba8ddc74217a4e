"""unittest suite for background processes, terminals and shell sessions in rung_client,
against a real `rung serve` started per test class (as test_client.py)."""
import asyncio
import sys
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rung_client import (BadRequest, Conflict, NotFound, Process, Pty, Sandbox,  # noqa: E402
                         SandboxBackend, SandboxKey, SandboxSpec, Session)
from rung_client.testing import Daemon  # noqa: E402

KEY = SandboxKey(thread="thread-procs", agent="agent-1")


def until(pred, timeout=10.0, step=0.05):
    """pred()'s first truthy value within timeout seconds, else the last one."""
    deadline = time.monotonic() + timeout
    v = pred()
    while not v and time.monotonic() < deadline:
        time.sleep(step)
        v = pred()
    return v


class ProcsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(scopes=("alpha", "beta")).start()
        cls.alpha = SandboxBackend(socket_path=cls.d.socket_path, token=cls.d.tokens["alpha"])
        cls.beta = SandboxBackend(socket_path=cls.d.socket_path, token=cls.d.tokens["beta"])

    @classmethod
    def tearDownClass(cls):
        cls.d.close()

    def tearDown(self):
        self.alpha.dispose_scope()
        self.beta.dispose_scope()

    def sandbox(self, backend=None) -> Sandbox:
        return (backend or self.alpha).acquire(KEY, SandboxSpec(kind="pyprocs"))

    def test_background_server_reached_from_a_later_exec(self):
        sb = self.sandbox()
        p = sb.start(["python3", "-m", "http.server", "8123", "--bind", "127.0.0.1"],
                     name="web")
        self.assertIsInstance(p, Process)
        self.assertEqual(len(p.handle), 16)
        fetch = ["python3", "-c", "import urllib.request as u; "
                 "print(u.urlopen('http://127.0.0.1:8123/').status)"]
        r = until(lambda: (lambda x: x if x.exit_code == 0 else None)(sb.exec(fetch)))
        self.assertIsNotNone(r, "the background server never answered")
        self.assertEqual(r.stdout, "200\n")
        infos = sb.processes()
        self.assertEqual([i.handle for i in infos], [p.handle])
        self.assertEqual(infos[0].name, "web")
        self.assertTrue(infos[0].running)
        self.assertGreater(infos[0].pid, 0)
        p.kill()
        with self.assertRaises(NotFound):
            p.info()
        self.assertEqual(sb.processes(), [])

    def test_logs_offsets_and_a_follower_that_went_away(self):
        sb = self.sandbox()
        p = sb.start(["sh", "-c", "i=0; while [ $i -lt 40 ]; do echo line$i; i=$((i+1)); "
                      "sleep 0.05; done; echo err >&2"])
        seen = b""
        for c in p.follow(since=0):
            self.assertEqual(c.offset, len(seen))
            seen += c.data
            if len(seen) > 30:
                break  # the client goes away mid-follow
        cut = p.offset
        self.assertEqual(cut, len(seen))
        info = p.wait(timeout=30)
        self.assertIsNotNone(info)
        self.assertEqual(info.exit_code, 0)
        full = p.logs(since=0)
        self.assertTrue(full.exited)
        self.assertEqual(full.stdout, b"".join(b"line%d\n" % i for i in range(40)))
        self.assertEqual(full.stderr, b"err\n")
        self.assertEqual(full.end_offset, len(full.data))
        rest = p.logs(since=cut)  # exactly what the follower missed
        self.assertEqual(seen + rest.data, full.data)
        self.assertEqual(p.logs(since=full.end_offset).data, b"")

    def test_start_follow_one_request(self):
        sb = self.sandbox()
        p = sb.start(["sh", "-c", "echo one; echo two >&2; sleep 0.2; echo three"], follow=True)
        chunks = list(p.follow())
        self.assertEqual(b"".join(c.data for c in chunks), b"one\ntwo\nthree\n")
        self.assertEqual(chunks[0].offset, 0)
        self.assertEqual(p.offset, 14)
        self.assertEqual(p.wait(timeout=30).exit_code, 0)
        q = sb.start(["sh", "-c", "echo x"], follow=True)  # not followed: logs() still works
        self.assertTrue(until(lambda: q.logs().data == b"x\n"))
        with self.assertRaises(BadRequest) as cm:
            self.alpha._request("POST", sb._path("procs"),
                                raw_body=b'{"argv": ["true"], "follow": "yes"}')
        self.assertIn("follow", cm.exception.message)

    def test_stdin_signal_wait(self):
        sb = self.sandbox()
        p = sb.start(["cat"])
        p.write(b"hello \xff\n")
        p.close_stdin()
        info = p.wait(timeout=30)
        self.assertEqual((info.state, info.exit_code), ("exited", 0))
        self.assertEqual(p.logs().stdout, b"hello \xff\n")
        with self.assertRaises(Conflict):  # stdin of a process that exited
            p.write(b"late")
        q = sb.start(["sleep", "1000"])
        self.assertIsNone(q.wait(timeout=0.2))
        q.signal("TERM")
        info = q.wait(timeout=30)
        self.assertEqual(info.signal, 15)
        with self.assertRaises(BadRequest) as cm:
            q.signal("NOPE")
        self.assertIn("signal", cm.exception.message)

    def test_pty_resize_and_ctrl_c(self):
        sb = self.sandbox()
        t = sb.start(["sh", "-i"], pty=True, rows=30, cols=90)
        self.assertIsInstance(t, Pty)
        t.write("stty size\n")
        self.assertTrue(until(lambda: b"30 90" in t.logs().data))
        t.resize(40, 100)
        t.write("stty size\n")
        self.assertTrue(until(lambda: b"40 100" in t.logs().data))
        t.write("sleep 100; echo slept\n")
        time.sleep(0.3)
        t.write(b"\x03")  # Ctrl-C reaches the foreground job
        t.write("echo after-$((1+1))\n")
        self.assertTrue(until(lambda: b"after-2" in t.logs().data))
        self.assertNotIn(b"\r\nslept\r\n", t.logs().data)  # the job was interrupted
        for rows, cols in ((0, 0), (100000, 100000)):
            with self.assertRaises(BadRequest) as cm:
                t.resize(rows, cols)
            self.assertIn("rows", cm.exception.message)
        plain = sb.start(["sleep", "100"])
        with self.assertRaises(BadRequest):  # not a terminal
            Pty(sb, plain.handle).resize(10, 10)

    def test_attach_over_websocket(self):
        sb = self.sandbox()
        t = sb.start(["sh", "-c", "echo ready; stty -echo; while read l; do "
                      "echo \"got $l $(stty size)\"; done"], pty=True, rows=30, cols=90)
        self.assertTrue(until(lambda: b"ready" in t.logs().data))

        def read_until(a, needle):
            got = b""
            deadline = time.monotonic() + 20
            while needle not in got and time.monotonic() < deadline:
                d = a.recv(timeout=20)
                if d is None:
                    break
                got += d
            return got
        with t.attach() as a:
            self.assertIn(b"ready", read_until(a, b"ready"))  # the replay first
            a.resize(33, 77)
            time.sleep(0.2)
            a.send(b"hi\n")
            self.assertIn(b"got hi 33 77", read_until(a, b"got hi 33 77"))
        self.assertTrue(t.info().running)  # detached: it runs on
        with t.attach(since=t.info().end_offset) as a:  # no replay from the end
            a.send(b"again\n")
            self.assertTrue(read_until(a, b"got again").startswith(b"got again"))
        q = sb.start(["sh", "-c", "read x; exit 3"], pty=True)
        with q.attach() as a:
            a.send(b"x\n")
            while a.recv(timeout=20) is not None:
                pass
            self.assertEqual(a.exit.exit_code, 3)
        other = Sandbox(self.beta, {"id": sb.id})
        with self.assertRaises(NotFound):
            Pty(other, t.handle).attach()
        with self.assertRaises(NotFound):
            Pty(sb, "0123456789abcdef").attach()

    def test_session_keeps_state_and_framing_is_unforgeable(self):
        sb = self.sandbox()
        s = sb.shell()
        self.assertIsInstance(s, Session)
        self.assertEqual(s.run("mkdir -p /tmp/app && cd /tmp/app && export X=1").exit_code, 0)
        r = s.run("pwd; echo $X")
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (0, "/tmp/app\n1\n", ""))
        r = s.run("echo oops >&2; exit_code=7; (exit 7)")
        self.assertEqual((r.exit_code, r.stderr), (7, "oops\n"))
        # markers, binary, no trailing newline: none of it moves where the run ends
        r = s.run(r"printf '__RUNG_END__ 0\n\000\377exit 0'; head -c 2000 /dev/urandom "
                  r">/dev/null; printf 'tail-no-newline'; false")
        self.assertEqual(r.exit_code, 1)
        self.assertEqual(r.stdout_bytes, b"__RUNG_END__ 0\n\x00\xffexit 0tail-no-newline")
        self.assertEqual(s.run("echo $X").stdout, "1\n")
        r = s.run("sleep 100", timeout=0.5)
        self.assertTrue(r.timed_out)
        self.assertEqual(s.run("echo still").stdout, "still\n")
        self.assertTrue(any(i.session and i.handle == s.handle for i in sb.processes()))

    def test_bad_input_and_scopes(self):
        sb = self.sandbox()
        with self.assertRaises(NotFound):
            sb.process("0123456789abcdef")
        with self.assertRaises(NotFound):
            sb.process("not-a-handle")
        p = sb.start(["sleep", "100"])
        # another scope: neither the sandbox nor the handle exists for it
        spoof = Sandbox(self.beta, {"id": sb.id})
        with self.assertRaises(NotFound):
            spoof.process(p.handle)
        with self.assertRaises(NotFound):
            spoof.start(["true"])
        with self.assertRaises(NotFound):
            Process(spoof, p.handle).kill()
        self.assertTrue(p.info().running)
        # a handle of another sandbox of the same scope
        other = self.alpha.acquire(SandboxKey(thread="thread-other", agent="a"),
                                   SandboxSpec(kind="pyprocs"))
        with self.assertRaises(NotFound):
            other.process(p.handle)
        for body, field in ((b"{", "body"), (b'{"argv": 5}', "argv"),
                            (b'{"argv": ["true"], "rows": 10}', "rows"),
                            (b'{"argv": ["true"], "nope": 1}', "nope"), (b"{}", "argv")):
            with self.assertRaises(BadRequest, msg=body) as cm:
                self.alpha._request("POST", sb._path("procs"), raw_body=body)
            self.assertIn(field, cm.exception.message)
        with self.assertRaises(BadRequest):
            self.alpha._request("POST", sb._path(f"procs/{p.handle}/resize"),
                                raw_body=b'{"rows": "x", "cols": 1}')

    def test_async(self):
        sb = self.sandbox()

        async def go():
            p = await sb.start_async(["sh", "-c", "echo one; sleep 0.2; echo two"])
            chunks = [c.data async for c in p.follow_async(since=0)]
            info = await p.wait_async(timeout=30)
            s = await sb.shell_async()
            r = await s.run_async("echo $((6*7))")
            return b"".join(chunks), info, r, await sb.processes_async()
        data, info, r, procs = asyncio.run(go())
        self.assertEqual(data, b"one\ntwo\n")
        self.assertEqual(info.exit_code, 0)
        self.assertEqual(r.stdout, "42\n")
        self.assertEqual(len(procs), 2)


if __name__ == "__main__":
    unittest.main()
