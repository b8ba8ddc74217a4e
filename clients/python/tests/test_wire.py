"""unittest suite for rung_client.wire: the request a whole-answer call writes and how its
answer is read, against a scripted peer on a socket pair (no daemon); the daemon's own
answers are read by it in test_client.py."""
import http.client
import socket
import sys
import threading
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rung_client.wire import UnixHTTPConnection  # noqa: E402


class Peer:
    """A connection whose other end sends `answer` (bytes, or chunks of it sent apart) once
    it has read a whole request head and body, then closes if `close`."""

    def __init__(self, answer, close=False):
        self.conn = UnixHTTPConnection("/nonexistent", timeout=5)
        self.conn.sock, self.other = socket.socketpair()
        self.conn.sock.settimeout(5)
        self.request = b""
        chunks = [answer] if isinstance(answer, bytes) else answer
        self.t = threading.Thread(target=self._serve, args=(chunks, close), daemon=True)
        self.t.start()

    def _serve(self, chunks, close):
        while b"\r\n\r\n" not in self.request:
            self.request += self.other.recv(65536)
        head, _, body = self.request.partition(b"\r\n\r\n")
        n = [int(ln.split(b":")[1]) for ln in head.split(b"\r\n")
             if ln.lower().startswith(b"content-length:")]
        while n and len(body) < n[0]:
            body += self.other.recv(65536)
        self.request = head + b"\r\n\r\n" + body
        for c in chunks:
            self.other.sendall(c)
        if close:
            self.other.close()

    def ask(self, method="GET", path="/v1/x", body=None, headers=None):
        self.conn.send_whole(method, path, body, headers or {})
        a = self.conn.read_answer(method)
        self.t.join(5)
        return a

    def close(self):
        self.t.join(5)
        self.conn.close()
        self.other.close()


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nKeep-Alive: timeout=10\r\n\r\nok"


class WireTest(unittest.TestCase):
    def peer(self, answer, close=False):
        p = Peer(answer, close)
        self.addCleanup(p.close)
        return p
    def test_request_in_one_piece(self):
        p = self.peer(OK)
        a = p.ask("POST", "/v1/sandboxes/abc/exec", b'{"argv":["true"]}',
                  {"Authorization": "Bearer t", "Content-Type": "application/json"})
        head, _, body = p.request.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        self.assertEqual(lines[0], b"POST /v1/sandboxes/abc/exec HTTP/1.1")
        self.assertIn(b"Host: localhost", lines)
        self.assertIn(b"Authorization: Bearer t", lines)
        self.assertIn(b"Content-Length: 17", lines)
        self.assertEqual(body, b'{"argv":["true"]}')
        self.assertEqual((a.status, a.body, a.will_close), (200, b"ok", False))
        self.assertEqual(a.getheader("keep-alive"), "timeout=10")
        self.assertIsNotNone(p.conn.sock)  # kept for the next request

    def test_post_without_body_says_length_zero(self):
        p = self.peer(OK)
        p.ask("POST", "/v1/sandboxes/abc/resume")
        self.assertIn(b"Content-Length: 0", p.request.split(b"\r\n"))

    def test_large_body_whole(self):
        big = bytes(range(256)) * 1024  # past 64 KiB: head and body go apart
        p = self.peer(OK)
        p.ask("PUT", "/v1/sandboxes/abc/files?path=/x", big)
        self.assertEqual(p.request.partition(b"\r\n\r\n")[2], big)

    def test_answer_in_pieces(self):
        parts = [OK[:5], OK[5:21], OK[21:-1], OK[-1:]]
        self.assertEqual(self.peer(parts).ask().body, b"ok")

    def test_chunked(self):
        ans = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: 1\r\n\r\n")
        a = self.peer([ans[:40], ans[40:]]).ask()
        self.assertEqual(a.body, b"abc0123456789abcdef")
        self.assertFalse(a.will_close)

    def test_interim_answer_skipped(self):
        a = self.peer(b"HTTP/1.1 100 Continue\r\n\r\n" + OK).ask()
        self.assertEqual((a.status, a.body), (200, b"ok"))

    def test_no_length_reads_to_close(self):
        p = self.peer(b"HTTP/1.1 200 OK\r\n\r\nall of it", close=True)
        a = p.ask()
        self.assertEqual((a.body, a.will_close), (b"all of it", True))
        self.assertIsNone(p.conn.sock)

    def test_connection_close_closes(self):
        p = self.peer(b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        a = p.ask()
        self.assertEqual((a.status, a.will_close), (404, True))
        self.assertIsNone(p.conn.sock)

    def test_bytes_past_the_answer_close(self):
        p = self.peer(OK + b"HTTP/1.1 200 OK\r\n")
        self.assertTrue(p.ask().will_close)
        self.assertIsNone(p.conn.sock)

    def test_head_and_204_have_no_body(self):
        a = self.peer(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n").ask()
        self.assertEqual((a.status, a.body), (204, b""))

    def test_closed_without_answer(self):
        with self.assertRaises(http.client.RemoteDisconnected):
            self.peer(b"", close=True).ask()

    def test_truncated_body(self):
        with self.assertRaises(http.client.IncompleteRead):
            self.peer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", close=True).ask()

    def test_malformed_answers(self):
        for ans, exc in ((b"SSH-2.0-x\r\n\r\n", http.client.BadStatusLine),
                         (b"HTTP/1.1 2x0 OK\r\n\r\n", http.client.BadStatusLine),
                         (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", http.client.HTTPException),
                         (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                          http.client.HTTPException),
                         (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                          http.client.HTTPException),
                         (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                          http.client.HTTPException),
                         (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000, http.client.LineTooLong)):
            with self.subTest(ans=ans[:40]):
                with self.assertRaises(exc):
                    self.peer(ans, close=True).ask()

    def test_injection_refused_before_sending(self):
        c = UnixHTTPConnection("/nonexistent")
        for method, path, headers in (("GET", "/v1/x HTTP/1.1\r\nX: y", {}),
                                      ("GET", "/v1/a b", {}),
                                      ("GET\r\n", "/v1/x", {}),
                                      ("GET", "/v1/x", {"X-Rung-Thread": "t\r\nX-Evil: 1"}),
                                      ("GET", "/v1/x", {"X\nY": "v"})):
            with self.subTest(method=method, path=path, headers=headers):
                with self.assertRaises(ValueError):
                    c.send_whole(method, path, None, headers)
        self.assertIsNone(c.sock)  # refused before any connect


if __name__ == "__main__":
    unittest.main()
