"""OrbitKvConnector driven by the installed vLLM 0.33.0 against real Managers.

Each engine is vLLM's own ``Scheduler`` with the connector its ``KVConnectorFactory`` builds from
``kv_transfer_config``, real ``Request``s hashed by vLLM's block hasher, and the worker connector
over the per-layer KV tensors vLLM's allocator carves out for the CPU attention backend
(``connector_engine.CpuEngine``); the model's forward is a callback that writes random bytes
into the blocks being computed. What is asserted:

a. A request computes and publishes its whole blocks; a second request with the same prefix is
   told by the scheduler that those tokens are computed, the worker restores them into other
   block ids byte for byte, the scheduler's leases are held until the worker has loaded and
   released after, and one QUERY is made per request. A prompt of exactly three blocks gets two:
   the last prompt token is never claimed.
b. A page that left DRAM and whose SSD copy has one flipped byte is a miss from that block on:
   the lookup is PENDING (staged from SSD), the block before it is restored, the flipped one is
   recomputed and never loaded.
c. A Manager killed after the scheduler promised blocks and before the worker loaded them: the
   worker reports those block ids (``get_block_ids_with_load_errors``) and vLLM recomputes them;
   later requests are a miss at once (0 matched tokens, no exception, counted, the step bounded
   by the timeout) and publishes fail counted. MLA and hybrid KV caches are refused when the
   connector is built, in both roles.
   A frozen Manager (SIGSTOP) after a request published: the next request's ``schedule()`` waits
   one ``timeout_s`` (not more) for its QUERY and is a miss, counted as a timeout; a request
   inside ``retry_after_s`` is a miss at once, without waiting (its PREPARE a counted no-op);
   after SIGCONT and that window both roles reconnect (once each) and a request with the prefix
   restores it byte for byte.
   A full Manager (a page above its largest slot: TOO_LARGE; its reservation budget held by
   another engine's open publish: NO_SPACE): publishes are refused and counted, nothing raises,
   neither role reconnects, later requests are misses; once the budget frees, the same
   connections publish and a later request hits.
d. Another ``cache_salt`` or another model dtype never hits the pages of the first.
e. A request added while its pages are only on SSD gets a PREPARE from ``on_new_request``: the
   Manager stages and holds them (no lease) before the request is scheduled; its lookup reuses the
   prepare's id and is FINAL at once (no PENDING answer), restoring them byte for byte (consumed);
   a request aborted while it waits has its prepare cancelled and every held byte returns.
Also: the page copies move exactly the named blocks on the LBNHC layout and with kernel-block
splitting (vLLM's allocator), and each layout names its own pages.

Run: ``ORBITKV_REQUIRE_ENVIRONMENT=1 ORBITKV_JAR=... JAVA_HOME=... var/venv-vllm/bin/python -m
unittest discover -s tests_integration/vllm -t .`` (from ``clients/python``). This file: 27 s on
a quiet 2-core host, up to 80 s on a shared one, 10-25 s of it importing vLLM; six Managers (one
shared by a and d); the frozen-Manager test spends 5 of its 7 s waiting out two timeouts and a
retry window, by design.
Random KV bytes come from ``ORBITKV_TEST_SEED`` (default below), named in failure messages.
"""

from __future__ import annotations

import copy
import glob
import os
import signal
import struct
import tempfile
import time
import unittest

from tests.test_manager import JAR, ManagerProcess, wait_for
from tests_integration.vllm.connector_engine import BLOCK, CpuEngine, cleanup_dir, tiny_llama_dir

import torch  # noqa: E402  (connector_engine sets the vLLM platform before torch/vLLM load)

from orbitkv import protocol as p  # noqa: E402
from orbitkv.client import Client  # noqa: E402
from orbitkv.pages import ManagerPages  # noqa: E402
from orbitkv.state import FullGroup, Namespace, RecoveryContract  # noqa: E402
from orbitkv.vllm.connector import UnsupportedKvLayout  # noqa: E402
from orbitkv.vllm.connector_layout import KvPageBinding  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory  # noqa: E402
from vllm.v1.metrics.cache_hit_source import CacheHitSource  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, MLAAttentionSpec, SlidingWindowSpec)
from vllm.v1.kv_cache_layout import KVCacheLayout  # noqa: E402
from vllm.v1.request import RequestStatus  # noqa: E402
from vllm.v1.worker.utils import allocate_kv_cache  # noqa: E402

SEED = int(os.environ.get("ORBITKV_TEST_SEED", "20261205"))
EXTENT_MAGIC = b"ORBKVEXT"
EXTENT_HEADER_BYTES = 4096


def tokens(base: int, count: int):
    return [base + i for i in range(count)]


class Forward:
    """Stands in for the model: writes random KV bytes into every block a step computes part of."""

    def __init__(self, engine: CpuEngine, seed: int):
        self.engine = engine
        self.generator = torch.Generator().manual_seed(seed)
        self.during = []  # callbacks run inside the step, after start_load_kv

    def __call__(self, req_id, block_ids, positions):
        for check in self.during:
            check(req_id, block_ids, positions)
        touched = sorted({p // BLOCK for p in positions})
        self.engine.fill_blocks([block_ids[b] for b in touched], self.generator)


def new_request(step, req_id):
    for new in step.output.scheduled_new_reqs:
        if new.req_id == req_id:
            return new
    return None


def delta(after, before, key):
    return after[key] - before[key]


@unittest.skipUnless(JAR, "ORBITKV_JAR is not set: run through `bin/orbitkv test`")
class ConnectorTest(unittest.TestCase):
    """One Manager and one bfloat16 engine shared by (a) and (d); (b) and (c) bring their own."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="okv-vllm-")
        cls.manager = ManagerProcess()
        cls.engine = CpuEngine(tiny_llama_dir(cls.tmp), cls.manager.socket)

    @classmethod
    def tearDownClass(cls):
        cls.engine.close()
        status = cls.manager.stop()
        cleanup_dir(cls.tmp)
        assert status == 0, f"the Manager exited with {status} on SIGTERM"

    def compute(self, engine, forward, req_id, prompt, **kw):
        """Admits a request and runs its prefill step; the page images of its whole blocks."""
        engine.request(req_id, prompt, **kw)
        step = engine.step(forward)
        self.assertIsNotNone(new_request(step, req_id), f"{req_id} was not scheduled")
        ids = engine.block_ids(req_id)
        return step, ids, [engine.block_bytes(ids[b]) for b in range(len(prompt) // BLOCK)]

    # -- a ---------------------------------------------------------------------------------------

    def test_a_a_prefix_published_by_one_request_is_restored_into_another_byte_for_byte(self):
        engine, forward = self.engine, Forward(self.engine, SEED)
        prompt = tokens(1000, 3 * BLOCK + 4)
        step1, ids1, images = self.compute(engine, forward, "a-1", prompt)
        self.assertEqual(new_request(step1, "a-1").num_computed_tokens, 0, "nothing was published before")
        saves = step1.output.kv_connector_metadata.saves
        self.assertEqual([s.block_ids for s in saves], [ids1[:3]], "the three whole blocks are published")
        self.assertEqual(engine.worker.snapshot()["pages_saved"], 3)

        held_during_load = []
        forward.during = [lambda *_: held_during_load.append(self.manager.leases())]
        before = engine.connector.snapshot()
        engine.request("a-2", prompt[:3 * BLOCK] + tokens(5000, 10))
        step2 = engine.step(forward)
        forward.during = []
        new = new_request(step2, "a-2")
        self.assertIsNotNone(new)
        self.assertEqual(new.num_computed_tokens, 3 * BLOCK, "the scheduler takes the three blocks as computed")
        self.assertEqual(step2.output.num_scheduled_tokens["a-2"], 10)
        ids2 = engine.block_ids("a-2")
        loads = step2.output.kv_connector_metadata.loads
        self.assertEqual([(p.req_id, p.block_ids) for p in loads], [("a-2", ids2[:3])])
        self.assertTrue(set(ids2[:3]).isdisjoint(ids1), f"other block ids: {ids2[:3]} vs {ids1}")
        for b in range(3):
            self.assertEqual(engine.block_bytes(ids2[b]), images[b], f"block {b} restored byte for byte (seed {SEED})")
        self.assertEqual(step2.kv_output.invalid_block_ids, set())
        after = engine.connector.snapshot()
        self.assertEqual(delta(after, before, "lookups"), 1, "one QUERY for the request")
        self.assertEqual((delta(after, before, "loads_done"), delta(after, before, "matched_tokens")), (1, 96))
        self.assertGreaterEqual(held_during_load[0], 3, "the scheduler holds the three leases while the worker loads")
        # the worker's report writes the RELEASEs without waiting for their answers
        wait_for(lambda: self.manager.leases() == 0, "the worker's report to release the three leases", 10)

        before = engine.connector.snapshot()
        engine.request("a-3", prompt[:3 * BLOCK])  # exactly three blocks
        step3 = engine.step(forward)
        self.assertEqual(new_request(step3, "a-3").num_computed_tokens, 2 * BLOCK,
                         "the block holding the last prompt token is computed, not loaded")
        self.assertEqual(step3.output.num_scheduled_tokens["a-3"], BLOCK)
        ids3 = engine.block_ids("a-3")
        for b in range(2):
            self.assertEqual(engine.block_bytes(ids3[b]), images[b])
        self.assertEqual(delta(engine.connector.snapshot(), before, "lookups"), 1)

    # -- d ---------------------------------------------------------------------------------------

    def test_d_another_cache_salt_or_model_dtype_never_hits(self):
        engine, forward = self.engine, Forward(self.engine, SEED + 1)
        prompt = tokens(2000, 2 * BLOCK + 5)
        self.compute(engine, forward, "d-1", prompt)

        _, _, salted = self.compute(engine, forward, "d-salt-1", prompt, cache_salt="tenant-b")
        engine.request("d-salt-2", prompt, cache_salt="tenant-b")
        step = engine.step(forward)
        self.assertEqual(new_request(step, "d-salt-2").num_computed_tokens, 2 * BLOCK,
                         "pages of one salt serve that salt")
        engine.request("d-salt-3", prompt, cache_salt="tenant-c")
        step = engine.step(forward)
        self.assertEqual(new_request(step, "d-salt-3").num_computed_tokens, 0, "another salt is a miss")
        ids = engine.block_ids("d-salt-2")
        self.assertEqual(engine.block_bytes(ids[0]), salted[0])

        other = CpuEngine(tiny_llama_dir(self.tmp, "float16"), self.manager.socket, dtype="float16")
        try:
            self.assertNotEqual(other.worker.get_handshake_metadata().namespace,
                                engine.worker.get_handshake_metadata().namespace)
            other.request("d-fp16", prompt)
            step = other.step(Forward(other, SEED + 2))
            self.assertEqual(new_request(step, "d-fp16").num_computed_tokens, 0,
                             "a float16 engine never loads bfloat16 pages")
            self.assertEqual(other.connector.snapshot()["store_hit_pages"], 0)
            self.assertEqual(other.connector.snapshot()["lookups"], 1)
        finally:
            other.close()


@unittest.skipUnless(JAR, "ORBITKV_JAR is not set: run through `bin/orbitkv test`")
class SsdCorruptionTest(unittest.TestCase):

    def test_b_a_flipped_byte_on_ssd_is_a_miss_from_that_block_on(self):
        tmp = tempfile.mkdtemp(prefix="okv-vllm-")
        # 4 MiB of 64 KiB slots (64 pages), every page also written to SSD
        manager = ManagerProcess(dram_bytes="4m", ssd_bytes="64m",
                                 extra_args=["--ssd-policy", "write-through", "--set", "dramSlotBytes=64k"])
        engine = CpuEngine(tiny_llama_dir(tmp), manager.socket, timeout_s=5.0, max_pending_s=10.0)
        filler = None
        try:
            forward = Forward(engine, SEED + 3)
            prompt = tokens(3000, 3 * BLOCK + 4)
            engine.request("b-1", prompt, max_tokens=2)
            engine.step(forward)
            ids1 = engine.block_ids("b-1")
            images = [engine.block_bytes(ids1[b]) for b in range(3)]
            engine.step(forward)  # b-1 decodes its last token and finishes: nothing of it stays leased

            extents = wait_for_extents(os.path.join(manager.dir, "ssd"), images, deadline_s=20)
            path, payload_at = extents[1]
            flip_byte(path, payload_at + 1000)

            filler = push_out_of_dram(self, manager, engine, len(images[0]))

            ssd_read_before = manager.metric_sum("orbitkv_ssd_read_bytes_total")
            engine.request("b-2", prompt[:3 * BLOCK] + tokens(6000, 10))
            deadline = time.monotonic() + 20
            step = engine.step(forward)
            while new_request(step, "b-2") is None and time.monotonic() < deadline:
                time.sleep(0.01)  # an engine steps every few ms; each step re-asks once
                step = engine.step(forward)
            new = new_request(step, "b-2")
            self.assertIsNotNone(new, "b-2 was never scheduled")
            stats = engine.connector.snapshot()
            # staged from SSD either by the PREPARE sent when the request was added (its QUERY takes
            # the prepare over and may be FINAL at once) or by the QUERY itself (PENDING first)
            self.assertGreater(manager.metric_sum("orbitkv_ssd_read_bytes_total"), ssd_read_before,
                               "the pages came back from SSD")
            self.assertGreaterEqual(stats["pending_answers"] + stats["prepares_taken_over"], 1, str(stats))
            self.assertEqual(stats["lookups"], 2, "one QUERY per request, then polls")
            self.assertEqual(new.num_computed_tokens, BLOCK, "the hit ends before the flipped block")
            ids2 = engine.block_ids("b-2")
            self.assertEqual([p.block_ids for p in step.output.kv_connector_metadata.loads], [ids2[:1]])
            self.assertEqual(engine.block_bytes(ids2[0]), images[0])
            self.assertEqual(step.computed["b-2"], range(BLOCK, 3 * BLOCK + 10), "blocks 1.. are recomputed")
        finally:
            if filler is not None:
                filler.close()
            engine.close()
            manager.stop()
            cleanup_dir(tmp)


@unittest.skipUnless(JAR, "ORBITKV_JAR is not set: run through `bin/orbitkv test`")
class PrepareTest(unittest.TestCase):

    def test_e_a_queued_request_with_its_pages_on_ssd_is_prepared_and_its_lookup_finds_them_in_dram(self):
        tmp = tempfile.mkdtemp(prefix="okv-vllm-")
        manager = ManagerProcess(dram_bytes="4m", ssd_bytes="64m",
                                 extra_args=["--ssd-policy", "write-through", "--set", "dramSlotBytes=64k"])
        engine = CpuEngine(tiny_llama_dir(tmp), manager.socket, timeout_s=5.0, max_pending_s=10.0)
        filler = None
        try:
            forward = Forward(engine, SEED + 5)
            prompt_a, prompt_b = tokens(5000, 3 * BLOCK + 4), tokens(7000, 3 * BLOCK + 4)
            engine.request("e-a", prompt_a, max_tokens=2)
            engine.request("e-b", prompt_b, max_tokens=2)
            engine.step(forward)
            images = [engine.block_bytes(engine.block_ids("e-a")[b]) for b in range(3)]
            engine.step(forward)  # both decode their last token and finish: nothing of them stays leased
            wait_for_extents(os.path.join(manager.dir, "ssd"), images, deadline_s=20)
            filler = push_out_of_dram(self, manager, engine, len(images[0]))
            self.assertEqual(manager.metric_sum("orbitkv_manager_prepared_pages_held"), 0)

            # RELEASEs are written without waiting for their answers: none of the earlier leases is left
            wait_for(lambda: manager.leases() == 0, "the earlier requests' leases to be released", 10)
            # added, not yet scheduled (it waits in vLLM's queue): the PREPARE alone stages its pages
            before = engine.connector.snapshot()
            engine.request("e-2", prompt_a[:3 * BLOCK] + tokens(9000, 10))
            wait_for(lambda: manager.metric_sum("orbitkv_manager_prepared_pages_held") == 3,
                     "the three SSD pages staged into DRAM and held for the queued request", 20)
            self.assertEqual(manager.leases(), 0, "a prepared page is no engine hit until a QUERY leases it")
            step = engine.step(forward)
            new = new_request(step, "e-2")
            self.assertIsNotNone(new, "e-2 was scheduled in its first step: no PENDING lookup to wait for")
            after = engine.connector.snapshot()
            self.assertEqual(delta(after, before, "pending_answers"), 0, "FINAL at once: found resident in DRAM")
            self.assertEqual((delta(after, before, "prepares"), delta(after, before, "prepares_taken_over")), (1, 1))
            self.assertEqual(delta(after, before, "store_prepare_taken_over"), 1, "the QUERY reused the prepare's id")
            self.assertEqual(new.num_computed_tokens, 3 * BLOCK)
            ids = engine.block_ids("e-2")
            self.assertEqual([engine.block_bytes(ids[b]) for b in range(3)], images)
            self.assertEqual(manager.metric_sum("orbitkv_prepare_pages_released_total", 'outcome="consumed"'), 3)
            self.assertEqual(engine.connector.get_external_cache_hit_sources(engine.scheduler.requests["e-2"], 3 * BLOCK),
                             {CacheHitSource.HOST: 3 * BLOCK}, "restored from DRAM, not waited for from disk")

            # a request aborted while it waits: its prepare is cancelled and every byte returns
            engine.request("e-3", prompt_b[:3 * BLOCK] + tokens(9100, 10))
            wait_for(lambda: manager.metric_sum("orbitkv_manager_prepared_pages_held") == 3, "e-3 prepared", 20)
            engine.scheduler.finish_requests("e-3", RequestStatus.FINISHED_ABORTED)
            self.assertEqual(engine.connector.snapshot()["prepares_cancelled"], 1)
            wait_for(lambda: manager.metric_sum("orbitkv_manager_speculation_held_bytes") == 0
                     and manager.metric_sum("orbitkv_manager_prepares") == 0, "the cancelled prepare let go", 20)
            self.assertEqual(manager.metric_sum("orbitkv_prepare_pages_released_total", 'outcome="unused"'), 3)
            self.assertEqual(engine.connector.snapshot()["tracked_requests"], 1, "e-3 left the table; e-2 decodes")
        finally:
            if filler is not None:
                filler.close()
            engine.close()
            manager.stop()
            cleanup_dir(tmp)


@unittest.skipUnless(JAR, "ORBITKV_JAR is not set: run through `bin/orbitkv test`")
class FailureTest(unittest.TestCase):

    def test_c_a_killed_manager_fails_the_promised_load_and_then_is_a_counted_miss(self):
        tmp = tempfile.mkdtemp(prefix="okv-vllm-")
        manager = ManagerProcess()
        engine = CpuEngine(tiny_llama_dir(tmp), manager.socket, timeout_s=2.0)
        try:
            forward = Forward(engine, SEED + 4)
            prompt = tokens(4000, 2 * BLOCK + 3)
            engine.request("c-1", prompt)
            engine.step(forward)

            promised = []

            def kill(output):  # after the scheduler promised c-2's blocks, before the worker loads them
                self.assertEqual([p.req_id for p in output.kv_connector_metadata.loads], ["c-2"])
                promised.extend(output.kv_connector_metadata.loads[0].block_ids)
                manager.proc.kill()
                manager.proc.wait(10)

            engine.request("c-2", prompt)
            step = engine.step(forward, before_worker=kill)
            self.assertEqual(promised, engine.block_ids("c-2")[:2])
            self.assertEqual(new_request(step, "c-2").num_computed_tokens, 2 * BLOCK)
            self.assertEqual(step.kv_output.invalid_block_ids, set(promised), "the unloaded blocks are reported")
            self.assertEqual(engine.connector.snapshot()["loads_failed"], 1)
            self.assertEqual(engine.scheduler.requests["c-2"].num_computed_tokens, 0,
                             "vLLM rewinds the request to recompute them")

            engine.request("c-3", prompt)
            started = time.monotonic()
            step = engine.step(forward)  # c-2 recomputes; c-3 asks a dead Manager; c-2/c-3 publish
            took = time.monotonic() - started
            self.assertEqual(step.computed["c-2"], range(0, len(prompt)), "c-2 is recomputed from its first block")
            self.assertEqual(new_request(step, "c-3").num_computed_tokens, 0)
            self.assertLess(took, 2.0, "a dead Manager costs no timeout_s wait")
            scheduler, worker = engine.connector.snapshot(), engine.worker.snapshot()
            self.assertGreaterEqual(scheduler["store_failures_error"] + scheduler["store_failures_connect"]
                                    + scheduler["store_skipped_down"], 1, f"counted: {scheduler}")
            self.assertEqual(scheduler["errors"], 0, "a Manager failure is not a connector error")
            self.assertEqual(worker["pages_load_failed"], 2)
            self.assertEqual(worker["pages_save_refused"], 2,
                             f"c-2's and c-3's blocks (the same two names) unpublished: {worker}")
            self.assertGreaterEqual(worker["store_failures_error"] + worker["store_skipped_down"]
                                    + worker["store_failures_connect"], 1)
        finally:
            engine.close()
            manager.stop()
            cleanup_dir(tmp)

    def test_c_mla_and_hybrid_kv_caches_are_refused_when_the_connector_is_built(self):
        tmp = tempfile.mkdtemp(prefix="okv-vllm-")
        engine = CpuEngine(tiny_llama_dir(tmp), os.path.join(tmp, "no-manager.sock"))
        try:
            full = FullAttentionSpec(block_size=BLOCK, num_kv_heads=2, head_size=32, dtype=torch.bfloat16)
            mla = MLAAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=576, dtype=torch.bfloat16)
            window = SlidingWindowSpec(block_size=BLOCK, num_kv_heads=2, head_size=32, dtype=torch.bfloat16,
                                       sliding_window=128)
            cases = {
                "MLAAttentionSpec": [KVCacheGroupSpec(["model.layers.0.self_attn.attn"], mla)],
                "hybrid": [KVCacheGroupSpec(["model.layers.0.self_attn.attn"], full),
                           KVCacheGroupSpec(["model.layers.1.self_attn.attn"], window)],
            }
            for expected, groups in cases.items():
                config = KVCacheConfig(num_blocks=16, kv_cache_tensors=[], kv_cache_groups=groups)
                for role in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER):
                    with self.subTest(kind=expected, role=role.name):
                        with self.assertRaisesRegex(UnsupportedKvLayout, expected):
                            KVConnectorFactory.create_connector(engine.vllm_config, role, config)
        finally:
            engine.close()
            cleanup_dir(tmp)

    # -- c: a slow Manager -----------------------------------------------------------------------

    def test_c_frozen_manager_costs_one_timeout_then_misses_at_once_and_serves_again_after_it_resumes(self):
        timeout_s, retry_after_s = 1.0, 3.0
        tmp = tempfile.mkdtemp(prefix="okv-vllm-")
        manager = ManagerProcess()
        engine = CpuEngine(tiny_llama_dir(tmp), manager.socket, timeout_s=timeout_s, retry_after_s=retry_after_s)
        frozen = False
        try:
            forward = Forward(engine, SEED + 6)
            prompt = tokens(7000, 2 * BLOCK + 3)
            engine.request("s-1", prompt, max_tokens=2)
            engine.step(forward)
            ids1 = engine.block_ids("s-1")
            images = [engine.block_bytes(ids1[b]) for b in range(2)]
            engine.step(forward)  # s-1 decodes its last token and finishes
            self.assertEqual(engine.worker.snapshot()["pages_saved"], 2)

            os.kill(manager.proc.pid, signal.SIGSTOP)
            frozen = True
            wait_for(lambda: process_state(manager.proc.pid) == "T", "the Manager to stop", 10)

            scheduler0, worker0 = engine.connector.snapshot(), engine.worker.snapshot()
            engine.request("s-2", prompt[:2 * BLOCK] + tokens(7500, 9), max_tokens=1)
            started = time.monotonic()
            step = engine.step(forward)
            ended = time.monotonic()
            new = new_request(step, "s-2")
            self.assertIsNotNone(new, "a frozen Manager does not hold the request back")
            self.assertEqual(new.num_computed_tokens, 0, "a frozen Manager is a miss")
            self.assertEqual(step.output.kv_connector_metadata.loads, [])
            self.assertEqual(step.computed["s-2"], range(0, 2 * BLOCK + 9))
            self.assertGreaterEqual(step.schedule_s, timeout_s * 0.9, "the QUERY waited for its answer")
            self.assertLess(step.schedule_s, timeout_s + MARGIN_S, "schedule() waits one timeout_s, not more")
            self.assertLess(ended - started, 2 * timeout_s + MARGIN_S,
                            "the step waits one timeout_s more, in the worker's publish")
            scheduler, worker = engine.connector.snapshot(), engine.worker.snapshot()
            self.assertEqual((delta(scheduler, scheduler0, "lookups"),
                              delta(scheduler, scheduler0, "store_failures_timeout")),
                             (1, 1), f"one QUERY, counted as a timeout: {scheduler}")
            self.assertEqual(delta(worker, worker0, "store_failures_timeout"), 1, f"the publish timed out: {worker}")
            self.assertEqual(delta(worker, worker0, "pages_save_refused"), 2)
            self.assertEqual((scheduler["errors"], worker["errors"]), (0, 0), "a slow Manager is no connector error")

            # inside retry_after_s both roles answer at once, without asking the frozen Manager
            scheduler0, worker0 = scheduler, worker
            engine.request("s-3", prompt[:2 * BLOCK] + tokens(7600, 9), max_tokens=1)
            before = time.monotonic()
            self.assertLess(before, started + timeout_s + retry_after_s, "premise: still inside the retry window")
            step = engine.step(forward)
            self.assertLess(time.monotonic() - before, MARGIN_S, "a store known down costs no timeout")
            self.assertEqual(new_request(step, "s-3").num_computed_tokens, 0)
            scheduler, worker = engine.connector.snapshot(), engine.worker.snapshot()
            self.assertEqual(delta(scheduler, scheduler0, "store_skipped_down"), 2,
                             f"the prepare and the QUERY, counted: {scheduler}")
            self.assertEqual(delta(scheduler, scheduler0, "prepares_skipped"), 1, "a prepare to a store down is a no-op")
            self.assertEqual(delta(worker, worker0, "store_skipped_down"), 1, f"counted: {worker}")
            self.assertEqual(delta(scheduler, scheduler0, "store_failures_timeout"), 0)

            os.kill(manager.proc.pid, signal.SIGCONT)
            frozen = False
            # both stores marked themselves down before step s-2 returned: their windows end by then
            time.sleep(max(0.0, ended + retry_after_s - time.monotonic()))
            scheduler0, worker0 = scheduler, worker
            engine.request("s-4", prompt[:2 * BLOCK] + tokens(7700, 9), max_tokens=2)
            step = engine.step(forward)
            self.assertEqual(new_request(step, "s-4").num_computed_tokens, 2 * BLOCK, "the prefix hits again")
            self.assertEqual(step.kv_output.invalid_block_ids, set())
            ids4 = engine.block_ids("s-4")
            for b in range(2):
                self.assertEqual(engine.block_bytes(ids4[b]), images[b], f"block {b} byte for byte (seed {SEED})")
            scheduler, worker = engine.connector.snapshot(), engine.worker.snapshot()
            self.assertEqual((delta(scheduler, scheduler0, "store_connects"), delta(worker, worker0, "store_connects")),
                             (1, 1), "each role reconnected once")
            self.assertEqual((delta(scheduler, scheduler0, "loads_done"), delta(worker, worker0, "pages_loaded")),
                             (1, 2))
            wait_for(lambda: manager.leases() == 0, "every lease, also of the timed-out sessions, to return", 10)
        finally:
            if frozen:
                os.kill(manager.proc.pid, signal.SIGCONT)
            engine.close()
            manager.stop()
            cleanup_dir(tmp)

    # -- c: a full Manager -----------------------------------------------------------------------

    def test_c_page_above_the_managers_largest_slot_is_refused_counted_and_never_a_hit(self):
        tmp = tempfile.mkdtemp(prefix="okv-vllm-")
        manager = ManagerProcess(dram_bytes="1m", extra_args=["--set", "dramSlotBytes=8k"])  # TOO_LARGE
        engine = CpuEngine(tiny_llama_dir(tmp), manager.socket)
        try:
            self.assertGreater(engine.worker.get_handshake_metadata().page_bytes, 8 * 1024, "premise: pages > 8 KiB")
            self.publishes_are_refused_and_requests_miss(engine, "f", 8000)
        finally:
            engine.close()
            manager.stop()
            cleanup_dir(tmp)

    def test_c_full_reservation_budget_refuses_publishes_until_it_frees_on_the_same_connections(self):
        tmp = tempfile.mkdtemp(prefix="okv-vllm-")
        manager = ManagerProcess(dram_bytes="16m")
        engine = CpuEngine(tiny_llama_dir(tmp), manager.socket)
        holder = None
        try:
            holder, reservation = hold_reservation_budget(manager)  # NO_SPACE for everyone else
            prompt, forward = self.publishes_are_refused_and_requests_miss(engine, "g", 9000)
            refused = 'orbitkv_dram_reservations_failed_total{arena="manager",reason="reserved_budget"}'
            self.assertEqual(manager.metric(refused), 4, "the Manager counts the same four refusals")

            holder.call(p.PublishAbort([reservation]), p.Aborted)
            engine.request("g-3", prompt, max_tokens=2)
            step = engine.step(forward)
            self.assertEqual(new_request(step, "g-3").num_computed_tokens, 0)
            self.assertEqual(engine.worker.snapshot()["pages_saved"], 2, "the budget is free: the pages are stored")
            ids3 = engine.block_ids("g-3")
            images = [engine.block_bytes(ids3[b]) for b in range(2)]
            engine.request("g-4", prompt[:2 * BLOCK] + tokens(9500, 9), max_tokens=2)
            step = engine.step(forward)
            self.assertEqual(new_request(step, "g-4").num_computed_tokens, 2 * BLOCK)
            ids4 = engine.block_ids("g-4")
            for b in range(2):
                self.assertEqual(engine.block_bytes(ids4[b]), images[b], f"block {b} byte for byte (seed {SEED})")
            for stats in (engine.connector.snapshot(), engine.worker.snapshot()):
                self.assertEqual(stats["store_connects"], 1, f"the same connection throughout: {stats}")
        finally:
            if holder is not None:
                holder.close()
            engine.close()
            manager.stop()
            cleanup_dir(tmp)

    def publishes_are_refused_and_requests_miss(self, engine: CpuEngine, tag: str, base: int):
        """Two requests with one prefix on a Manager that refuses every publish: both compute it,
        both publishes are refused and counted, the second request is a miss, and neither role
        drops its connection. Returns the prompt and the forward for more requests."""
        forward = Forward(engine, SEED + base)
        prompt = tokens(base, 2 * BLOCK + 3)
        for n in (1, 2):
            req_id = f"{tag}-{n}"
            engine.request(req_id, prompt, max_tokens=1)
            step = engine.step(forward)
            self.assertEqual(new_request(step, req_id).num_computed_tokens, 0, f"{req_id} is a miss")
            self.assertEqual(step.output.kv_connector_metadata.loads, [])
            self.assertEqual(step.computed[req_id], range(0, len(prompt)))
            self.assertEqual([len(s.block_ids) for s in step.output.kv_connector_metadata.saves], [2])
            worker = engine.worker.snapshot()
            self.assertEqual((worker["pages_saved"], worker["pages_save_refused"], worker["store_write_refused"]),
                             (0, 2 * n, 2 * n), f"every page refused and counted: {worker}")
        scheduler = engine.connector.snapshot()
        self.assertEqual((scheduler["lookups"], scheduler["store_hit_pages"], scheduler["matched_tokens"]), (2, 0, 0))
        for stats in (scheduler, worker):
            self.assertEqual((stats["store_connects"], stats["store_failures_connect"], stats["store_failures_timeout"],
                              stats["store_failures_error"], stats["store_skipped_down"], stats["errors"]),
                             (1, 0, 0, 0, 0, 0), f"a refusal is load: the connection stays, nothing raised: {stats}")
        return prompt, forward


class LayoutTest(unittest.TestCase):
    """The page copies on layouts other than the CPU backend's, from vLLM's own allocator."""

    def test_pages_move_whole_blocks_on_every_layout_and_name_it(self):
        tmp = tempfile.mkdtemp(prefix="okv-vllm-")
        engine = CpuEngine(tiny_llama_dir(tmp), os.path.join(tmp, "no-manager.sock"))
        try:
            config = engine.kv_cache_config
            spec = config.kv_cache_groups[0].kv_cache_spec
            generator = torch.Generator().manual_seed(SEED + 5)
            descriptors = set()
            for layout, kernel in [(KVCacheLayout.LBHNC, BLOCK), (KVCacheLayout.LBNHC, BLOCK),
                                   (KVCacheLayout.LBHNC, BLOCK // 2)]:
                with self.subTest(layout=layout.name, kernel_block=kernel):
                    caches = allocate_kv_cache(copy.deepcopy(config), torch.device("cpu"), layout, [kernel])
                    raw = {n: t.view(torch.uint8) for n, t in caches.items()}
                    for view in raw.values():
                        view.copy_(torch.randint(0, 256, view.shape, dtype=torch.uint8, generator=generator))
                    before = {n: v.clone().unflatten(0, (config.num_blocks, -1)) for n, v in raw.items()}
                    binding = KvPageBinding(caches, spec, config, "TEST", layout.name)
                    binding.scatter([10, 11, 12], binding.gather([3, 5, 7]))
                    self.assertTrue(binding.writes_pages_directly, "a CPU cache takes pages straight from the arena")
                    for block, image in zip([20, 21], binding.gather([4, 6]).numpy()):  # a page as a read-only view
                        binding.write_page(block, memoryview(image.tobytes()))
                    # blocks that are one run per layer are published from the cache's memory, as the image
                    self.assertEqual(binding.publishes_from_cache, layout == KVCacheLayout.LBHNC, layout.name)
                    if binding.publishes_from_cache:
                        for block in (0, 7, config.num_blocks - 1):
                            parts = binding.page_parts(block)
                            self.assertEqual(b"".join(bytes(part) for part in parts.parts),
                                             binding.gather([block]).numpy().tobytes(), f"block {block}")
                            self.assertEqual(len(parts), binding.page_bytes)
                    for name, view in raw.items():
                        blocks = view.unflatten(0, (config.num_blocks, -1))
                        self.assertTrue(torch.equal(blocks[10:13], before[name][[3, 5, 7]]), name)
                        self.assertTrue(torch.equal(blocks[20:22], before[name][[4, 6]]), f"{name}: written page by page")
                        self.assertTrue(torch.equal(blocks[:10], before[name][:10]), f"{name}: nothing else written")
                        self.assertTrue(torch.equal(blocks[13:20], before[name][13:20]), f"{name}: nothing else written")
                        self.assertTrue(torch.equal(blocks[22:], before[name][22:]), f"{name}: nothing else written")
                    descriptors.add(binding.format.descriptor)
            self.assertEqual(len(descriptors), 3, f"each layout and kernel block names its own pages: {descriptors}")
        finally:
            engine.close()
            cleanup_dir(tmp)


MARGIN_S = 0.5  # what a step may take beyond the waits it is allowed, on a shared 2-core host


def process_state(pid: int) -> str:
    """The state letter of ``/proc/PID/stat`` ("T" once SIGSTOP took effect)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def hold_reservation_budget(manager: ManagerProcess):
    """Another engine's publish that reserved the Manager's whole reservation budget and does not
    commit: every PUBLISH_RESERVE entry after it, in any namespace, is refused NO_SPACE until it
    is aborted. Returns the holder's client and its reservation id."""
    budget = int(manager.metric("orbitkv_manager_staging_budget_bytes"))
    client = Client(manager.socket, timeout=10)
    try:
        namespace = Namespace("other-model", "r1", "sha256:w", "sha256:t", "", "bfloat16", "other", BLOCK,
                              1, 0, 1, 0, 1)
        client.register("other-engine", 1, namespace, RecoveryContract(BLOCK, [FullGroup(0)]))
        reserved = client.call(p.PublishReserve([p.PublishPage(0, p.KeyForm.BLOCK_HASH, b"\x01" * 32, budget)]),
                               p.Reserved)
        grant = reserved.outcomes[0]
        if not isinstance(grant, p.Granted):
            raise AssertionError(f"premise: the holder reserves the whole budget of {budget} B, got {grant}")
        return client, grant.reservation_id
    except BaseException:
        client.close()
        raise


def push_out_of_dram(test, manager, engine, page_bytes: int) -> ManagerPages:
    """Pushes every page published so far out of a 4 MiB DRAM tier of 64 KiB slots (LRU):
    publishes three DRAMs' worth of newer pages, 8 at a time (the default staging budget,
    dramBytes / 8, holds 8 slots). A batch refused NO_SPACE (the SSD lane behind a fast publisher:
    DRAM slots wait for their write-through) is followed by new pages after a pause, up to 64
    batches. Returns the publishing store (the caller closes it)."""
    filler = ManagerPages(manager.socket, engine.worker.get_handshake_metadata().namespace, timeout_s=5.0)
    stored = 0
    for start in range(0, 64 * 8, 8):
        outcomes = filler.write([(b"filler" + i.to_bytes(4, "little"), bytes([i % 251]) * page_bytes)
                                 for i in range(start, start + 8)])
        stored += sum(outcomes)
        if stored >= 192:
            break
        if not all(outcomes):
            time.sleep(0.05)
    test.assertGreaterEqual(stored, 128, "at least twice the DRAM tier was published after the pages")
    return filler


def wait_for_extents(ssd_dir: str, images, deadline_s: float):
    """(file, payload offset) of the SSD extent holding each image, once all are written."""
    deadline = time.monotonic() + deadline_s
    while True:
        found = {}
        for path in sorted(glob.glob(os.path.join(ssd_dir, "**", "extents-*.dat"), recursive=True)):
            with open(path, "rb") as f:
                data = f.read()
            at = data.find(EXTENT_MAGIC)
            while at >= 0:
                if at % 4096 == 0:
                    (length,) = struct.unpack_from("<I", data, at + 24)
                    payload = data[at + EXTENT_HEADER_BYTES:at + EXTENT_HEADER_BYTES + length]
                    for i, image in enumerate(images):
                        if payload == image:
                            found[i] = (path, at + EXTENT_HEADER_BYTES)
                at = data.find(EXTENT_MAGIC, at + 1)
        if len(found) == len(images):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"only {sorted(found)} of {len(images)} pages reached {ssd_dir}")
        time.sleep(0.05)


def flip_byte(path: str, offset: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        (value,) = os.pread(fd, 1, offset)
        os.pwrite(fd, bytes([value ^ 0xFF]), offset)
        os.fsync(fd)
    finally:
        os.close(fd)


if __name__ == "__main__":
    unittest.main()
