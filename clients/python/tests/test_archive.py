"""upload_dir / download_dir of rung_client (the daemon's archive route), against a real
`rung serve`: a tree round-trips byte for byte (checksums) with its modes, sync and async;
another scope's sandbox is NotFound; a tree the sandbox made hostile is refused with nothing
left locally; and the client's own member check refuses hostile tars a daemon let through."""
import asyncio
import hashlib
import io
import os
import random
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rung_client import (Forbidden, NotFound, RungError, SandboxBackend,  # noqa: E402
                         SandboxKey, SandboxSpec)
from rung_client import archive  # noqa: E402
from rung_client.testing import Daemon  # noqa: E402

KEY = SandboxKey(thread="archive-thread", agent="agent-1")


def make_tree(root: Path) -> None:
    rnd = random.Random(13)
    (root / "src" / "pkg" / "deep").mkdir(parents=True)
    (root / "empty-dir").mkdir()
    for i in range(40):
        d = root / "src" / ("pkg" if i % 2 else "pkg/deep")
        (d / f"f{i}.bin").write_bytes(rnd.randbytes(rnd.randrange(0, 40000)))
    (root / "big.bin").write_bytes(rnd.randbytes(3 << 20))
    (root / "empty").write_bytes(b"")
    run = root / "src" / "run.sh"
    run.write_text("#!/bin/sh\necho hi\n")
    run.chmod(0o755)


def digest(root: Path) -> dict[str, tuple[str, str]]:
    """path -> (kind and mode, sha256) for everything under root."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            st = p.lstat()
            if p.is_dir():
                out[rel] = (f"dir {st.st_mode & 0o777:o}", "")
            else:
                out[rel] = (f"file {st.st_mode & 0o777:o}", hashlib.sha256(p.read_bytes()).hexdigest())
    return out


class ArchiveTest(unittest.TestCase):
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

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="rung-archive-test-")
        self.addCleanup(self.tmp.cleanup)
        self.dir = Path(self.tmp.name)

    def test_round_trip(self):
        sb = self.alpha.acquire(KEY, SandboxSpec(kind="archive"))
        src = self.dir / "src-tree"
        src.mkdir()
        make_tree(src)
        res = sb.upload_dir(src, "work/tree")
        self.assertEqual(res["path"], "work/tree")
        self.assertGreater(res["bytes"], 3 << 20)
        # inside: the same bytes (sha256sum in the sandbox)
        want = hashlib.sha256((src / "big.bin").read_bytes()).hexdigest()
        r = sb.exec(["sha256sum", "work/tree/big.bin"])
        self.assertEqual(r.stdout.split()[0], want)
        self.assertEqual(sb.exec(["sh", "work/tree/src/run.sh"]).stdout, "hi\n")
        out = self.dir / "out"
        sb.download_dir("work/tree", out)
        self.assertEqual(digest(out), digest(src))
        self.assertEqual([p.name for p in self.dir.iterdir() if p.name.startswith(".")], [])
        # a destination that exists is refused, untouched
        with self.assertRaises(FileExistsError):
            sb.download_dir("work/tree", out)
        # another scope: the sandbox does not exist for it, nothing written or read
        with self.assertRaises(NotFound):
            type(sb)(self.beta, {"id": sb.id}).upload_dir(src, "work/stolen")
        with self.assertRaises(NotFound):
            type(sb)(self.beta, {"id": sb.id}).download_dir("work/tree", self.dir / "stolen")
        self.assertFalse((self.dir / "stolen").exists())
        with self.assertRaises(NotFound):
            sb.stat("work/stolen")
        with self.assertRaises(NotFound) as e:
            sb.download_dir("work/nope", self.dir / "nope")
        self.assertEqual(e.exception.reason, "not_found")

    def test_hostile_tree_from_the_sandbox(self):
        sb = self.alpha.acquire(KEY, SandboxSpec(kind="archive-hostile"))
        src = self.dir / "src-tree"
        src.mkdir()
        make_tree(src)
        sb.upload_dir(src, "h")
        sb.exec(["ln", "-s", "/etc/passwd", "h/zz-evil"])
        out = self.dir / "out"
        # refused before the first byte (403 naming the link) or cut mid-stream (readdir's
        # order decides): either way an error, and nothing left beside out
        with self.assertRaises(RungError) as e:
            sb.download_dir("h", out)
        if isinstance(e.exception, Forbidden):
            self.assertIn("zz-evil", e.exception.message)
        else:
            self.assertEqual(e.exception.code, "truncated")
        self.assertEqual(list(self.dir.iterdir()), [src])

    def test_refused_upload(self):
        sb = self.alpha.acquire(KEY, SandboxSpec(kind="archive-refused"))
        src = self.dir / "fifo-tree"
        src.mkdir()
        os.mkfifo(src / "a-fifo")  # refused by the daemon, named; the rest still sent
        (src / "b.bin").write_bytes(os.urandom(2 << 20))
        with self.assertRaises(Forbidden) as e:
            sb.upload_dir(src, "f")
        self.assertIn("a-fifo", e.exception.message)
        with self.assertRaises(NotADirectoryError):
            sb.upload_dir(src / "b.bin", "f")

    def test_async(self):
        sb = self.alpha.acquire(KEY, SandboxSpec(kind="archive-async"))
        src = self.dir / "a"
        src.mkdir()
        (src / "x.txt").write_text("async\n")

        async def go():
            await sb.upload_dir_async(src, "t")
            await sb.download_dir_async("t", self.dir / "b")

        asyncio.run(go())
        self.assertEqual((self.dir / "b" / "x.txt").read_text(), "async\n")


class _Resp(io.BytesIO):
    status = 200


class _Conn:
    def close(self):
        pass


class _FakeBackend:
    """A daemon that answers every archive GET with the tar given."""

    def __init__(self, tar: bytes):
        self.tar = tar

    def _open(self, method, path, timeout=None):
        return _Conn(), _Resp(self.tar)


class _FakeSandbox:
    def __init__(self, tar: bytes):
        self.backend = _FakeBackend(tar)

    def _path(self, sub):
        return "/v1/sandboxes/x/" + sub


def tar_of(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for ti, data in members:
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return b.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname, ti.mode = kind, link, 0o644
    return ti


class MemberCheckTest(unittest.TestCase):
    """The client's own check, whatever the daemon did: hostile tars are refused naming the
    entry, and nothing is left where the tree was to go."""

    def test_hostile_tars(self):
        cases = [
            ("../escape", tar_of((entry("ok"), b"1"), (entry("../escape"), b"x"))),
            ("/abs", tar_of((entry("/abs"), b"x"))),
            ("a/../../b", tar_of((entry("a/../../b"), b"x"))),
            ("lnk", tar_of((entry("lnk", tarfile.SYMTYPE, "/etc/passwd"), b""))),
            ("d/up", tar_of((entry("d", tarfile.DIRTYPE), b""),
                          (entry("d/up", tarfile.SYMTYPE, "../.."), b""))),
            ("via", tar_of((entry("s", tarfile.SYMTYPE, "."), b""),
                           (entry("via", tarfile.SYMTYPE, "s/.."), b""))),
            ("a/l/x", tar_of((entry("a", tarfile.DIRTYPE), b""),
                             (entry("a/l", tarfile.SYMTYPE, ".."), b""),
                             (entry("a/l/x"), b"x"))),
            ("a/l/l2", tar_of((entry("a", tarfile.DIRTYPE), b""),
                                   (entry("a/l", tarfile.SYMTYPE, ".."), b""),
                                   (entry("a/l/l2", tarfile.SYMTYPE, ".."), b""),
                                   (entry("a/l/l2/evil"), b"x"))),
            ("hard", tar_of((entry("f"), b"x"), (entry("hard", tarfile.LNKTYPE, "f"), b""))),
            ("null", tar_of((entry("null", tarfile.CHRTYPE), b""))),
            ("fifo", tar_of((entry("fifo", tarfile.FIFOTYPE), b""))),
        ]
        with tempfile.TemporaryDirectory() as d:
            for name, tar in cases:
                with self.subTest(name=name):
                    out = Path(d) / "out"
                    with self.assertRaises(Forbidden) as e:
                        archive.download_dir(_FakeSandbox(tar), "t", out)
                    self.assertIn(f"'{name}'", e.exception.message)
                    self.assertEqual(os.listdir(d), [])

    def test_links_inside_are_kept(self):
        tar = tar_of((entry("d", tarfile.DIRTYPE), b""), (entry("d/f"), b"data"),
                     (entry("d/l", tarfile.SYMTYPE, "f"), b""),
                     (entry("d/e/u", tarfile.SYMTYPE, "../f"), b""))
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "out"
            archive.download_dir(_FakeSandbox(tar), "t", out)
            self.assertEqual((out / "d" / "l").read_bytes(), b"data")
            self.assertEqual(os.readlink(out / "d" / "e" / "u"), "../f")

    def test_truncated(self):
        tar = tar_of((entry("f"), b"x" * 100000))[:50000]
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(RungError) as e:
                archive.download_dir(_FakeSandbox(tar), "t", Path(d) / "out")
            self.assertEqual(e.exception.code, "truncated")
            self.assertEqual(os.listdir(d), [])


class MemberCheckWithoutFilterTest(MemberCheckTest):
    """The same on a Python without tarfile's "data" filter (the check of our own)."""

    def setUp(self):
        saved = archive.HAS_DATA_FILTER
        archive.HAS_DATA_FILTER = False
        self.addCleanup(setattr, archive, "HAS_DATA_FILTER", saved)


if __name__ == "__main__":
    unittest.main()
