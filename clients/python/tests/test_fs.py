"""File operations of rung_client (list_dir, stat, remove, make_dir, move; sync and async)
against a real `rung serve`: results, stable error reasons, another scope's sandbox."""
import asyncio
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rung_client import (BadRequest, Conflict, FileEntry, NotFound,  # noqa: E402
                         SandboxBackend, SandboxKey, SandboxSpec)
from rung_client.testing import Daemon  # noqa: E402

KEY = SandboxKey(thread="fs-thread", agent="agent-1")


class FsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(scopes=("alpha", "beta")).start()
        cls.alpha = SandboxBackend(socket_path=cls.d.socket_path, token=cls.d.tokens["alpha"])
        cls.beta = SandboxBackend(socket_path=cls.d.socket_path, token=cls.d.tokens["beta"])

    @classmethod
    def tearDownClass(cls):
        cls.alpha.dispose_scope()
        cls.beta.dispose_scope()
        cls.d.close()

    def test_ops_and_errors(self):
        sb = self.alpha.acquire(KEY, SandboxSpec(kind="fs"))
        sb.make_dir("a/b", mode=0o700, parents=True)
        sb.write_file("a/f.txt", b"hello")
        sb.exec(["/bin/ln", "-s", "b", "a/link"])
        names = {e.name: e for e in sb.list_dir("a")}
        self.assertEqual(set(names), {"b", "f.txt", "link"})
        self.assertIsInstance(names["b"], FileEntry)
        self.assertEqual((names["b"].kind, names["b"].mode), ("dir", 0o700))
        self.assertEqual((names["f.txt"].kind, names["f.txt"].size), ("file", 5))
        self.assertEqual((names["link"].kind, names["link"].target), ("symlink", "b"))
        self.assertEqual(sb.stat("a/link").kind, "symlink")
        sb.move("a/f.txt", "a/b/g.txt")
        self.assertEqual(sb.read_file("a/b/g.txt"), b"hello")
        with self.assertRaises(NotFound) as e:
            sb.stat("a/f.txt")
        self.assertEqual(e.exception.reason, "not_found")
        with self.assertRaises(BadRequest) as e:
            sb.list_dir("a/b/g.txt")
        self.assertEqual(e.exception.reason, "not_a_directory")
        with self.assertRaises(BadRequest) as e:
            sb.remove("a")
        self.assertEqual(e.exception.reason, "is_a_directory")
        with self.assertRaises(Conflict) as e:
            sb.make_dir("a")
        self.assertEqual(e.exception.reason, "exists")
        # another scope: not found, nothing removed
        with self.assertRaises(NotFound):
            self.beta._json("POST", f"/v1/sandboxes/{sb.id}/fs/rm?path=a&recursive=1")
        self.assertEqual(sb.stat("a/b/g.txt").size, 5)
        with self.assertRaises(NotFound):
            self.beta._json("GET", f"/v1/sandboxes/{sb.id}/stats")
        before = sb.stats()["cpu_usage_us"]
        # one second of CPU time (not of wall time: a loaded host gives less CPU per second)
        sb.exec(["python3", "-c",
                 "import time\nt=time.process_time()\nwhile time.process_time()-t<1: pass"])
        self.assertGreater(sb.stats()["cpu_usage_us"], before + 900000)
        sb.remove("a", recursive=True)
        with self.assertRaises(NotFound):
            sb.stat("a")

    def test_async(self):
        sb = self.alpha.acquire(KEY, SandboxSpec(kind="fs-async"))

        async def go():
            await sb.make_dir_async("x/y", parents=True)
            await sb.move_async("x/y", "x/z")
            entries = await sb.list_dir_async("x")
            st = await sb.stat_async("x/z")
            await sb.remove_async("x", recursive=True)
            return entries, st

        entries, st = asyncio.run(go())
        s = asyncio.run(sb.stats_async())
        self.assertEqual(s["id"], sb.id)
        self.assertGreater(s["memory"]["limit"], 0)
        self.assertGreater(s["disk"]["total"], 0)
        self.assertEqual([e.name for e in entries], ["z"])
        self.assertEqual(st.kind, "dir")
        with self.assertRaises(NotFound):
            sb.stat("x")


if __name__ == "__main__":
    unittest.main()
