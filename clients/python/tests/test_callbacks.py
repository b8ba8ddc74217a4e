"""Host callbacks through the daemon and the Python client (docs/callbacks.md): sync and
async, errors, the collected-exec 400, the scope rule on answers, and a client that goes
away mid-callback (the exec is cancelled, the daemon keeps no fd and no pending call)."""
import asyncio
import os
import sys
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rung_client import BadRequest, NotFound, SandboxBackend, SandboxKey, SandboxSpec  # noqa: E402
from rung_client.testing import Daemon  # noqa: E402

KEY = SandboxKey(thread="cb-thread", agent="cb-agent")


def weather(city):
    return {"city": city, "temp_c": 21 if city == "Paris" else 5}


def advice(temp_c, city):
    return f"{city}: {'t-shirt' if temp_c > 15 else 'coat'}"


def broken(**kw):
    raise ValueError("the weather service is down")


class CallbacksTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(scopes=("alpha", "beta")).start()
        cls.alpha = SandboxBackend(socket_path=cls.d.socket_path, token=cls.d.tokens["alpha"])
        cls.beta = SandboxBackend(socket_path=cls.d.socket_path, token=cls.d.tokens["beta"])
        cls.sb = cls.alpha.acquire(KEY, SandboxSpec(
            kind="cb", requires=["exec", "run_code", "host_callbacks"]))

    @classmethod
    def tearDownClass(cls):
        cls.alpha.dispose_scope()
        cls.d.close()

    def test_codeact_sync(self):
        code = ("import rung_host\n"
                "w = rung_host.tools.weather(city='Paris')\n"
                "print(rung_host.tools.advice(**w))\n"
                "try:\n"
                "    rung_host.call('broken')\n"
                "except rung_host.CallbackError as e:\n"
                "    print('error:', e)\n")
        r = self.sb.run_code("python", code,
                             callbacks={"weather": weather, "advice": advice, "broken": broken})
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertEqual(r.stdout, "Paris: t-shirt\nerror: ValueError: the weather service is down\n")

    def test_exec_shell_and_collected_400(self):
        r = self.sb.exec(["sh", "-c", "rung-call weather '{\"city\":\"Oslo\"}'"],
                         callbacks={"weather": weather})
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertEqual(r.stdout, '{"city":"Oslo","temp_c":5}\n')
        with self.assertRaises(BadRequest) as cm:
            self.alpha._json("POST", f"/v1/sandboxes/{self.sb.id}/exec",
                             {"argv": ["true"], "callbacks": ["weather"]})
        self.assertIn("stream", cm.exception.message)

    def test_async(self):
        async def aweather(city):
            await asyncio.sleep(0.01)
            return weather(city)

        async def main():
            return await self.sb.run_code_async(
                "python", "import rung_host\nprint(rung_host.tools.weather(city='Paris')['temp_c'])\n",
                callbacks={"weather": aweather})
        r = asyncio.run(main())
        self.assertEqual(r.stdout, "21\n", r.stderr)

    def test_scope_rule(self):
        seen = []

        def on_cb(ev):
            # beta cannot answer alpha's call: 404, as for anything of another scope
            with self.assertRaises(NotFound):
                self.beta._json("POST", f"/v1/sandboxes/{self.sb.id}/callbacks/{ev['id']}",
                                {"result": 1})
            seen.append(ev["name"])
            self.alpha._json("POST", f"/v1/sandboxes/{self.sb.id}/callbacks/{ev['id']}",
                             {"result": 7})
        s = self.sb._stream("exec", {"argv": ["sh", "-c", "rung-call n '{}'"]}, None, {"n": print})
        s._on_callback = on_cb
        r = s.wait()
        self.assertEqual((seen, r.stdout), (["n"], "7\n"))
        with self.assertRaises(NotFound):  # answered: gone
            self.alpha._json("POST", f"/v1/sandboxes/{self.sb.id}/callbacks/{'0' * 32}",
                             {"result": 1})

    def test_disconnect_mid_callback(self):
        pid = self.d.proc.pid
        self.sb.exec(["rm", "-f", "/tmp/after"])
        fds0 = len(os.listdir(f"/proc/{pid}/fd"))
        s = self.sb._stream("exec", {"argv": ["sh", "-c", "rung-call slow '{}'; touch /tmp/after"]},
                            None, {"slow": print})

        class Gone(Exception):
            pass

        def on_cb(ev):
            s.close()  # the client goes away while the host function "runs"
            raise Gone()
        s._on_callback = on_cb
        with self.assertRaises(Gone):
            s.wait()
        deadline = time.time() + 10
        while time.time() < deadline and len(os.listdir(f"/proc/{pid}/fd")) > fds0:
            time.sleep(0.1)
        self.assertLessEqual(len(os.listdir(f"/proc/{pid}/fd")), fds0)
        time.sleep(1.0)  # not cancelled, the call's error would have let touch run by now
        r = self.sb.exec(["sh", "-c", "test -e /tmp/after && echo ran || echo cancelled"])
        self.assertEqual(r.stdout, "cancelled\n")


if __name__ == "__main__":
    unittest.main()
