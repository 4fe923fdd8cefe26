"""The Python client against a real Manager process: the jar that `bin/orbitkv test` names in
ORBITKV_JAR, started with JAVA_HOME's java on temporary directories and awaited by its ready
line. Publish -> query (HOST_READY) -> read the leased bytes; ENGINE_RESTORE into a region;
release; cancel; an engine restart with a higher epoch hits what the previous one published;
the quick-start example runs and its hit shows in /metrics."""

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from orbitkv import protocol as p
from orbitkv.client import Client, OrbitKvError, PageToPublish, PublishOutcome, fetch_arenas
from orbitkv.state import FullGroup, Namespace, RecoveryContract, page_hashes

JAR = os.environ.get("ORBITKV_JAR")
HERE = os.path.dirname(os.path.abspath(__file__))
QUICKSTART = os.path.join(HERE, "..", "examples", "quickstart.py")
READY = re.compile(r"orbitkv manager ready socket=(\S+) http=(\S+) (?:.* )?pid=(\d+)")
PAGE_TOKENS = 16


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else "java"


class ManagerProcess:
    """One Manager on private temp directories; ``stop`` sends SIGTERM and returns the exit status."""

    def __init__(self, dram_bytes: str = "64m", ssd_bytes: str = "64m", extra_args=(), socket_path=None):
        """``extra_args`` go to ``orbitkv manager`` as they are (e.g. ``["--set", "k=v"]``);
        ``socket_path`` puts the socket at a path of the caller's (a restart on the same path)."""
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.dir = tempfile.mkdtemp(prefix="okv-")
        self.dram_dir = tempfile.mkdtemp(prefix="okv-dram-", dir=shm)
        # REGISTER_REGION files must lie in the Manager's regionDir (default /dev/shm, where the
        # quick start puts its region too) and be the client's own
        self.region_dir = tempfile.mkdtemp(prefix="okv-regions-", dir=shm)
        region_root = shm or self.region_dir
        self.ssd_dir = os.path.join(self.dir, "ssd")
        with open(os.path.join(self.dir, "stderr.log"), "w") as stderr:  # read back if it does not start
            self.proc = subprocess.Popen(
                [java(), "--enable-native-access=ALL-UNNAMED", "-jar", JAR, "manager",
                 "--dram-bytes", dram_bytes, "--ssd-bytes", ssd_bytes, "--http", "0", "--dram-dir", self.dram_dir,
                 "--ssd-dir", self.ssd_dir, "--socket", socket_path or os.path.join(self.dir, "m.sock"),
                 "--set", "regionDir=" + region_root, *extra_args],
                stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=self.dir)
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)  # the ready line, or EOF if it failed
        line = self.proc.stdout.readline() if ready else ""
        match = READY.search(line)
        if not match:
            self.proc.kill()
            with open(os.path.join(self.dir, "stderr.log")) as err:
                raise RuntimeError(f"the Manager did not become ready (exit {self.proc.wait()}): {line!r} {err.read()[-2000:]}")
        self.socket, self.http = match.group(1), match.group(2)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://{self.http}/metrics", timeout=10) as r:
            return r.read().decode()

    _MISSING = object()

    def metric(self, series: str, default=_MISSING) -> float:
        """One series of /metrics (``name`` or ``name{labels}``, as exported); ``default`` when it is
        not exported yet, else AssertionError."""
        match = re.search(r"^" + re.escape(series) + r"\s+(\S+)", self.metrics(), re.MULTILINE)
        if match is None:
            if default is ManagerProcess._MISSING:
                raise AssertionError(f"the Manager exports no {series}")
            return default
        return float(match.group(1))

    def metric_sum(self, name: str, label: str = "") -> float:
        """The sum of every series of ``name`` (any labels, 0 when none) whose labels contain ``label``."""
        return sum(float(m.group(2)) for m in re.finditer(r"^" + re.escape(name) + r"(\{[^}]*\})?\s+(\S+)",
                                                          self.metrics(), re.MULTILINE) if label in (m.group(1) or ""))

    def leases(self) -> int:
        """The leases the Manager holds now (``orbitkv_manager_leases``)."""
        return int(self.metric("orbitkv_manager_leases"))

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        finally:
            self.proc.stdout.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            shutil.rmtree(self.dram_dir, ignore_errors=True)
            shutil.rmtree(self.region_dir, ignore_errors=True)


def wait_for(condition, what: str, timeout_s: float = 10.0, pause_s: float = 0.01) -> None:
    """Waits until ``condition()`` holds, at most ``timeout_s``; AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(pause_s)


# Under ORBITKV_REQUIRE_ENVIRONMENT (set by .ci/run) a missing jar fails the run instead of skipping it.
REQUIRE_ENVIRONMENT = os.environ.get("ORBITKV_REQUIRE_ENVIRONMENT", "") not in ("", "0")
if REQUIRE_ENVIRONMENT and not JAR:
    raise RuntimeError("ORBITKV_JAR is not set and ORBITKV_REQUIRE_ENVIRONMENT is: run through `bin/orbitkv test`")


@unittest.skipUnless(JAR, "ORBITKV_JAR is not set: run through `bin/orbitkv test`, which builds the jar and sets it")
class AgainstManager(unittest.TestCase):
    manager: ManagerProcess

    @classmethod
    def setUpClass(cls):
        cls.manager = ManagerProcess()

    @classmethod
    def tearDownClass(cls):
        status = cls.manager.stop()
        assert status == 0, f"the Manager exited with {status} on SIGTERM"

    def namespace(self, model):
        return Namespace(model, "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1)

    def client(self, model, instance=None, epoch=1):
        """A registered client; each test uses its own instance id, so no test waits on another's disconnect."""
        instance = instance or f"engine-{model}"
        c = Client(self.manager.socket, timeout=20)
        self.addCleanup(c.close)
        ns = self.namespace(model)
        c.register(instance, epoch, ns, RecoveryContract(PAGE_TOKENS, [FullGroup(0)]))
        return c, ns

    @staticmethod
    def prefix(ns, pages, seed=0):
        tokens = [seed * 1000 + t for t in range(pages * PAGE_TOKENS + 1)]
        hashes = page_hashes(ns.digest(), tokens, PAGE_TOKENS)
        images = [bytes([(seed + i * 7 + j) % 251 for j in range(256)]) * 20 for i in range(pages)]
        return tokens, hashes, images

    def test_publish_query_read_release(self):
        client, ns = self.client("host-ready")
        tokens, hashes, images = self.prefix(ns, 3)
        outcomes = client.publish([PageToPublish(0, h, img) for h, img in zip(hashes, images)])
        self.assertEqual(outcomes, [PublishOutcome.SEALED] * 3)

        result = client.wait_settled(client.query(1, {0: hashes}, prompt_tokens=len(tokens)))
        self.assertTrue(result.hit)
        self.assertEqual(result.boundary_tokens, 3 * PAGE_TOKENS)
        pages = list(result.group(0).pages())
        self.assertEqual([i for i, _ in pages], [0, 1, 2])
        for i, page in pages:
            view = client.read_lease(page.lease)
            self.assertEqual(bytes(view), images[i])
            view.release()
        self.assertEqual(client.stats()["leases"], 3)
        self.assertEqual(client.release(1).pages_released, 3)
        self.assertEqual(client.stats()["leases"], 0)

    def test_engine_restore_into_a_region(self):
        client, ns = self.client("engine-restore")
        tokens, hashes, images = self.prefix(ns, 4, seed=3)
        client.publish([PageToPublish(0, h, img) for h, img in zip(hashes, images)])
        result = client.wait_settled(client.query(2, {0: hashes}, prompt_tokens=len(tokens),
                                                  target=p.CompletionTarget.ENGINE_RESTORE))
        self.assertTrue(result.hit)
        region_path = os.path.join(self.manager.region_dir, "region-a")
        region = client.register_region(region_path, 8192, 4)
        done = client.restore(2, region, Client.resident_pages(result))
        self.assertEqual(done.outcome, p.Outcome.OK)
        for i in range(4):
            self.assertEqual(region.page(i)[:len(images[i])], images[i])
        polled = client.poll(2, 0)
        self.assertEqual({pg.state for _, pg in polled.group(0).pages()}, {p.PageState.READY})
        client.release(2)

    def test_engine_restore_into_a_region_passed_as_a_descriptor(self):
        client, ns = self.client("restore-fd")
        tokens, hashes, images = self.prefix(ns, 3, seed=11)
        client.publish([PageToPublish(0, h, img) for h, img in zip(hashes, images)])
        result = client.wait_settled(client.query(4, {0: hashes}, prompt_tokens=len(tokens),
                                                  target=p.CompletionTarget.ENGINE_RESTORE))
        self.assertTrue(result.hit)
        region = client.register_private_region(8192, 3)  # a memfd: nothing in regionDir
        done = client.restore(4, region, Client.resident_pages(result))
        self.assertEqual(done.outcome, p.Outcome.OK)
        for i in range(3):
            self.assertEqual(region.page(i)[:len(images[i])], images[i])
        client.release(4)

    def test_arena_descriptors_come_once_per_ticket(self):
        client, ns = self.client("tickets")
        registered = client.registered
        self.assertTrue(registered.descriptor_socket.endswith("m.sock.fd"))
        for ticket, what in ((registered.ticket, "a replayed ticket"), (bytes(16), "a guessed ticket")):
            with self.subTest(what), self.assertRaises(OrbitKvError) as caught:
                fetch_arenas(registered.descriptor_socket, ticket, len(registered.arenas), 5)
            self.assertEqual(caught.exception.code, p.ErrorCode.TICKET_REFUSED)
        self.assertEqual(client.stats()["leases"], 0)  # the Manager goes on serving

    def test_prepare_is_never_a_hit_and_the_query_of_its_id_is(self):
        client, ns = self.client("prepare")
        tokens, hashes, images = self.prefix(ns, 3, seed=9)
        client.publish([PageToPublish(0, h, img) for h, img in zip(hashes, images)])
        prepared = client.prepare(4, {0: hashes}, prompt_tokens=len(tokens), first_use_millis=50, priority=3)
        self.assertEqual(prepared.outcome, p.PrepareOutcome.ACCEPTED)
        self.assertEqual((prepared.pages_resident, prepared.pages_to_stage), (3, 0))
        self.assertEqual(client.stats()["leases"], 0)  # a prepare leases nothing
        result = client.query(4, {0: hashes}, prompt_tokens=len(tokens))
        self.assertEqual(result.status, p.QueryStatus.FINAL)
        self.assertEqual(result.boundary_tokens, 3 * PAGE_TOKENS)
        client.release(4)
        missing = self.prefix(ns, 2, seed=10)
        nothing = client.prepare(5, {0: missing[1]}, prompt_tokens=len(missing[0]), first_use_millis=0)
        self.assertEqual((nothing.outcome, nothing.pages_to_stage), (p.PrepareOutcome.ACCEPTED, 0))
        stats = client.stats()
        self.assertEqual((stats["prepares"], stats["speculation_held_bytes"]), (0, 0))

    def test_miss_then_cancel_frees_the_operation(self):
        client, ns = self.client("cancel")
        tokens, hashes, _ = self.prefix(ns, 2, seed=5)
        result = client.wait_settled(client.query(3, {0: hashes}, prompt_tokens=len(tokens)))
        self.assertFalse(result.hit)
        self.assertTrue(client.cancel(3).operation_id == 3)
        with self.assertRaises(OrbitKvError) as caught:
            client.poll(3, 0)
        self.assertEqual(caught.exception.code, p.ErrorCode.NOT_FOUND)
        self.assertEqual(client.query(3, {0: hashes}, prompt_tokens=len(tokens)).operation_id, 3)

    def test_restarted_engine_hits_and_fences_the_old_incarnation(self):
        first, ns = self.client("restart", instance="engine-r", epoch=1)
        tokens, hashes, images = self.prefix(ns, 2, seed=9)
        first.publish([PageToPublish(0, h, img) for h, img in zip(hashes, images)])

        second, _ = self.client("restart", instance="engine-r", epoch=2)
        with self.assertRaises((OrbitKvError, ConnectionError)):
            first.stats()  # fenced: ERROR STALE_EPOCH and closed
        result = second.wait_settled(second.query(1, {0: hashes}, prompt_tokens=len(tokens)))
        self.assertTrue(result.hit)
        (_, page0), _ = result.group(0).pages()
        view = second.read_lease(page0.lease)
        self.assertEqual(bytes(view), images[0])
        view.release()
        second.release(1)

    def test_quickstart_runs_and_the_hit_shows_in_metrics(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."))
        run = subprocess.run([sys.executable, QUICKSTART, self.manager.socket], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("restored 4 pages: bytes equal", run.stdout)
        hits = re.search(r'^orbitkv_manager_queries_total\{outcome="hit"\} (\S+)$', self.manager.metrics(), re.M)
        self.assertIsNotNone(hits)
        self.assertGreaterEqual(float(hits.group(1)), 1.0)


class ReadmeQuickStart(unittest.TestCase):
    """The README shows the quick-start example that AgainstManager runs (indentation aside)."""

    def test_readme_shows_the_example(self):
        with open(QUICKSTART, encoding="utf-8") as f:
            source = f.read()
        snippet = source[source.index("# [quickstart]\n") + len("# [quickstart]\n"):source.index("# [/quickstart]")]
        with open(os.path.join(HERE, "..", "..", "..", "README.md"), encoding="utf-8") as f:
            readme = f.read()

        def normalize(text):
            return "\n".join(line.strip() for line in text.splitlines() if line.strip())
        self.assertIn(normalize(snippet), normalize(readme))


if __name__ == "__main__":
    unittest.main()
