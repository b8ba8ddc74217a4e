/* tests/lib/ports_srv.h: the TCP servers the e2e_ports_* cases start inside a sandbox (python3):
 *   echo PORT   read to EOF (the peer's half-close), answer "got N SHA256HEX\n", close
 *   flood PORT  send 64 KiB blocks until the peer goes
 *   http PORT   HTTP/1.1: GET /x answers "path=/x" (+ the X-Probe header, echoed); a request
 *               with "Upgrade: websocket" gets 101 and then every byte echoed back
 *   sink PORT   read and drop; source PORT N: send N MiB then close (the benchmark) */
#ifndef RUNG_TESTS_LIB_PORTS_SRV_H
#define RUNG_TESTS_LIB_PORTS_SRV_H

static const char ports_srv_py[] =
	"import hashlib, socket, sys, threading\n"
	"mode, port = sys.argv[1], int(sys.argv[2])\n"
	"s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
	"s.bind(('127.0.0.1', port)); s.listen(128)\n"
	"def echo(c):\n"
	"    n = 0; h = hashlib.sha256()\n"
	"    while True:\n"
	"        d = c.recv(65536)\n"
	"        if not d: break\n"
	"        n += len(d); h.update(d)\n"
	"    c.sendall(b'got %d %s\\n' % (n, h.hexdigest().encode()))\n"
	"def flood(c):\n"
	"    b = b'x' * 65536\n"
	"    while True: c.sendall(b)\n"
	"def sink(c):\n"
	"    while c.recv(1 << 20): pass\n"
	"def source(c):\n"
	"    b = b'y' * (1 << 20)\n"
	"    for i in range(int(sys.argv[3])): c.sendall(b)\n"
	"def http(c):\n"
	"    f = c.makefile('rb')\n"
	"    while True:\n"
	"        line = f.readline()\n"
	"        if not line: return\n"
	"        path = line.split()[1].decode(); hdr = {}\n"
	"        while True:\n"
	"            l = f.readline().decode().strip()\n"
	"            if not l: break\n"
	"            k, v = l.split(':', 1); hdr[k.strip().lower()] = v.strip()\n"
	"        body = f.read(int(hdr.get('content-length', '0')))\n"
	"        if hdr.get('upgrade', '').lower() == 'websocket':\n"
	"            c.sendall(b'HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\n'\n"
	"                      b'Connection: Upgrade\\r\\n\\r\\n')\n"
	"            while True:\n"
	"                d = f.read1(65536)\n"
	"                if not d: return\n"
	"                c.sendall(d)\n"
	"        out = ('path=%s probe=%s method=%s body=%s' % (path, hdr.get('x-probe', '-'),\n"
	"               line.split()[0].decode(), body.decode())).encode()\n"
	"        c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Type: text/plain\\r\\nX-Inside: yes\\r\\n'\n"
	"                  b'Content-Length: %d\\r\\n\\r\\n' % len(out) + out)\n"
	"def serve(c):\n"
	"    try: globals()[mode](c)\n"
	"    except OSError: pass\n"
	"    c.close()\n"
	"while True:\n"
	"    c, _ = s.accept()\n"
	"    threading.Thread(target=serve, args=(c,), daemon=True).start()\n";

#endif
