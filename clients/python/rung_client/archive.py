"""Directory trees in and out of a sandbox as tar streams (the daemon's PUT/GET
/v1/sandboxes/{id}/archive?path=P): Sandbox.upload_dir and Sandbox.download_dir use these.

Neither direction holds the tree in memory or in a temporary file: an upload is written by
tarfile into a pipe that http.client sends chunked; a download is read by tarfile straight
from the response. A downloaded tree comes from the sandbox, so it is hostile: each member is
checked (no absolute path, no "..", no link out of the tree, no device, fifo or hard link)
and unpacked with tarfile's "data" filter where this Python has it, into a temporary
directory beside the destination that is renamed into place only once the whole tar is in
and the transfer ended well.
"""
from __future__ import annotations

import http.client
import json
import os
import posixpath
import shutil
import tarfile
import tempfile
import threading
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Iterator

from .client import Forbidden, RungError, _raise_for

if TYPE_CHECKING:
    from .client import Sandbox

HAS_DATA_FILTER = hasattr(tarfile, "data_filter")


def _refuse(name: str, why: str) -> Forbidden:
    return Forbidden(403, "forbidden", f"entry '{name}': {why}", "permission_denied")


def _link_inside(name: str, target: str) -> bool:
    """A symlink at name (relative to the tree) with this target stays inside the tree: not
    absolute, and ".." only as a leading run no deeper than the link's directory ("x/.."
    through a symlink x climbs from where x points, so it is refused, as rung cp does)."""
    if not target or target.startswith("/"):
        return False
    depth = name.count("/")
    named = False
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if named or depth < 0:
                return False
        elif part not in ("", "."):
            named = True
    return True


def check_member(m: tarfile.TarInfo) -> None:
    """Raise Forbidden naming the member unless it is safe to unpack under any directory."""
    name = m.name
    if not name or "\0" in name or name.startswith("/"):
        raise _refuse(name, "an absolute or empty path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _refuse(name, "a path with '..'")
    if m.islnk():
        raise _refuse(name, "hard links are refused")
    if m.issym():
        if not _link_inside(posixpath.normpath(name), m.linkname):
            raise _refuse(name, f"symlink to '{m.linkname}' points out of the tree")
    elif not (m.isreg() or m.isdir()):
        raise _refuse(name, "devices, fifos and sockets are refused")


def _through_link(into: str, name: str) -> bool:
    """Does name (unpacked under into) pass through a symlink already unpacked there? A tree
    rung sends never has one (a symlink's tree is not followed), and a write through one is
    how a tar climbs out (a/l -> .., then a/l/l2 -> .., then a/l/l2/x)."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    path = into
    for p in parts[:-1]:
        path = os.path.join(path, p)
        if os.path.islink(path):
            return True
    return False


def _checked(tf: tarfile.TarFile, into: str) -> Iterator[tarfile.TarInfo]:
    for m in tf:
        check_member(m)
        if _through_link(into, m.name):
            raise _refuse(m.name, "a path through a symlink of the tree")
        if not HAS_DATA_FILTER:  # what the "data" filter does to modes and owners
            m.mode &= 0o755
            m.uid, m.gid, m.uname, m.gname = os.getuid(), os.getgid(), "", ""
        yield m


def _query(path: str) -> str:
    return "?" + urllib.parse.urlencode({"path": path})


def upload_dir(sb: "Sandbox", local_dir: str | os.PathLike[str], remote_dir: str,
               timeout: float | None = None) -> dict[str, Any]:
    root = Path(local_dir)
    if not root.is_dir():
        raise NotADirectoryError(f"local_dir: {str(root)!r} is not a directory")
    rfd, wfd = os.pipe()
    reader: BinaryIO = os.fdopen(rfd, "rb")
    writer: BinaryIO = os.fdopen(wfd, "wb")
    failed: list[BaseException] = []

    def produce() -> None:
        try:
            with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tf:
                for child in sorted(root.iterdir()):
                    tf.add(str(child), arcname=child.name)  # symlinks stay symlinks
        except BaseException as e:  # noqa: BLE001 (re-raised by the caller below)
            failed.append(e)
        finally:
            try:
                writer.close()  # flushes: EPIPE when the upload was answered early
            except OSError as e:
                if not failed:
                    failed.append(e)

    t = threading.Thread(target=produce, name="rung-upload-dir", daemon=True)
    t.start()
    b = sb.backend
    headers = dict(b._headers(), **{"Content-Type": "application/x-tar"})
    conn = b._conn(timeout)
    conn.blocksize = 1 << 16
    try:
        try:
            conn.request("PUT", sb._path("archive") + _query(remote_dir), body=reader,
                         headers=headers)  # a file without a length: sent chunked
        except OSError:
            pass  # the daemon answered early (404, 413) and closed: read its answer below
        try:
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            if failed:
                raise failed[0] from e
            raise RungError(0, "unavailable", f"archive upload: {e}") from e
        if resp.status >= 400:
            _raise_for(resp.status, raw)
    finally:
        reader.close()  # a producer still writing gets EPIPE and ends
        t.join()
        conn.close()
    if failed:
        raise failed[0]
    return json.loads(raw)


def _unpack(tf: tarfile.TarFile, into: str) -> None:
    if HAS_DATA_FILTER:
        tf.extractall(into, members=_checked(tf, into), filter="data")
    else:
        tf.extractall(into, members=_checked(tf, into))


def download_dir(sb: "Sandbox", remote_dir: str, local_dir: str | os.PathLike[str],
                 timeout: float | None = None) -> None:
    dest = Path(local_dir)
    if os.path.lexists(dest):
        raise FileExistsError(f"local_dir: {str(dest)!r} exists")
    parent = dest.parent
    if not parent.is_dir():
        raise FileNotFoundError(f"local_dir: the parent {str(parent)!r} is no directory")
    conn, resp = sb.backend._open("GET", sb._path("archive") + _query(remote_dir),
                                  timeout=timeout)
    tmp = tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".part", dir=parent)
    try:
        try:
            with tarfile.open(fileobj=resp, mode="r|") as tf:
                _unpack(tf, tmp)
            resp.read()  # to the end: a transfer the daemon cut raises here
        except (OSError, EOFError, http.client.HTTPException, tarfile.TarError) as e:
            if isinstance(e, getattr(tarfile, "FilterError", ())):
                raise _refuse(getattr(e, "tarinfo").name, str(e)) from e
            raise RungError(resp.status, "truncated",
                            f"archive download of '{remote_dir}' cut short ({e!r}); "
                            "nothing was kept") from e
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        conn.close()
