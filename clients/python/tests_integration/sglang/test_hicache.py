"""OrbitKvHiCacheStorage against the installed SGLang (0.5.23) and a real Manager.

Every backend is made by SGLang's ``StorageBackendFactory`` (``dynamic`` with this package's module
and class, as ``--hicache-storage-backend dynamic`` does; ``file`` for SGLang's own ``HiCacheFile``,
the reference) and bound to real SGLang host pools (``MHATokenToKVPoolHost`` /
``MLATokenToKVPoolHost`` built from real CPU device pools). What does not run here is the
device<->host copy (CUDA kernels): tests write what a backup would have put in the host pool with
the pool's own ``set_from_flat_data_page`` (see ``hicache_support``).

- Engine cadence: a whole ``HiCacheController`` stores a request's pages through its backup thread
  and loads them back through one prefetch, with OrbitKV (v1 zero-copy and legacy interfaces) and
  with ``HiCacheFile``: same hits, same bytes; a page stored through one interface is read through
  the other; a cache salt or unknown tokens are misses.
- The same sequence of set / exists / get through OrbitKV and ``HiCacheFile`` gives the same answers
  and bytes, for MHA and MLA pages in the page_first and page_first_direct layouts, through both
  interfaces; ``batch_exists`` is the longest consecutive prefix (a gap stops it).
- Namespaces: another model, TP rank (MHA), pipeline stage or layout never sees a page; MLA pages
  are shared by TP ranks, as SGLang's own backends share them.
- Refusals: unsupported layouts, configs and sidecar pools fail the attach with a clear error;
  bad input is a counted miss; ``get_stats`` is SGLang's ``StorageMetrics``.
- A Manager killed, stopped (slow) or restarted: every call answers a miss at once or within
  ``timeout_s`` (lists, never None), failures are counted, and the backend recovers.
"""

import os
import shutil
import signal
import tempfile
import time
import unittest
import uuid
from array import array

from orbitkv.protocol import contract_bytes
from orbitkv.state import FullGroup, RecoveryContract
from tests.test_manager import JAR, REQUIRE_ENVIRONMENT, ManagerProcess

try:
    import torch
    from sglang.srt.mem_cache.hicache_storage import HiCacheFile, HiCacheStorage, PoolName, PoolTransfer
    from sglang.srt.mem_cache.radix_cache import RadixKey
    from sglang.srt.observability.metrics_collector import StorageMetrics

    from orbitkv.sglang.backend import OrbitKvHiCacheStorage, UnsupportedLayout

    from . import hicache_support as hs
    MISSING = None
except ImportError as e:  # pragma: no cover - only without the SGLang environment
    if REQUIRE_ENVIRONMENT:
        raise
    MISSING = f"SGLang is not importable here: {e}"

LAYOUTS = [("mha", "page_first"), ("mha", "page_first_direct"), ("mla", "page_first"), ("mla", "page_first_direct")]

manager = None


def setUpModule():
    global manager
    if JAR and not MISSING:
        os.environ.pop("SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR", None)  # HiCacheFile must use our directory
        manager = ManagerProcess()


def tearDownModule():
    if manager is not None:
        assert manager.stop() == 0


def unique(prefix: str) -> str:
    """A model name of its own per test, so that no test sees another's pages in the shared Manager."""
    return f"{prefix}/{uuid.uuid4().hex[:12]}"


@unittest.skipUnless(JAR and not MISSING, MISSING or "ORBITKV_JAR is not set")
class HiCacheCase(unittest.TestCase):
    def file_dir(self) -> str:
        path = tempfile.mkdtemp(prefix="hicache-file-")
        self.addCleanup(shutil.rmtree, path, True)
        return path

    def orbitkv(self, kind: str, pool, model: str, socket=None, **config):
        extra = hs.orbitkv_extra(socket or manager.socket, **config.pop("extra", {}))
        backend = hs.create_backend("dynamic", hs.storage_config(kind, extra, model=model, **config), pool)
        self.addCleanup(backend.close)
        self.assertIsInstance(backend, OrbitKvHiCacheStorage)
        return backend

    def reference(self, kind: str, pool, model: str):
        backend = hs.create_backend("file", hs.storage_config(kind, {"file_storage_path": self.file_dir()},
                                                              model=model), pool)
        self.assertIsInstance(backend, HiCacheFile)
        return backend

    def assertPagesAt(self, pool, indices, images, msg=None):
        self.assertEqual([hs.page_image(pool, s) for s in hs.page_starts(indices)], images, msg)


class EngineCadence(HiCacheCase):
    """One HiCacheController per backend; each request is one backup or one prefetch."""

    def harness(self, kind, backend, extra, model):
        harness = hs.ControllerHarness(kind, "page_first", backend, extra, model)
        self.addCleanup(harness.close)
        return harness

    def test_backup_then_prefetch_through_the_controller_matches_the_file_backend(self):
        for kind in ("mha", "mla"):
            with self.subTest(kind=kind):
                model = unique(f"cadence-{kind}")
                harnesses = {
                    "file": self.harness(kind, "file", {"file_storage_path": self.file_dir()}, model),
                    "orbitkv-v1": self.harness(kind, "dynamic", hs.orbitkv_extra(manager.socket, 1), model),
                    "orbitkv-legacy": self.harness(kind, "dynamic", hs.orbitkv_extra(manager.socket, 0), model),
                }
                self.assertEqual(harnesses["orbitkv-v1"].controller.page_get_func.__name__, "_page_get_zero_copy")
                self.assertEqual(harnesses["orbitkv-legacy"].controller.page_get_func.__name__, "_generic_page_get")
                first, second = list(range(1000, 1000 + 6 * hs.PAGE_TOKENS)), list(range(5000, 5000 + 3 * hs.PAGE_TOKENS))
                answers = {}
                for name in ("file", "orbitkv-v1"):
                    h = harnesses[name]
                    slots, images = hs.fill_pages(h.host, 6, seed=11)
                    self.assertEqual(h.backup(slots, first, hs.storage_keys(first)), len(first), name)
                    loaded_at, found, loaded = h.prefetch(f"{name}-1", first)
                    self.assertEqual((found, loaded), (len(first), len(first)), name)
                    self.assertPagesAt(h.host, loaded_at, images, name)
                    answers[name] = (found, loaded, [hs.page_image(h.host, s) for s in hs.page_starts(loaded_at)])
                    # tokens never stored and the same tokens under another cache salt: misses
                    self.assertEqual(h.prefetch(f"{name}-2", second)[1:], (0, 0), name)
                    salted = RadixKey(array("l", first), cache_salt="tenant-b")
                    self.assertEqual(h.prefetch(f"{name}-3", salted)[1:], (0, 0), name)
                self.assertEqual(answers["file"], answers["orbitkv-v1"])

                # legacy interface reads what the zero-copy one stored, and the other way round
                legacy, v1 = harnesses["orbitkv-legacy"], harnesses["orbitkv-v1"]
                loaded_at, found, loaded = legacy.prefetch("legacy-1", first)
                self.assertEqual((found, loaded), (len(first), len(first)))
                self.assertEqual([hs.page_image(legacy.host, s) for s in hs.page_starts(loaded_at)], answers["file"][2])
                slots, images = hs.fill_pages(legacy.host, 3, seed=12)
                self.assertEqual(legacy.backup(slots, second, hs.storage_keys(second)), len(second))
                loaded_at, found, loaded = v1.prefetch("v1-2", second)
                self.assertEqual((found, loaded), (len(second), len(second)))
                self.assertPagesAt(v1.host, loaded_at, images)
                self.assertEqual(v1.backend.counters()["internal_errors"], 0)


class SameAnswersAsHiCacheFile(HiCacheCase):
    """The same calls on OrbitKV and SGLang's file backend, on one host pool per layout."""

    def test_set_exists_get_legacy_and_zero_copy(self):
        for kind, layout in LAYOUTS:
            with self.subTest(kind=kind, layout=layout):
                pool = hs.host_pool(kind, layout)
                model = unique(f"same-{kind}-{layout}")
                ours, ref = self.orbitkv(kind, pool, model), self.reference(kind, pool, model)
                slots, images = hs.fill_pages(pool, 4, seed=21)
                starts = hs.page_starts(slots)
                flat = [pool.get_data_page(s, flat=True) for s in starts]
                keys = hs.storage_keys(list(range(200, 200 + 4 * hs.PAGE_TOKENS)))

                for backend in (ours, ref):
                    self.assertEqual((backend.exists(keys[0]), backend.batch_exists(keys)), (False, 0))
                    self.assertIsNone(backend.get(keys[0], pool.get_dummy_flat_data_page()))
                    self.assertTrue(backend.set(keys[0], flat[0]))  # legacy set
                    self.assertTrue(backend.exists(keys[0]))
                    self.assertEqual(hs.tensor_bytes(backend.get(keys[0], pool.get_dummy_flat_data_page())), images[0])
                # pages 1 and 3: OrbitKV through the zero-copy interface, HiCacheFile (no v1) through batch_set
                page_slots = lambda pages: torch.cat([slots[p * hs.PAGE_TOKENS:(p + 1) * hs.PAGE_TOKENS] for p in pages])
                self.assertEqual(ours.batch_set_v1([keys[1], keys[3]], page_slots([1, 3])), [True, True])
                self.assertTrue(ref.batch_set([keys[1], keys[3]], [flat[1], flat[3]]))

                # a gap at page 2 stops the prefix
                self.assertEqual(ours.batch_exists(keys), 2)
                self.assertEqual(ref.batch_exists(keys), 2)
                self.assertEqual([ours.exists(k) for k in keys], [ref.exists(k) for k in keys])
                self.assertEqual([ours.exists(k) for k in keys], [True, True, False, True])
                fresh = hs.slots_of(pool, 4)
                self.assertEqual(ours.batch_get_v1(keys, fresh), [True, True, False, False])
                self.assertPagesAt(pool, fresh[:2 * hs.PAGE_TOKENS], images[:2])
                self.assertEqual(hs.page_image(pool, hs.page_starts(fresh)[2]), bytes(len(images[2])))  # untouched
                ours_pages = ours.batch_get(keys, [pool.get_dummy_flat_data_page() for _ in keys])
                ref_pages = ref.batch_get(keys, [pool.get_dummy_flat_data_page() for _ in keys])
                self.assertEqual([hs.tensor_bytes(t) for t in ours_pages[:2]], images[:2])
                self.assertEqual([hs.tensor_bytes(t) for t in ref_pages[:2]], images[:2])
                # both miss page 2; SGLang reads up to the first None, and OrbitKV stops there
                self.assertEqual((ours_pages[2], ref_pages[2], ours_pages[3]), (None, None, None))
                self.assertEqual(hs.tensor_bytes(ref_pages[3]), images[3])

                # fill the gap through v1: both now hold all four, and every interface reads them
                self.assertEqual(ours.batch_set_v1([keys[2]], page_slots([2])), [True])
                self.assertTrue(ref.set(keys[2], flat[2]))
                self.assertEqual((ours.batch_exists(keys), ref.batch_exists(keys)), (4, 4))
                fresh = hs.slots_of(pool, 4)
                self.assertEqual(ours.batch_get_v1(keys, fresh), [True] * 4)
                self.assertPagesAt(pool, fresh, images)
                self.assertEqual([hs.tensor_bytes(ours.get(k)) for k in keys], images)  # pages 1-3 came through v1
                self.assertEqual([hs.tensor_bytes(t) for t in ref.batch_get(keys, [pool.get_dummy_flat_data_page()
                                                                                   for _ in keys])], images)
                # storing again is idempotent (the Manager already holds them)
                self.assertEqual(ours.batch_set_v1(keys, slots), [True] * 4)
                self.assertEqual(ours.counters()["write_already_resident"], 4)
                self.assertEqual(ours.counters()["internal_errors"], 0)

    def test_batch_exists_is_the_longest_consecutive_prefix(self):
        pool = hs.host_pool("mha")
        model = unique("prefix")
        ours, ref = self.orbitkv("mha", pool, model), self.reference("mha", pool, model)
        slots, _ = hs.fill_pages(pool, 5, seed=31)
        keys = hs.storage_keys(list(range(300, 300 + 5 * hs.PAGE_TOKENS)))
        stored = [0, 1, 3, 4]
        for p in stored:
            one = slots[p * hs.PAGE_TOKENS:(p + 1) * hs.PAGE_TOKENS]
            self.assertEqual(ours.batch_set_v1([keys[p]], one), [True])
            self.assertTrue(ref.set(keys[p], pool.get_data_page(int(one[0]), flat=True)))
        for query, expected in ((keys, 2), (keys[2:], 0), (keys[3:], 2), (keys[:2], 2), ([], 0),
                                (keys[:2] + keys[3:], 4)):
            self.assertEqual(ours.batch_exists(query), expected, query)
            self.assertEqual(ref.batch_exists(query), expected, query)
        self.assertEqual(ours.batch_get_v1(keys[3:], hs.slots_of(pool, 2)), [True, True])


class Namespaces(HiCacheCase):
    def stored(self, kind, layout="page_first", **config):
        pool = hs.host_pool(kind, layout)
        backend = self.orbitkv(kind, pool, **config)
        slots, images = hs.fill_pages(pool, 2, seed=41)
        keys = hs.storage_keys(list(range(400, 400 + 2 * hs.PAGE_TOKENS)))
        self.assertEqual(backend.batch_set_v1(keys, slots), [True, True])
        return keys, images

    def reader(self, kind, layout="page_first", **config):
        pool = hs.host_pool(kind, layout)
        return pool, self.orbitkv(kind, pool, **config)

    def test_other_model_rank_stage_dp_rank_or_layout_never_sees_a_page(self):
        model = unique("ns")
        for kind, writer, others in (
                ("mha", dict(model=model, tp_rank=0, tp_size=2),
                 [dict(model=unique("ns-other"), tp_rank=0, tp_size=2), dict(model=model, tp_rank=1, tp_size=2),
                  dict(model=model, tp_rank=0, tp_size=1), dict(model=model, tp_rank=0, tp_size=2, pp_rank=1,
                                                                pp_size=2),
                  dict(model=model, tp_rank=0, tp_size=2, dp_rank=1)]),
                ("mla", dict(model=model, tp_rank=0, tp_size=2),
                 [dict(model=unique("ns-other"), tp_rank=0, tp_size=2),
                  dict(model=model, tp_rank=0, tp_size=2, pp_rank=1, pp_size=2),
                  dict(model=model, tp_rank=0, tp_size=2, dp_rank=1)])):
            keys, _ = self.stored(kind, **writer)
            for config in others:
                with self.subTest(kind=kind, reader=config):
                    pool, backend = self.reader(kind, **config)
                    self.assertEqual(backend.batch_exists(keys), 0)
                    self.assertFalse(backend.exists(keys[0]))
                    self.assertEqual(backend.batch_get_v1(keys, hs.slots_of(pool, 2)), [False, False])
                    self.assertEqual(backend.batch_get(keys), [None, None])
            with self.subTest(kind=kind, reader="page_first_direct"):
                pool, backend = self.reader(kind, "page_first_direct", **writer)
                self.assertEqual(backend.batch_exists(keys), 0)

    def test_mla_pages_are_shared_by_tp_ranks_and_mha_pages_are_not(self):
        model = unique("shared")
        keys, images = self.stored("mla", model=model, tp_rank=0, tp_size=4)
        pool, rank3 = self.reader("mla", model=model, tp_rank=3, tp_size=4)
        slots = hs.slots_of(pool, 2)
        self.assertEqual(rank3.batch_get_v1(keys, slots), [True, True])
        self.assertPagesAt(pool, slots, images)
        self.assertEqual((rank3.identity.tp_size, rank3.identity.tp_rank), (1, 0))
        keys, _ = self.stored("mha", model=model, tp_rank=0, tp_size=4)
        _, mha_rank3 = self.reader("mha", model=model, tp_rank=3, tp_size=4)
        self.assertEqual(mha_rank3.batch_exists(keys), 0)
        self.assertEqual((mha_rank3.identity.tp_size, mha_rank3.identity.tp_rank), (4, 3))
        # the recovery contract every adapter registers (the vLLM tier's test checks the same bytes);
        # the namespace names SGLang's page layout, so a vLLM page of the same model is never read
        pages = mha_rank3._pages
        self.assertEqual(contract_bytes(pages.contract),
                         contract_bytes(RecoveryContract(pages.namespace.page_tokens, [FullGroup(0)])))
        self.assertTrue(pages.namespace.kv_layout.startswith("sglang-hicache"), pages.namespace.kv_layout)


class Refusals(HiCacheCase):
    def test_unsupported_layouts_and_configs_fail_the_attach(self):
        extra = hs.orbitkv_extra(manager.socket)
        for kind in ("mha", "mla"):
            with self.subTest(kind=kind, layout="layer_first"):
                pool = hs.host_pool(kind, "layer_first")
                with self.assertRaisesRegex(UnsupportedLayout, "layout 'layer_first' is not supported"):
                    hs.create_backend("dynamic", hs.storage_config(kind, extra), pool)
        pool = hs.host_pool("mha")
        cases = [
            ("no socket", hs.storage_config("mha", {**hs.ORBITKV_CLASS, "interface_v1": 1}), "socket_path"),
            ("bad timeout", hs.storage_config("mha", {**extra, "timeout_s": 0}), "timeout_s"),
            ("no model", hs.storage_config("mha", extra, model=""), "names no model"),
            ("split heads", hs.storage_config("mha", extra, should_split_heads=True, tp_lcm_size=2), "split heads"),
            ("dcp", hs.storage_config("mla", extra, tp_size=2, dcp_size=2, logical_page_size=2 * hs.PAGE_TOKENS),
             "decode context parallelism"),
            ("mla flag on an MHA pool", hs.storage_config("mla", extra), "disagrees"),
        ]
        for name, config, message in cases:
            with self.subTest(name):
                with self.assertRaisesRegex(ValueError, message):
                    hs.create_backend("dynamic", config, pool)

    def test_sidecar_pools_are_refused_and_v2_transfers_miss(self):
        pool = hs.host_pool("mla")
        backend = self.orbitkv("mla", pool, unique("sidecar"))
        backend.register_mem_host_pool_v2(pool, PoolName.KV)  # the KV pool itself is fine
        with self.assertRaisesRegex(UnsupportedLayout, "indexer"):
            backend.register_mem_host_pool_v2(hs.host_pool("mla"), PoolName.INDEXER)
        slots, _ = hs.fill_pages(pool, 2, seed=51)
        keys = hs.storage_keys(list(range(600, 600 + 2 * hs.PAGE_TOKENS)))
        self.assertEqual(backend.batch_set_v1(keys, slots), [True, True])
        transfer = PoolTransfer(name=PoolName.INDEXER, host_indices=slots, keys=keys)
        self.assertEqual(backend.batch_exists_v2(keys, [transfer]).kv_hit_pages, 0)
        self.assertEqual(backend.batch_exists_v2(keys).kv_hit_pages, 2)  # KV alone
        self.assertEqual(backend.batch_get_v2([transfer]), {PoolName.INDEXER: [False, False]})
        self.assertEqual(backend.batch_set_v2([transfer]), {PoolName.INDEXER: [False, False]})
        self.assertEqual(backend.counters()["refused_sidecar"], 3)

    def test_bad_input_is_a_counted_miss_and_stats_are_sglang_storage_metrics(self):
        pool = hs.host_pool("mha")
        backend = self.orbitkv("mha", pool, unique("input"))
        slots, images = hs.fill_pages(pool, 2, seed=61)
        keys = hs.storage_keys(list(range(700, 700 + 2 * hs.PAGE_TOKENS)))
        self.assertEqual(backend.batch_set_v1(keys, slots[:-1]), [False, False])  # one slot short
        self.assertEqual(backend.batch_set_v1(keys, slots + 1), [False, False])  # not page-aligned
        self.assertEqual(backend.batch_set_v1(keys, slots + pool.size), [False, False])  # outside the pool
        self.assertFalse(backend.set(keys[0], torch.zeros(3, dtype=torch.bfloat16)))  # not a page
        self.assertEqual(backend.batch_get(keys, [pool.get_dummy_flat_data_page()]), [None, None])  # 1 target for 2
        self.assertEqual(backend.batch_exists([b"not a str"]), 0)
        self.assertEqual(backend.counters()["rejected_input"], 6)
        self.assertEqual(backend.batch_exists(keys), 0)  # none of it was stored

        self.assertEqual(backend.batch_set_v1(keys, slots), [True, True])
        self.assertEqual(backend.batch_get_v1(keys, hs.slots_of(pool, 2)), [True, True])
        self.assertFalse(backend.clear())
        stats = backend.get_stats()
        self.assertIsInstance(stats, StorageMetrics)
        self.assertEqual((stats.prefetch_pgs, stats.backup_pgs), ([2], [2]))
        self.assertEqual(len(stats.prefetch_bandwidth), 1)
        self.assertGreater(stats.prefetch_bandwidth[0], 0)
        self.assertEqual({k: stats.counters[k] for k in ("get_pages_read", "set_pages_stored", "clear_refused")},
                         {"get_pages_read": 2, "set_pages_stored": 2, "clear_refused": 1})
        self.assertEqual(backend.get_stats().prefetch_pgs, [])  # drained
        self.assertTrue(issubclass(OrbitKvHiCacheStorage, HiCacheStorage))


class PagesStagedFromSsd(HiCacheCase):
    """A Manager whose DRAM holds 64 pages, writing every page through to SSD: pages evicted from
    DRAM come back PENDING, and SGLang's exists-then-get sequence still hits them."""

    def test_exists_waits_for_staging_and_get_reads_the_staged_pages(self):
        own = ManagerProcess(dram_bytes="4m", ssd_bytes="64m",
                             extra_args=["--ssd-policy", "write-through", "--set", "dramSlotBytes=64k"])
        self.addCleanup(own.stop)
        pool = hs.host_pool("mha")
        backend = self.orbitkv("mha", pool, unique("ssd"), socket=own.socket)
        tokens = list(range(900, 900 + 96 * hs.PAGE_TOKENS))
        keys = hs.storage_keys(tokens)
        first_images = None
        for batch in range(12):  # 96 pages through 8 host pages, as SGLang's backup batches would
            slots, images = hs.fill_pages(pool, 8, seed=100 + batch)
            self.assertEqual(backend.batch_set_v1(keys[batch * 8:(batch + 1) * 8], slots), [True] * 8)
            pool.free(slots)
            first_images = first_images or images
        self.assertEqual(backend.batch_exists(keys[:8]), 8)  # one call: it waited for the staging
        self.assertGreaterEqual(backend.counters()["pending"], 1, "the first pages came back from SSD")
        fresh = hs.slots_of(pool, 8)
        self.assertEqual(backend.batch_get_v1(keys[:8], fresh), [True] * 8)
        self.assertPagesAt(pool, fresh, first_images)


class ManagerFailures(HiCacheCase):
    """A Manager of its own, killed, stopped and restarted under a backend."""

    TIMEOUT_S = 0.5
    RETRY_S = 0.2

    def all_misses(self, backend, pool, keys, slots):
        """Every call answers a miss, in the type SGLang expects; returns the slowest call's seconds."""
        worst = 0.0
        checks = [
            (lambda: backend.batch_get_v1(keys, hs.slots_of(pool, len(keys))), [False] * len(keys)),
            (lambda: backend.batch_get(keys), [None] * len(keys)),
            (lambda: backend.get(keys[0]), None),
            (lambda: backend.batch_exists(keys), 0),
            (lambda: backend.exists(keys[0]), False),
            (lambda: backend.batch_set_v1(keys, slots), [False] * len(keys)),
            (lambda: backend.batch_set(keys, [pool.get_data_page(s, flat=True) for s in hs.page_starts(slots)]),
             False),
        ]
        for call, expected in checks:
            began = time.monotonic()
            self.assertEqual(call(), expected)
            worst = max(worst, time.monotonic() - began)
        return worst

    def wait_until(self, condition, deadline_s: float, what: str):
        deadline = time.monotonic() + deadline_s
        while not condition():
            self.assertLess(time.monotonic(), deadline, what)
            time.sleep(self.RETRY_S / 2)

    def test_killed_stopped_and_restarted_manager_gives_misses_then_recovers(self):
        sock_dir = tempfile.mkdtemp(prefix="okv-sock-")
        self.addCleanup(shutil.rmtree, sock_dir, True)
        socket_path = os.path.join(sock_dir, "m.sock")
        own = ManagerProcess(socket_path=socket_path)
        pool = hs.host_pool("mha")
        backend = self.orbitkv("mha", pool, unique("failures"), socket=socket_path,
                               extra={"timeout_s": self.TIMEOUT_S, "retry_after_s": self.RETRY_S})
        slots, images = hs.fill_pages(pool, 3, seed=71)
        keys = hs.storage_keys(list(range(800, 800 + 3 * hs.PAGE_TOKENS)))
        self.assertEqual(backend.batch_set_v1(keys, slots), [True] * 3)

        # slow: the Manager stops answering; each call waits at most timeout_s, then the store is down
        os.kill(own.proc.pid, signal.SIGSTOP)
        try:
            worst = self.all_misses(backend, pool, keys, slots)
            self.assertLess(worst, self.TIMEOUT_S + 1.0)
            self.assertGreaterEqual(backend.counters()["failures_timeout"], 1)
        finally:
            os.kill(own.proc.pid, signal.SIGCONT)
        self.wait_until(lambda: backend.batch_exists(keys) == 3, 10, "reconnect after SIGCONT")

        # killed: misses at once, counted
        own.proc.kill()
        own.proc.wait(10)
        before = backend.counters()
        worst = self.all_misses(backend, pool, keys, slots)
        self.assertLess(worst, self.TIMEOUT_S + 1.0)
        after = backend.counters()
        failures = ("failures_connect", "failures_error", "failures_timeout", "skipped_down")
        self.assertGreater(sum(after[k] for k in failures), sum(before[k] for k in failures))
        self.assertEqual(after["internal_errors"], 0)
        own.stop()

        # restarted on the same socket: its DRAM is empty (a miss, never a stale hit), then it stores again
        restarted = ManagerProcess(socket_path=socket_path)
        self.addCleanup(restarted.stop)
        self.wait_until(lambda: backend.batch_set_v1(keys, slots) == [True] * 3, 10, "reconnect after restart")
        fresh = hs.slots_of(pool, 3)
        self.assertEqual(backend.batch_get_v1(keys, fresh), [True] * 3)
        self.assertPagesAt(pool, fresh, images)
        self.assertGreaterEqual(backend.counters()["connects"], 3)


if __name__ == "__main__":
    unittest.main()
