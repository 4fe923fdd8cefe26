"""OrbitKV as an LMCache (0.5.6) MP-mode L2 adapter, against a real Manager.

LMCache's own config parser and adapter factory build the adapter from the ``--l2-adapter`` JSON
a user passes (``native_plugin`` wrapping :class:`orbitkv.lmcache.adapter.OrbitKvConnector`);
every test then drives LMCache's ``NativeConnectorL2Adapter`` with LMCache's ``ObjectKey`` and
``TensorMemoryObj``: stores, lookups and loads with byte equality; each key answered on its own,
gaps included, in a few round trips per batch (one QUERY per key, pipelined; a load reads the
present prefix in one QUERY first; larger batches in slices); a chunk only on SSD staged and
counted present; salts, KV ranks and models kept apart; a Manager that is down, silent or
restarting gives misses and completions, never a hang; LMCache's ``lmcache bench l2`` harness
passes its round-trip verification against OrbitKV (and fails it against a Manager that is down).
"""

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

REQUIRE_ENVIRONMENT = os.environ.get("ORBITKV_REQUIRE_ENVIRONMENT", "") not in ("", "0")
try:
    import torch
    from lmcache.cli.main import main as lmcache_main
    from lmcache.v1.distributed.l2_adapters.config import parse_args_to_l2_adapters_config
    from lmcache.v1.distributed.l2_adapters.native_connector_l2_adapter import NativeConnectorL2Adapter
    from lmcache.v1.distributed.l2_adapters.native_plugin_l2_adapter import NativePluginL2AdapterConfig

    from . import l2_support as s
    LMCACHE = None
except ImportError as e:  # lmcache lives in the vLLM venv (bin/python-env)
    if REQUIRE_ENVIRONMENT:
        raise
    LMCACHE = str(e)

from orbitkv.lmcache import l2_adapter_spec
from orbitkv.lmcache.adapter import OrbitKvConnector
from tests.test_manager import JAR, ManagerProcess

_SCRIPT = os.path.join(os.path.dirname(sys.executable), "lmcache")  # the `lmcache` console script
LMCACHE_COMMAND = [_SCRIPT] if os.path.exists(_SCRIPT) else [sys.executable, "-m", "lmcache.cli.main"]
CLIENT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KB = 1024
MANAGER = None


def setUpModule():
    global MANAGER
    if JAR and not LMCACHE:
        MANAGER = ManagerProcess(dram_bytes="64m")


def tearDownModule():
    if MANAGER is not None:
        assert MANAGER.stop() == 0


@unittest.skipUnless(JAR and not LMCACHE, f"needs ORBITKV_JAR and lmcache ({LMCACHE})")
class LMCacheL2Adapter(unittest.TestCase):

    def scratch(self):
        """A temporary directory removed after the test."""
        directory = tempfile.mkdtemp(prefix="okv-lmcache-")
        self.addCleanup(shutil.rmtree, directory, True)
        return directory

    def adapter(self, socket_path=None, **params):
        adapter = s.orbitkv_adapter(socket_path or MANAGER.socket, **params)
        self.addCleanup(adapter.close)
        return adapter

    def test_lmcache_factory_builds_the_connector_from_the_user_json(self):
        spec = l2_adapter_spec(MANAGER.socket, "bfloat16", 256, kv_layout="KV_2LTD", timeout_s=1.5)
        adapter = s.build_adapter(json.loads(json.dumps(spec)))
        self.addCleanup(adapter.close)
        self.assertIsInstance(adapter, NativeConnectorL2Adapter)
        connector = adapter._client
        self.assertIsInstance(connector, OrbitKvConnector)
        self.assertEqual(connector.timeout_s, 1.5)
        self.assertEqual(adapter.report_status()["type"], "OrbitKvConnector")
        self.assertTrue(adapter.report_status()["is_healthy"])
        ns = connector.namespace_of("org/model-a")
        self.assertEqual((ns.model_id, ns.page_tokens, ns.dtype), ("org/model-a", 256, "bfloat16;kv=bfloat16"))
        self.assertTrue(ns.kv_layout.startswith("lmcache:l2-object:KV_2LTD"), ns.kv_layout)
        # the config LMCache parsed is its own native_plugin config
        parsed = parse_args_to_l2_adapters_config(argparse.Namespace(l2_adapter=[json.dumps(spec)]))
        self.assertIsInstance(parsed.adapters[0], NativePluginL2AdapterConfig)
        # a misconfiguration fails when LMCache builds the adapter, never later
        with self.assertRaises(TypeError):  # dtype missing
            s.build_adapter({**spec, "adapter_params": {"socket_path": MANAGER.socket, "chunk_size": 256}})
        with self.assertRaises(ValueError):
            s.build_adapter(l2_adapter_spec(MANAGER.socket, "bfloat16", "256"))
        with self.assertRaises(ValueError):
            s.build_adapter(l2_adapter_spec(MANAGER.socket, "bfloat16", 256, model="a@b"))

    def test_store_lookup_load_round_trip_with_gaps(self):
        adapter = self.adapter()
        ks = s.keys(8, first=100)
        stored = [0, 1, 2, 4, 5, 7]  # gaps at 3 and 6: per-key answers, not a prefix
        originals = s.objects(8, 64 * KB, seed=1)
        self.assertTrue(s.store(adapter, [ks[i] for i in stored], [originals[i] for i in stored]))
        expected = [i in stored for i in range(8)]
        self.assertEqual(s.lookup(adapter, ks), expected)

        sinks = s.objects(8, 64 * KB, seed=99)
        untouched = [o.raw_data.clone() for o in sinks]
        self.assertEqual(s.load(adapter, ks, sinks), expected)
        for i in range(8):
            want = originals[i].raw_data if expected[i] else untouched[i]
            self.assertTrue(torch.equal(sinks[i].raw_data, want), f"chunk {i}")
        stats = adapter._client.snapshot()
        self.assertEqual((stats["keys_stored"], stats["keys_found"], stats["keys_loaded"]), (6, 6, 6))
        self.assertEqual(stats["errors"], 0)

    def test_a_batch_with_gaps_is_answered_per_key_in_a_few_round_trips(self):
        adapter = self.adapter()
        ks = s.keys(64, first=300)
        stored = list(range(0, 64, 2))  # every other chunk: 32 gaps, the worst case for a prefix QUERY
        originals = s.objects(64, 8 * KB, seed=2)
        self.assertTrue(s.store(adapter, [ks[i] for i in stored], [originals[i] for i in stored]))
        self.assertEqual(s.lookup(adapter, ks[:8]), [True, False] * 4)
        expected = [i in stored for i in range(64)]
        client = adapter._client._stores.store("org/model-a")._client
        queries = s.metric(MANAGER.metrics(), "orbitkv_manager_queries_total")
        named = s.metric(MANAGER.metrics(), "orbitkv_manager_contains_pages_total")  # every location
        with s.RoundTrips(client) as trips:
            self.assertEqual(s.lookup(adapter, ks), expected)
        # one CONTAINS names the 64 keys: one round trip, no QUERY, nothing to release
        self.assertEqual((trips.pipelined, trips.calls, trips.requests), (0, 1, 1))
        self.assertEqual(s.metric(MANAGER.metrics(), "orbitkv_manager_queries_total") - queries, 0)
        self.assertEqual(s.metric(MANAGER.metrics(), "orbitkv_manager_contains_pages_total") - named, 64)
        # a load: the present prefix (key 0) in one QUERY, then keys 2..63 each on its own, pipelined;
        # the RELEASEs are written, not waited for
        sinks = s.objects(64, 8 * KB)
        with s.RoundTrips(client) as trips:
            self.assertEqual(s.load(adapter, ks, sinks), expected)
        self.assertEqual((trips.calls, trips.pipelined, trips.requests), (1, 1, 1 + 62))
        for i in stored:
            self.assertTrue(torch.equal(sinks[i].raw_data, originals[i].raw_data), f"chunk {i}")
        self.assertTrue(all(int(sinks[i].raw_data.count_nonzero()) == 0 for i in range(1, 64, 2)))
        # a load of what the lookup found: one QUERY for all 32 (and one RELEASE, not waited for)
        hits = s.objects(32, 8 * KB)
        with s.RoundTrips(client) as trips:
            self.assertEqual(s.load(adapter, [ks[i] for i in stored], hits), [True] * 32)
        self.assertEqual((trips.calls, trips.pipelined, trips.requests), (1, 0, 1))
        for i, sink in zip(stored, hits):
            self.assertTrue(torch.equal(sink.raw_data, originals[i].raw_data), f"chunk {i}")
        self.assertIs(adapter._client._stores.store("org/model-a")._client, client, "no reconnect")
        self.assertEqual(client.stats()["leases"], 0, "nothing held after a batch")

    def test_lookups_queued_together_share_one_contains_and_each_gets_its_own_answer(self):
        adapter = self.adapter(num_workers=1, keys_per_round=9)
        connector = adapter._client
        ks = s.keys(15, first=5000)
        stored = [1, 4, 5, 9, 14]
        self.assertTrue(s.store(adapter, [ks[i] for i in stored], s.objects(5, 8 * KB, seed=12)))
        client = connector._stores.store("org/model-a")._client
        batches = [ks[0:3], ks[3:6], ks[6:9], ks[9:12], ks[12:15]]
        with s.RoundTrips(client) as trips:
            with connector._queue._cond:  # the one worker takes nothing until all five are queued
                tasks = [adapter.submit_lookup_and_lock_task(b, {}) for b in batches]
            found = [s.lookup_result(adapter, task) for task in tasks]
        self.assertEqual(found, [[i in stored for i in range(first, first + 3)] for first in range(0, 15, 3)])
        # 9 keys a round: the first three lookups go together, then the last two
        self.assertEqual((trips.calls, trips.pipelined), (2, 0))
        self.assertEqual(connector.snapshot()["exists_merged"], 3)
        for b, hits in zip(batches, found):
            adapter.submit_unlock([k for k, hit in zip(b, hits) if hit])

    def test_stores_queued_together_share_one_publish_and_each_gets_its_own_outcome(self):
        adapter = self.adapter(num_workers=1, keys_per_round=9)
        connector = adapter._client
        ks = s.keys(15, first=6000)
        objs = s.objects(15, 8 * KB, seed=13)
        self.assertTrue(s.store(adapter, ks[:1], objs[:1]))  # connects the model's store
        client = connector._stores.store("org/model-a")._client
        batches = [range(0, 3), range(3, 6), range(6, 9), range(9, 12), range(12, 15)]
        with s.RoundTrips(client) as trips:
            with connector._queue._cond:  # the one worker takes nothing until all five are queued
                tasks = [adapter.submit_store_task([ks[i] for i in b], [objs[i] for i in b]) for b in batches]
            done = {}
            deadline = time.monotonic() + 10
            while len(done) < len(tasks):
                done.update(adapter.pop_completed_store_tasks())
                self.assertLess(time.monotonic(), deadline, f"stores not completed: {done}")
                time.sleep(0.01)
        self.assertTrue(all(done[t].is_successful() for t in tasks), "each job completed, each stored")
        # 9 keys a round: the first three stores go together, then the last two; each a reserve and a commit
        self.assertEqual((trips.calls, trips.pipelined), (4, 0))
        self.assertEqual(connector.snapshot()["sets_merged"], 3)
        sinks = s.objects(15, 8 * KB)
        self.assertEqual(s.load(adapter, ks, sinks), [True] * 15)
        for i in range(15):
            self.assertTrue(torch.equal(sinks[i].raw_data, objs[i].raw_data), f"chunk {i}")

    def test_a_batch_larger_than_a_round_is_sliced(self):
        adapter = self.adapter(keys_per_round=16)
        ks = s.keys(40, first=3000)
        stored = [0, 15, 16, 17, 39]  # both edges of each slice of 16
        self.assertTrue(s.store(adapter, [ks[i] for i in stored], s.objects(5, 8 * KB, seed=11)))
        client = adapter._client._stores.store("org/model-a")._client
        with s.RoundTrips(client) as trips:
            self.assertEqual(s.lookup(adapter, ks), [i in stored for i in range(40)])
        self.assertEqual((trips.pipelined, trips.calls), (0, 3), "3 slices of <= 16 keys, one CONTAINS each")
        with s.RoundTrips(client) as trips:
            self.assertEqual(s.load(adapter, ks, s.objects(40, 8 * KB)), [i in stored for i in range(40)])
        self.assertLessEqual(trips.round_trips, 3 * 4)
        self.assertLessEqual(max(trips.requests_per_round), 16)

    def test_a_chunk_only_on_ssd_counts_as_present_and_is_staged_by_its_load(self):
        manager = ManagerProcess(dram_bytes="16m", ssd_bytes="64m",
                                 extra_args=["--ssd-policy", "write-through"])
        self.addCleanup(manager.stop)
        adapter = self.adapter(manager.socket, timeout_s=5)
        ks = s.keys(384, first=4000)
        originals = s.objects(384, 64 * KB, seed=40)
        for start in range(0, 384, 32):  # 24 MiB through a 16 MiB DRAM tier: the first chunks leave DRAM
            deadline = time.monotonic() + 20  # NO_SPACE while the SSD writer catches up: store again
            while not s.store(adapter, ks[start:start + 32], originals[start:start + 32]):
                self.assertLess(time.monotonic(), deadline, f"batch at {start} was never stored")
        deadline = time.monotonic() + 20
        while s.metric(manager.metrics(), "orbitkv_publish_ssd_written_total", result="committed") < 384:
            self.assertLess(time.monotonic(), deadline, "the write-through copies never all landed on SSD")
            time.sleep(0.05)
        self.assertGreater(s.metric(manager.metrics(), "orbitkv_dram_evictions_total"), 0)

        def pending_queries():
            return s.metric(manager.metrics(), "orbitkv_manager_queries_total", outcome="pending")

        def contained(at):
            return s.metric(manager.metrics(), "orbitkv_manager_contains_pages_total", location=at)

        on_ssd = contained("ssd")
        self.assertEqual(s.lookup(adapter, ks[:2] + ks[-2:]), [True] * 4)
        self.assertGreaterEqual(contained("ssd") - on_ssd, 2, "chunks 0 and 1 were only on SSD")
        # a load waits for chunks only on SSD too: chunk 2 in the prefix QUERY, chunk 3 (after a gap) alone
        before = pending_queries()
        sinks = s.objects(3, 64 * KB)
        gap = s.keys(1, first=9000)
        self.assertEqual(s.load(adapter, ks[2:3] + gap + ks[3:4], sinks), [True, False, True])
        self.assertGreaterEqual(pending_queries() - before, 2, "chunks 2 and 3 were only on SSD")
        self.assertTrue(torch.equal(sinks[0].raw_data, originals[2].raw_data))
        self.assertTrue(torch.equal(sinks[2].raw_data, originals[3].raw_data))
        self.assertEqual(int(sinks[1].raw_data.count_nonzero()), 0)

    def test_salts_ranks_and_groups_name_different_pages(self):
        adapter = self.adapter()
        base = s.keys(1, first=500)
        variants = [s.keys(1, first=500, salt="tenant-b"), s.keys(1, first=500, kv_rank=1),
                    s.keys(1, first=500, group=1)]
        self.assertTrue(s.store(adapter, base, s.objects(1, 16 * KB, seed=5)))
        self.assertEqual(s.lookup(adapter, base), [True])
        for variant in variants:
            self.assertEqual(s.lookup(adapter, variant), [False], variant)
            self.assertEqual(s.load(adapter, variant, s.objects(1, 16 * KB)), [False], variant)

    def test_a_chunk_of_another_size_is_a_miss(self):
        adapter = self.adapter()
        ks = s.keys(1, first=900)
        self.assertTrue(s.store(adapter, ks, s.objects(1, 64 * KB, seed=3)))
        short = s.objects(1, 32 * KB)
        self.assertEqual(s.load(adapter, ks, short), [False])
        self.assertEqual(int(short[0].raw_data.count_nonzero()), 0)
        self.assertEqual(adapter._client.snapshot()["size_mismatch"], 1)

    def test_two_models_never_share(self):
        adapter = self.adapter()
        a, b = s.keys(2, model="org/model-a", first=700), s.keys(2, model="org/model-b", first=700)
        self.assertTrue(s.store(adapter, a, s.objects(2, 16 * KB, seed=7)))
        self.assertEqual(s.lookup(adapter, a), [True, True])
        self.assertEqual(s.lookup(adapter, b), [False, False])
        self.assertEqual(s.load(adapter, b, s.objects(2, 16 * KB)), [False, False])
        connector = adapter._client
        self.assertNotEqual(connector.namespace_of("org/model-a").digest(),
                            connector.namespace_of("org/model-b").digest())
        self.assertEqual(sorted(connector.snapshot()["stores"]), ["org/model-a", "org/model-b"])
        # the same model under another dtype is another namespace
        fp8 = s.build_adapter(l2_adapter_spec(MANAGER.socket, "bfloat16", 256, kv_dtype="fp8_e4m3"))
        self.addCleanup(fp8.close)
        self.assertEqual(s.lookup(fp8, a), [False, False])
        # an adapter pinned to model-b refuses model-a's chunks, counted
        pinned = self.adapter(model="org/model-b")
        self.assertFalse(s.store(pinned, a, s.objects(2, 16 * KB, seed=8)))
        self.assertEqual(s.lookup(pinned, a), [False, False])
        self.assertEqual(pinned._client.snapshot()["refused_model"], 4)

    def test_request_cadence_one_lookup_per_request(self):
        """Eight requests of growing prefixes, as LMCache's prefetch controller issues them: one
        lookup per request, load what it found, store the rest; a second pass hits everything."""
        adapter = self.adapter()
        images = {}
        for request in range(8):
            ks = s.keys(request + 1, model="org/cadence", first=2000)
            found = s.lookup(adapter, ks)
            self.assertEqual(found, [i < request for i in range(request + 1)], f"request {request}")
            hits = [i for i, f in enumerate(found) if f]
            sinks = s.objects(len(hits), 8 * KB)
            self.assertEqual(s.load(adapter, [ks[i] for i in hits], sinks), [True] * len(hits))
            for i, sink in zip(hits, sinks):
                self.assertTrue(torch.equal(sink.raw_data, images[i]))
            new = s.objects(1, 8 * KB, seed=3000 + request)
            images[request] = new[0].raw_data
            self.assertTrue(s.store(adapter, ks[request:], new))
        self.assertEqual(s.lookup(adapter, s.keys(8, model="org/cadence", first=2000)), [True] * 8)
        stats = adapter._client.snapshot()
        self.assertEqual(stats["submitted_exists"], 9)
        self.assertEqual(stats["stores"]["org/cadence"]["connects"], 1)

    def test_a_manager_that_is_down_gives_misses_and_completions(self):
        missing = os.path.join(self.scratch(), "no-manager.sock")
        adapter = self.adapter(missing, timeout_s=0.5)
        ks, objs = s.keys(4, first=1), s.objects(4, 8 * KB, seed=1)
        started = time.monotonic()
        self.assertFalse(s.store(adapter, ks, objs, timeout_s=5))
        self.assertEqual(s.lookup(adapter, ks, timeout_s=5), [False] * 4)
        self.assertEqual(s.load(adapter, ks, s.objects(4, 8 * KB), timeout_s=5), [False] * 4)
        self.assertLess(time.monotonic() - started, 3.0)
        store = adapter._client.snapshot()["stores"]["org/model-a"]
        self.assertGreaterEqual(store["failures_connect"], 1)
        self.assertGreater(store["failures_connect"] + store["skipped_down"], 2)

    def test_a_silent_manager_bounds_every_batch_and_a_full_queue_rejects(self):
        silent = s.SilentManager()
        self.addCleanup(silent.close)
        adapter = self.adapter(silent.path, timeout_s=0.3, retry_after_s=5, num_workers=1, queue_depth=1)
        started = time.monotonic()
        tasks = [adapter.submit_lookup_and_lock_task(s.keys(2, first=10 * i), {}) for i in range(4)]
        self.assertLess(time.monotonic() - started, 0.1, "a submit blocked")
        results = {}
        deadline = time.monotonic() + 5
        while len(results) < 4 and time.monotonic() < deadline:
            for task in tasks:
                bitmap = adapter.query_lookup_and_lock_result(task)
                if bitmap is not None:
                    results[task] = [bitmap.test(i) for i in range(len(bitmap))]
            time.sleep(0.01)
        self.assertEqual(len(results), 4, "a lookup never completed")
        self.assertEqual(list(results.values()), [[False, False]] * 4)
        stats = adapter._client.snapshot()
        self.assertGreaterEqual(stats["rejected_full"], 2)
        self.assertGreaterEqual(stats["stores"]["org/model-a"]["failures_connect"], 1)

    def test_a_restarting_manager_misses_then_serves_again(self):
        directory = self.scratch()
        path = os.path.join(directory, "m.sock")
        manager = ManagerProcess(dram_bytes="32m", socket_path=path)
        try:
            adapter = self.adapter(path, timeout_s=1.0, retry_after_s=0.2)
            ks = s.keys(2, first=40)
            self.assertTrue(s.store(adapter, ks, s.objects(2, 8 * KB, seed=4)))
            self.assertEqual(manager.stop(), 0)
            manager = None
            self.assertEqual(s.lookup(adapter, ks, timeout_s=5), [False, False])
            self.assertFalse(s.store(adapter, ks, s.objects(2, 8 * KB, seed=4), timeout_s=5))
            manager = ManagerProcess(dram_bytes="32m", socket_path=path)
            images = s.objects(2, 8 * KB, seed=6)
            deadline = time.monotonic() + 5  # the first batch past retry_after_s reconnects
            while not s.store(adapter, ks, images):
                self.assertLess(time.monotonic(), deadline, "never reconnected")
            sinks = s.objects(2, 8 * KB)
            self.assertEqual(s.load(adapter, ks, sinks), [True, True])
            self.assertTrue(all(torch.equal(a.raw_data, b.raw_data) for a, b in zip(images, sinks)))
            self.assertEqual(adapter._client.snapshot()["stores"]["org/model-a"]["connects"], 2)
        finally:
            if manager is not None:
                manager.stop()

    def test_lmcache_bench_harness_verifies_round_trips(self):
        output = os.path.join(self.scratch(), "result.json")
        ok = subprocess.run(LMCACHE_COMMAND + self._bench_args(MANAGER.socket, output), capture_output=True,
                            text=True, timeout=120, cwd=CLIENT_ROOT, env=dict(
                                os.environ, LMCACHE_DISABLE_BANNER="1", PYTHONWARNINGS="ignore",
                                PYTHONPATH=CLIENT_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")))
        self.assertEqual(ok.returncode, 0, ok.stdout[-4000:] + ok.stderr[-4000:])
        self.assertIn("data verified OK", ok.stdout)
        with open(output) as f:
            result = json.load(f)["metrics"]
        ops = {result[k]["operation"]: result[k] for k in result if k.startswith("op_")}
        for op in ("Store", "Lookup", "Load"):
            self.assertEqual(ops[op]["rounds_timed_out"], 0, op)
            self.assertEqual(ops[op]["total_success"], ops[op]["total_keys"], op)
        # the same run against a Manager that is down fails LMCache's verification (in this process,
        # through the same entry point, to save the 10-15 s of a second interpreter start)
        down = os.path.join(self.scratch(), "none.sock")
        printed = io.StringIO()
        with self.assertRaises(SystemExit) as exit_status, contextlib.redirect_stdout(printed):
            lmcache_main(self._bench_args(down, output + ".down"))
        self.assertEqual(exit_status.exception.code, 1, printed.getvalue()[-4000:])
        self.assertIn("data mismatches", printed.getvalue())

    @staticmethod
    def _bench_args(socket_path, output):
        spec = l2_adapter_spec(socket_path, "bfloat16", 256, revision="harness-test", timeout_s=0.5)
        return ["bench", "l2", "--l2-adapter", json.dumps(spec), "--num-keys", "4", "--in-flight", "2",
                "--data-size-kb", "64", "--rounds", "2", "--warmup-rounds", "1", "--lookup-max-hit-rate", "1.0",
                "--no-skip-verify", "--format", "json", "--output", output]


if __name__ == "__main__":
    unittest.main()
