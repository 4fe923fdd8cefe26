"""ManagerPages in a cluster: a real etcd and two Manager processes on loopback. Pages published
through Manager A are read through Manager B, which holds none of them: B's QUERY waits for its
peer (``peer_wait_ms``), fetches them from A and settles; the engine sees a PENDING lookup (the
vLLM tier answers RETRY for it), then the bytes A was given. The same store with ``peer_wait_ms=0``
never waits for a peer."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import unittest
import urllib.request

from orbitkv.pages import ManagerPages
from tests.test_manager import JAR, REQUIRE_ENVIRONMENT, ManagerProcess, wait_for
from tests.test_pages import identity, image, names

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
HAS_ETCD = os.access(ETCD, os.X_OK)
if REQUIRE_ENVIRONMENT and not HAS_ETCD:
    raise RuntimeError(f"ORBITKV_REQUIRE_ENVIRONMENT is set and etcd is missing ({ETCD}): install etcd-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """One etcd member on free loopback ports and a temp data directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="okv-etcd-")
        client, peer = free_port(), free_port()
        self.endpoint, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        with open(os.path.join(self.dir, "etcd.log"), "w") as log:
            self.proc = subprocess.Popen(
                [ETCD, "--name", "t", "--data-dir", os.path.join(self.dir, "data"), "--listen-client-urls",
                 self.endpoint, "--advertise-client-urls", self.endpoint, "--listen-peer-urls", peer_url,
                 "--initial-advertise-peer-urls", peer_url, "--initial-cluster", "t=" + peer_url,
                 "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: self._accepts(client), f"etcd accepting on {client}", 20)

    def _accepts(self, port: int) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"etcd exited: see {self.dir}/etcd.log")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


@unittest.skipUnless(JAR and HAS_ETCD, "needs ORBITKV_JAR (bin/orbitkv test) and etcd")
class PeerPagesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.etcd = Etcd()
        cls.token_dir = tempfile.mkdtemp(prefix="okv-token-")
        token = os.path.join(cls.token_dir, "cluster-token")
        with open(os.open(token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("orbitkv-python-peer-test-token-0123456789")
        cls.managers = []
        try:
            for node in ("a", "b"):
                cls.managers.append(ManagerProcess(extra_args=[
                    "--etcd", cls.etcd.endpoint, "--node-id", node, "--cluster-listen", "127.0.0.1:0",
                    "--cluster-token-file", token]))
            for m in cls.managers:
                wait_for(lambda m=m: m.metric("orbitkv_membership_live", 0.0) == 2.0, "both Managers to see each other",
                         30)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for m in cls.managers:
            m.stop()
        cls.etcd.stop()
        shutil.rmtree(cls.token_dir, ignore_errors=True)

    def stores(self):
        """A writer at A; at B a store that never waits for a peer and a reader that does."""
        a, b = self.managers
        out = (ManagerPages(a.socket, identity(), peer_wait_ms=0), ManagerPages(b.socket, identity(), peer_wait_ms=0),
               ManagerPages(b.socket, identity(), peer_wait_ms=3000, timeout_s=10))
        for store in out:
            self.addCleanup(store.close)
        return out

    def test_pages_only_a_peer_holds_are_pending_then_read_through_the_other_manager(self):
        writer, no_wait, reader = self.stores()
        page_names = names(4, b"peer")
        self.assertEqual(writer.write([(n, image(i)) for i, n in enumerate(page_names)]), [True] * 4)
        self.assertEqual(no_wait.contains(page_names), 0, "without a peer wait, B answers what it holds")
        got = {}

        def read_through_b() -> bool:
            got.clear()
            return reader.read_into(page_names, lambda i, view: got.__setitem__(i, bytes(view))) == 4

        # A streams its residency to the catalog's shard owners asynchronously: until the catalog
        # knows the pages, B's lookup settles as a miss (never a wrong page)
        wait_for(read_through_b, "B to read A's pages through the catalog", 30)
        self.assertEqual([got[i] for i in range(4)], [image(i) for i in range(4)])
        self.assertGreaterEqual(reader.snapshot()["pending"], 1, "B's lookup waited for its peer")
        self.assertEqual(no_wait.snapshot()["pending"], 0)
        self.assertGreaterEqual(reader._client.stats()["query_hits"], 1, "B's Manager counted the hit")

    def test_presence_through_a_manager_with_peers_asks_them_for_what_it_does_not_hold(self):
        writer, no_wait, reader = self.stores()
        b = self.managers[1]
        page_names = names(3, b"presence")
        self.assertEqual(writer.write([(n, image(i)) for i, n in enumerate(page_names)]), [True] * 3)
        self.assertEqual(writer.present_each(page_names), [True] * 3, "A holds them")
        self.assertEqual(no_wait.present_each(page_names), [False] * 3, "B holds none, and this store never waits")
        queries = b.metric_sum("orbitkv_manager_queries_total")
        # B's CONTAINS says it has peers; the store asks B with a QUERY per page it does not hold,
        # which B answers through its peer once the catalog knows A's pages
        wait_for(lambda: reader.present_each(page_names) == [True] * 3, "B to find A's pages through its peer", 30)
        self.assertGreaterEqual(b.metric_sum("orbitkv_manager_queries_total") - queries, 3)
        self.assertEqual(no_wait.present_each(page_names), [True] * 3, "B holds them now: fetched from A")


if __name__ == "__main__":
    unittest.main()
