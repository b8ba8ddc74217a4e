"""The preview route through rung_client: a server inside a sandbox without egress (a plain exec
serving requests in a background thread of the test) reached with sb.port_request / port_url."""
import sys
import threading
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rung_client import SandboxBackend, SandboxKey, SandboxSpec  # noqa: E402
from rung_client.testing import Daemon  # noqa: E402

SERVER = r"""
import http.server, socketserver
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = ('hello from inside ' + self.path).encode()
        self.send_response(200); self.send_header('Content-Length', str(len(b)))
        self.send_header('X-Inside', 'yes'); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
s = socketserver.TCPServer(('127.0.0.1', 8000), H)
for _ in range(2): s.handle_request()
"""


class PortsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(scopes=("alpha", "beta"), tcp=True).start()
        cls.alpha = SandboxBackend(socket_path=cls.d.socket_path, token=cls.d.tokens["alpha"])
        cls.beta = SandboxBackend(socket_path=cls.d.socket_path, token=cls.d.tokens["beta"])

    @classmethod
    def tearDownClass(cls):
        cls.alpha.dispose_scope()
        cls.d.close()

    def test_preview(self):
        sb = self.alpha.acquire(SandboxKey("t", "a"), SandboxSpec(kind="ports"))
        self.assertEqual(sb.port_url(8000, "/x"), f"/v1/sandboxes/{sb.id}/ports/8000/x")
        with self.assertRaises(ValueError):
            sb.port_url(70000)
        sb.write_file("/tmp/srv.py", SERVER)
        t = threading.Thread(target=lambda: sb.exec(["python3", "/tmp/srv.py"], timeout=60))
        t.start()
        try:
            status = None
            for _ in range(100):
                status, headers, body = sb.port_request(8000, path="/a?b=c")
                if status == 200:
                    break
                time.sleep(0.1)  # 503 until it listens
            self.assertEqual(status, 200)
            self.assertEqual(body, b"hello from inside /a?b=c")
            self.assertEqual(headers.get("x-inside"), "yes")
            # another scope: the sandbox does not exist for it
            conn = self.beta._conn(10)
            conn.request("GET", sb.port_url(8000), headers=self.beta._headers())
            self.assertEqual(conn.getresponse().status, 404)
            conn.close()
            # on a TCP backend, port_url is a whole URL (the token still required)
            tcp = SandboxBackend(url=self.d.url, token=self.d.tokens["alpha"]).get(sb.id)
            self.assertTrue(tcp.port_url(8000, "/tcp").startswith("http://127.0.0.1:"))
            status, _, body = tcp.port_request(8000, path="/tcp")
            self.assertEqual((status, body), (200, b"hello from inside /tcp"))
        finally:
            t.join(60)


if __name__ == "__main__":
    unittest.main()
