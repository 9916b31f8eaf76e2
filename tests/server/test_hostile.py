"""pcached against hostile or careless clients: mutated and random bytes on
the RESP door and the JSON-RPC door (the server keeps serving, no sanitizer
report, no crashed child), the per-worker client limit, the idle timeout,
and a killed maintenance process (restarted; a SAVE waiting on it is
answered by the new one)."""
import http.client
import os
import random
import signal
import socket
import sys
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, free_port, raw, resp_cmd  # noqa: E402

SEED = int(os.environ.get("PCACHED_FUZZ_SEED", "20261130"))


def mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randint(0, 3)
        i = rng.randrange(len(data)) if data else 0
        if op == 0 and data:
            data[i] = rng.randrange(256)
        elif op == 1:
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 2 and data:
            del data[i:i + rng.randint(1, 8)]
        else:
            data[i:i] = rng.choice([b"\r\n", b"*", b"$", b"-1", b"99999999999", b"\x00", b"*0\r\n"])
    return bytes(data)


class Fuzz(unittest.TestCase):
    def test_resp_and_jsonrpc_survive_mutated_input(self):
        rng = random.Random(SEED)
        s = Server(workers=2, max_bulk=4096, max_args=64)
        s.opts.update(http_port=free_port())
        try:
            s.start()
            good = redis.Redis(port=s.port)
            good.set("canary", "alive")
            seeds = [resp_cmd("SET", "k", "v", "EX", "100"), resp_cmd("GET", "k"),
                     resp_cmd("MSET", "a", "1", "b", "2"), resp_cmd("SCAN", "0", "MATCH", "*"),
                     resp_cmd("PERF.KEYS", "*"), resp_cmd("INCRBY", "n", "5"),
                     resp_cmd("EXPIRE", "k", "10", "GT"), b"PING\r\nECHO hi\r\n",
                     resp_cmd("CONFIG", "GET", "*"), resp_cmd("GETEX", "k", "PX", "5")]
            for i in range(400):
                data = mutate(rng, rng.choice(seeds) * rng.randint(1, 3))
                raw(s.port, data, timeout=2, half_close=True)
            for i in range(50):
                raw(s.port, bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))),
                    timeout=2, half_close=True)
            self.assertEqual(good.get("canary"), b"alive")
            body = (b'{"jsonrpc":"2.0","method":"perf_keys","params":{"glob":"*","limit":"5"},'
                    b'"id":1}')
            for i in range(300):
                m = mutate(rng, body)
                c = socket.create_connection(("127.0.0.1", s.opts["http_port"]), timeout=3)
                c.sendall(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(m), m))
                c.shutdown(socket.SHUT_WR)
                try:
                    while c.recv(65536):
                        pass
                except (socket.timeout, ConnectionResetError):
                    pass
                c.close()
            conn = http.client.HTTPConnection("127.0.0.1", s.opts["http_port"], timeout=5)
            conn.request("POST", "/", body=body)
            self.assertEqual(conn.getresponse().status, 200)
            self.assertEqual(good.get("canary"), b"alive")
            self.assertEqual(s.stop(), 0)
            self.assertEqual(s.sanitizer_reports(), [])
        finally:
            s.cleanup()


class Limits(unittest.TestCase):
    def test_maxclients_and_idle_timeout(self):
        with Server(workers=1, maxclients=2, idle_timeout_s=1) as s:
            a = socket.create_connection(("127.0.0.1", s.port))
            b = socket.create_connection(("127.0.0.1", s.port))
            a.sendall(b"PING\r\n")
            self.assertEqual(a.recv(100), b"+PONG\r\n")
            out, closed = raw(s.port, b"PING\r\n", timeout=3)
            self.assertEqual(out, b"-ERR max number of clients reached\r\n")
            self.assertTrue(closed)
            # idle for more than idle_timeout_s: closed by the server
            b.settimeout(5)
            t0 = time.time()
            self.assertEqual(b.recv(100), b"")
            self.assertLess(time.time() - t0, 4)
            a.close()
            b.close()


class Descriptors(unittest.TestCase):
    def test_out_of_descriptors_pauses_accepts_without_spinning(self):
        with Server(workers=1, nofile=48) as s:
            self.assertIn("maxclients 10000: each worker can open only 48", s.log_text())
            first = redis.Redis(port=s.port)
            first.set("fd", "ok")
            socks = []
            for _ in range(80):  # more than the worker can hold
                socks.append(socket.create_connection(("127.0.0.1", s.port), timeout=5))
            time.sleep(0.5)
            worker = first.info("server")["process_id"]

            def cpu():
                with open("/proc/%d/stat" % worker) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                return int(fields[11]) + int(fields[12])  # utime + stime, in ticks
            before = cpu()
            time.sleep(1.0)
            self.assertLess(cpu() - before, 30)  # under 0.3 s of CPU in 1 s: no busy loop
            self.assertEqual(first.get("fd"), b"ok")  # an accepted client is still served
            self.assertIn("pausing accepts", s.log_text())
            for c in socks:
                c.close()
            # accepting again (within the 100 ms pause; a generous deadline)
            again = redis.Redis(port=s.port, socket_timeout=30)
            self.assertTrue(again.ping())


class Maintenance(unittest.TestCase):
    def test_killed_maintenance_process_is_restarted(self):
        s = Server(workers=1)
        s.opts.update(db_url=os.path.join(s.dir, "store"), persist_collections="default")
        try:
            s.start()
            r = redis.Redis(port=s.port)
            r.set("m", "1")
            self.assertTrue(r.save())
            worker = r.info("server")["process_id"]
            maint = [p for p in s.children() if p != worker]
            self.assertEqual(len(maint), 1)
            os.kill(maint[0], signal.SIGKILL)
            t0 = time.time()
            self.assertTrue(r.save())  # answered by the restarted maintenance process
            self.assertLess(time.time() - t0, 10)
            new = [p for p in s.children() if p != worker]
            self.assertEqual(len(new), 1)
            self.assertNotEqual(new[0], maint[0])
            self.assertIn("maintenance (pid %d) killed by signal 9" % maint[0], s.log_text())
            self.assertEqual(s.stop(), 0)
        finally:
            s.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
