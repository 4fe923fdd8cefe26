"""OrbitKV as a secondary tier of vLLM's native KV offloading, against the installed vLLM.

Targets vLLM 0.33.0 (``vllm.v1.kv_offload.tiering``: ``SecondaryTierManager``,
``SecondaryTierFactory`` with ``module_path``, ``TieringOffloadingSpec``,
``TieringOffloadingManager`` over ``CPUPrimaryTierOffloadingManager`` on a ``SharedOffloadRegion``;
``vllm.config.VllmConfig``; ``vllm.v1.kv_offload.config.OffloadingConfig``).

Two engine "instances" (``tier_support.Instance``: vLLM's own spec, tiering manager, primary tier
over its own /dev/shm region, and an ``OrbitKvTier`` with its own Manager connection, built by
vLLM's factory from ``kv_connector_extra_config``) share ONE real Manager process
(``ManagerProcess``: small DRAM of 64 KiB slots, write-through SSD, so old pages are only on SSD).
The test plays the scheduler (one lookup pass per request per step) and the GPU worker (bytes into
and out of primary rows); no GPU, no model run.

Identity tests build a real ``VllmConfig`` from a local model directory and compare namespace
digests across two processes with different ``PYTHONHASHSEED``.

Wall time here: 33-80 s on 2 shared cores (about 25 s of CPU), most of it importing vLLM and
building the first ``VllmConfig`` in this process and in the probe process, which starts, with the
Manager, before this process imports vLLM's heavier modules.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from orbitkv.protocol import contract_bytes
from orbitkv.state import FullGroup, RecoveryContract
from tests.test_manager import JAR, REQUIRE_ENVIRONMENT, ManagerProcess, wait_for
from tests_integration.vllm.tier_probe import make_model_dir, vllm_config

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
# 4 MiB of 64 KiB slots: a hundred pages push the oldest out of DRAM; every page is also on SSD
MANAGER_ARGS = dict(dram_bytes="4m", ssd_bytes="64m",
                    extra_args=["--set", "dramSlotBytes=64k", "--set", "stagingBytes=1m",
                                "--ssd-policy", "write-through"])

try:
    import vllm  # noqa: F401
    HAVE_VLLM = True
except ImportError:
    if REQUIRE_ENVIRONMENT:
        raise
    HAVE_VLLM = False

ENV: dict = {}  # set up once per module: tmp root, model dirs, probe process, Manager, socket path


def setUpModule():
    if not (JAR and HAVE_VLLM):
        return
    root = ENV["root"] = tempfile.mkdtemp(prefix="okv-vllm-tier-")
    ENV["model"] = make_model_dir(root)
    ENV["model_b"] = make_model_dir(root, "other-model", weights=b"weights-v2")
    ENV["socket"] = os.path.join(root, "manager.sock")
    env = dict(os.environ, PYTHONHASHSEED="4242", PYTHONPATH=TOP)
    ENV["probe"] = subprocess.Popen([sys.executable, "-m", "tests_integration.vllm.tier_probe", ENV["model"]],
                                    cwd=TOP, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ENV["manager"] = ManagerProcess(socket_path=ENV["socket"], **MANAGER_ARGS)


def tearDownModule():
    probe = ENV.pop("probe", None)
    if probe is not None and probe.poll() is None:
        probe.kill()
        probe.communicate()
    manager = ENV.pop("manager", None)
    if manager is not None:
        manager.stop()
    if "root" in ENV:
        shutil.rmtree(ENV["root"], ignore_errors=True)


def delta(after: dict, before: dict, name: str) -> int:
    return after[name] - before[name]


@unittest.skipUnless(JAR and HAVE_VLLM, "needs ORBITKV_JAR and the vllm package")
class IdentityTest(unittest.TestCase):
    """``vllm_identity`` / ``offload_identity``: every field separates namespaces; no per-process value."""

    @classmethod
    def setUpClass(cls):
        cls.config = vllm_config(ENV["model"])

    def digest(self, config, **kw):
        from orbitkv.vllm.identity import vllm_identity
        args = dict(page_tokens=16, kv_layout="probe")
        args.update(kw)
        return vllm_identity(config, **args).namespace().digest_hex()

    def variant(self, change):
        config = copy.deepcopy(self.config)
        change(config)
        return config

    def test_vllm_identity_reads_the_config(self):
        import torch
        from orbitkv.vllm.identity import vllm_identity
        identity = vllm_identity(self.config, page_tokens=64, kv_layout="probe")
        self.assertEqual(identity.model_id, ENV["model"])
        self.assertEqual((identity.dtype, identity.kv_dtype), ("float16", "float16"))  # cache dtype "auto"
        self.assertTrue(identity.weights_digest.startswith("sha256:"))
        self.assertTrue(identity.tokenizer_digest.startswith("sha256:"))
        self.assertEqual((identity.revision, identity.page_tokens), ("unspecified", 64))
        self.assertEqual((identity.tp_size, identity.tp_rank, identity.pp_size, identity.dp_size), (1, 0, 1, 1))
        self.assertEqual(vllm_identity(self.config, kv_layout="x").page_tokens, 16)  # the block size
        self.assertEqual(self.config.model_config.dtype, torch.float16)

    def test_any_one_field_changes_the_namespace(self):
        import torch
        other = vllm_config(ENV["model_b"])  # same architecture, other weights and path
        base = self.digest(self.config)
        variants = {
            "same config": self.digest(copy.deepcopy(self.config)),
            "model": self.digest(other),
            "revision": self.digest(self.variant(lambda c: setattr(c.model_config, "revision", "v2"))),
            "dtype": self.digest(self.variant(lambda c: setattr(c.model_config, "dtype", torch.bfloat16))),
            "kv dtype": self.digest(self.variant(lambda c: setattr(c.cache_config, "cache_dtype", "fp8"))),
            "tp size": self.digest(self.variant(lambda c: setattr(c.parallel_config, "tensor_parallel_size", 2))),
            "pp size": self.digest(self.variant(lambda c: setattr(c.parallel_config, "pipeline_parallel_size", 2))),
            "dp size": self.digest(self.variant(lambda c: setattr(c.parallel_config, "data_parallel_size", 2))),
            "dcp size": self.digest(self.variant(
                lambda c: setattr(c.parallel_config, "decode_context_parallel_size", 2))),
            "page tokens": self.digest(self.config, page_tokens=32),
            "layout": self.digest(self.config, kv_layout="other"),
            "tp rank": self.digest(self.variant(lambda c: setattr(c.parallel_config, "tensor_parallel_size", 2)),
                                   tp_rank=1),
            "weights override": self.digest(self.config, weights="sha256:other"),
            "adapter": self.digest(self.config, adapter_id="lora-a"),
        }
        self.assertEqual(variants.pop("same config"), base)
        self.assertNotIn(base, variants.values())
        self.assertEqual(len(set(variants.values())), len(variants), variants)

    def test_offload_identity_fields_change_the_namespace(self):
        from orbitkv.vllm.identity import offload_identity
        from tests_integration.vllm.tier_support import ROW_BYTES, offloading_config
        config = offloading_config(model=ENV["model"], socket_path="/nonexistent", engine_id="e1")

        def digest(cfg, **kw):
            args = dict(row_bytes=ROW_BYTES)
            args.update(kw)
            return offload_identity(cfg, **args).namespace().digest_hex()

        base = digest(config)
        group = config.groups[0]
        variants = {
            "model": digest(dataclasses.replace(config, model=dataclasses.replace(config.model, name=ENV["model_b"]))),
            "kv dtype": digest(dataclasses.replace(config, model=dataclasses.replace(config.model, dtype="bfloat16"))),
            "model dtype": digest(config, model_dtype="bfloat16"),
            "revision": digest(config, revision="v2"),
            "row bytes": digest(config, row_bytes=2 * ROW_BYTES),
            "chunk": digest(dataclasses.replace(config, cache=dataclasses.replace(config.cache, blocks_per_chunk=2))),
            "layers": digest(dataclasses.replace(config, groups=(dataclasses.replace(group, layer_names=("x",)),))),
            "tp": digest(dataclasses.replace(config, parallel=dataclasses.replace(config.parallel, tp_size=2))),
            "dp": digest(dataclasses.replace(config, parallel=dataclasses.replace(
                config.parallel, data_parallel_size=2, data_parallel_index=1))),
            "kv layout": digest(dataclasses.replace(config, kv_cache_layout="HND")),
        }
        self.assertEqual(digest(dataclasses.replace(config, engine_id="another-engine")), base)  # not identity
        dense_replica = dataclasses.replace(config.parallel, data_parallel_size=1, data_parallel_index=3)
        self.assertEqual(digest(dataclasses.replace(config, parallel=dense_replica)), base)  # shares pages
        self.assertNotIn(base, variants.values())
        self.assertEqual(len(set(variants.values())), len(variants), variants)

    def test_the_package_and_identity_import_neither_torch_nor_vllm(self):
        code = ("import sys, orbitkv.vllm, orbitkv.vllm.identity; "
                "print(sorted(m for m in ('torch', 'vllm') if m in sys.modules))")
        out = subprocess.run([sys.executable, "-c", code], cwd=TOP, env=dict(os.environ, PYTHONPATH=TOP),
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.stdout.strip(), "[]", out.stderr)

    def test_same_config_same_digest_in_two_processes(self):
        from orbitkv.vllm.identity import offload_identity
        from tests_integration.vllm.tier_support import ROW_BYTES, offloading_config
        out, err = ENV["probe"].communicate(timeout=180)
        self.assertEqual(ENV["probe"].returncode, 0, err[-2000:])
        theirs = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(theirs["hashseed"], "4242")
        self.assertNotEqual(os.environ.get("PYTHONHASHSEED"), "4242")
        ours = offloading_config(model=ENV["model"], socket_path="/nonexistent", engine_id="probe")
        self.assertEqual(theirs["vllm"], self.digest(self.config))
        self.assertEqual(theirs["offload"], offload_identity(ours, row_bytes=ROW_BYTES).namespace().digest_hex())


@unittest.skipUnless(JAR and HAVE_VLLM, "needs ORBITKV_JAR and the vllm package")
class TierTest(unittest.TestCase):
    """Two vLLM offloading stacks with an OrbitKvTier each, one Manager."""

    @classmethod
    def setUpClass(cls):
        from tests_integration.vllm import tier_support as ts
        cls.ts = ts
        cls.instances = []
        cls.a = cls.instance(model=ENV["model"])
        cls.b = cls.instance(model=ENV["model"])

    @classmethod
    def instance(cls, **kw):
        config = cls.ts.offloading_config(socket_path=ENV["socket"], **kw)
        inst = cls.ts.Instance(config)
        cls.instances.append(inst)
        return inst

    @classmethod
    def tearDownClass(cls):
        for inst in cls.instances:
            inst.shutdown()
            assert not os.path.exists(inst.region_path), inst.region_path

    def prefix(self, seed, chunks, salt=None):
        keys = self.ts.chunk_keys(self.ts.prompt(seed, chunks), cache_salt=salt)
        return keys, {k: os.urandom(self.ts.ROW_BYTES) for k in keys}

    def publish(self, keys, payloads):
        """Instance 1 stores ``keys``; every page must reach the Manager."""
        before = self.a.tier.counters()
        self.a.store(keys, payloads)
        after = self.a.tier.counters()
        self.assertEqual(delta(after, before, "store_pages"), len(keys), after)

    def load_through(self, inst, keys):
        """A new request on ``inst`` looks ``keys`` up at the scheduler's cadence until settled;
        on a full hit it loads them. Returns (passes, {key: primary row bytes} or None)."""
        ctx = inst.new_request()
        passes = inst.lookup_until_settled(keys, ctx)
        rows = inst.load(keys, ctx) if all(r.name == "HIT" for r in passes[-1]) else None
        inst.finish(ctx)
        return passes, rows

    def test_a_store_on_one_instance_load_on_the_other(self):
        keys, payloads = self.prefix(seed=1, chunks=8)
        a0, b0 = self.a.tier.counters(), self.b.tier.counters()
        self.a.store(keys, payloads)
        a1 = self.a.tier.counters()
        self.assertEqual((delta(a1, a0, "store_jobs"), delta(a1, a0, "store_pages")), (1, 8))
        self.assertEqual(delta(a1, a0, "store_jobs_failed"), 0)

        passes, rows = self.load_through(self.b, keys)
        names = [[r.name for r in p] for p in passes]
        self.assertEqual(names[0], ["RETRY"] * 8)  # the first pass only sends the QUERY
        self.assertIn(["HIT_PENDING"] * 8, names)  # vLLM promotes from the tier ...
        self.assertEqual(names[-1], ["HIT"] * 8)  # ... into its primary tier
        self.assertEqual(rows, payloads)  # byte for byte, in instance 2's own shared region
        b1 = self.b.tier.counters()
        self.assertEqual(delta(b1, b0, "queries"), 1)  # one QUERY for the request's whole prefix
        self.assertEqual((delta(b1, b0, "load_jobs"), delta(b1, b0, "load_pages")), (1, 8))
        self.assertEqual(delta(b1, b0, "load_requeried_pages"), 0)  # the load used the lookup's leases
        self.assertEqual(delta(b1, b0, "errors"), 0)
        wait_for(lambda: ENV["manager"].leases() == 0, "the Manager's leases to be released")
        # the recovery contract every adapter registers (the SGLang backend's test checks the same
        # bytes): full attention over pages of the namespace's page size, in group 0
        pages = self.b.tier.pages
        self.assertEqual(contract_bytes(pages.contract),
                         contract_bytes(RecoveryContract(pages.namespace.page_tokens, [FullGroup(0)])))
        self.assertTrue(pages.namespace.kv_layout.startswith("vllm"), pages.namespace.kv_layout)

    def test_b_page_staged_from_ssd_is_retry_then_hit(self):
        keys, payloads = self.prefix(seed=2, chunks=6)
        self.publish(keys, payloads)
        for seed in range(100, 112):  # 96 more 64 KiB pages: ours leave the 4 MiB DRAM (still on SSD)
            filler, filler_payloads = self.prefix(seed=seed, chunks=8)
            self.publish(filler, filler_payloads)
        b0 = self.b.tier.counters()
        passes, rows = self.load_through(self.b, keys)
        b1 = self.b.tier.counters()
        self.assertGreaterEqual(delta(b1, b0, "queries_pending"), 1)  # the Manager staged from SSD ...
        self.assertEqual(delta(b1, b0, "queries_pending_timeout"), 0)
        self.assertTrue(all(r.name == "RETRY" for r in passes[0]))  # ... and the tier said RETRY meanwhile
        self.assertEqual([r.name for r in passes[-1]], ["HIT"] * 6, (len(passes), b1))
        self.assertEqual(rows, payloads)

    def test_c_stalled_then_killed_manager_gives_retry_miss_and_failed_jobs_then_recovers(self):
        slow, slow_payloads = self.prefix(seed=30, chunks=4)
        before, before_payloads = self.prefix(seed=3, chunks=4)
        self.publish(slow, slow_payloads)
        self.publish(before, before_payloads)

        # a stalled Manager (SIGSTOP): the connection is up but nothing answers; the scheduler's
        # passes stay fast and answer RETRY, and the hit arrives once the Manager runs again
        ctx = self.b.new_request()
        os.kill(ENV["manager"].proc.pid, signal.SIGSTOP)
        try:
            for _ in range(5):
                start = time.monotonic()
                stalled = [r.name for r in self.b.lookup_pass(slow, ctx)]
                self.assertLess(time.monotonic() - start, self.ts.PASS_BOUND_S)
                self.assertEqual(stalled, ["RETRY"] * 4)
                time.sleep(self.ts.STEP_S)
        finally:
            os.kill(ENV["manager"].proc.pid, signal.SIGCONT)
        self.assertEqual([r.name for r in self.b.lookup_until_settled(slow, ctx)[-1]], ["HIT"] * 4)
        self.assertEqual(self.b.load(slow, ctx), slow_payloads)
        self.b.finish(ctx)

        # instance 2 takes a HIT (vLLM starts the promotion) and the Manager dies before the load
        ctx = self.b.new_request()
        deadline = time.monotonic() + 10
        while "HIT_PENDING" not in [r.name for r in self.b.lookup_pass(before, ctx, end_step=False)]:
            self.assertLess(time.monotonic(), deadline, f"no HIT before the kill: {self.b.tier.counters()}")
            self.b.step_end()
            time.sleep(self.ts.STEP_S)
        b0, a0 = self.b.tier.counters(), self.a.tier.counters()
        ENV["manager"].proc.kill()
        ENV["manager"].proc.wait()
        wait_for(lambda: not self.b.tier.pages.up, "the tier to see the connection go")
        self.b.step_end()  # submits the load: its leases died with the Manager
        self.b.settle()
        failed_load = self.b.lookup_pass(before, ctx)
        self.b.finish(ctx)
        self.assertEqual(failed_load[0].name, "MISS")  # recomputed, not loaded from a dead lease
        b1 = self.b.tier.counters()
        self.assertEqual(delta(b1, b0, "load_jobs_failed"), 1)

        # lookups while it is down: RETRY then MISS, never slow, never an exception
        ctx = self.b.new_request()
        passes, slowest = [], 0.0
        for _ in range(50):
            start = time.monotonic()
            passes.append(self.b.lookup_pass(before, ctx))
            slowest = max(slowest, time.monotonic() - start)
            if "MISS" in [r.name for r in passes[-1]]:
                break
            time.sleep(self.ts.STEP_S)
        self.b.finish(ctx)
        self.assertEqual(passes[-1][0].name, "MISS")
        self.assertLess(slowest, self.ts.PASS_BOUND_S)  # the scheduler never waits for the Manager

        # stores while it is down: a failed cascade job, counted by the tier and by vLLM
        keys, payloads = self.prefix(seed=4, chunks=4)
        self.a.store(keys, payloads)
        a1 = self.a.tier.counters()
        self.assertEqual(delta(a1, a0, "store_jobs_failed"), 1)
        self.assertGreaterEqual(a1["manager_failures_error"] + a1["manager_failures_connect"]
                                + a1["manager_skipped_down"], 1)
        with self.a.manager.lock:
            stats = self.a.manager.get_stats().reduce()
        cascade_failures = sum(v for k, v in stats.items() if "cascade_job_failures" in k)
        self.assertGreaterEqual(cascade_failures, 1, stats)
        self.assertTrue(any("orbitkv_events" in k and "store_jobs_failed" in k for k in stats), stats)

        # a new Manager on the same socket: both tiers reconnect and work again
        ENV["manager"].stop()
        ENV["manager"] = ManagerProcess(socket_path=ENV["socket"], **MANAGER_ARGS)
        deadline = time.monotonic() + 10
        for seed in range(10, 1000):  # a fresh prefix per try: vLLM stores only what its primary lacks
            keys, payloads = self.prefix(seed=seed, chunks=4)
            stored = self.a.tier.counters()["store_pages"]
            self.a.store(keys, payloads)
            if self.a.tier.counters()["store_pages"] == stored + 4:
                break
            self.assertLess(time.monotonic(), deadline, "the tier never stored again")
            time.sleep(0.05)
        passes, rows = self.load_through(self.b, keys)
        self.assertEqual(rows, payloads)
        self.assertGreater(self.b.tier.counters()["manager_connects"], b1["manager_connects"])

    def test_d_other_model_dtype_or_salt_misses(self):
        other_model = self.instance(model=ENV["model_b"])
        other_dtype = self.instance(model=ENV["model"], dtype="bfloat16")
        namespaces = {i.tier.namespace.digest() for i in (self.a, self.b, other_model, other_dtype)}
        self.assertEqual(len(namespaces), 3)  # a and b share one; the others are their own

        keys, payloads = self.prefix(seed=7, chunks=4)
        self.publish(keys, payloads)
        for inst in (other_model, other_dtype):
            passes, rows = self.load_through(inst, keys)
            self.assertEqual(passes[-1][0].name, "MISS")
            self.assertIsNone(rows)

        salted, salted_payloads = self.prefix(seed=7, chunks=4, salt="tenant-b")
        self.assertTrue(set(salted).isdisjoint(keys))  # vLLM folds cache_salt into the block hash
        passes, rows = self.load_through(self.b, salted)  # same tokens, other tenant: nothing to see
        self.assertEqual(passes[-1][0].name, "MISS")
        self.publish(salted, salted_payloads)
        passes, rows = self.load_through(self.b, salted)  # the same tenant does see its own pages
        self.assertEqual(rows, salted_payloads)

    def test_e_lease_table_is_bounded_and_a_load_without_a_lease_reads_again(self):
        small = self.instance(model=ENV["model"], tier_extra={"max_held_lookups": 1})
        x, x_payloads = self.prefix(seed=20, chunks=4)
        y, y_payloads = self.prefix(seed=21, chunks=4)
        self.publish(x, x_payloads)
        self.publish(y, y_payloads)
        c0 = small.tier.counters()
        r1, r2 = small.new_request(), small.new_request()
        self.assertEqual([r.name for r in small.lookup_pass(x, r1, end_step=False)], ["RETRY"] * 4)
        self.assertEqual([r.name for r in small.lookup_pass(y, r2)], ["RETRY"] * 4)  # step end: 2 QUERYs
        wait_for(lambda: delta(small.tier.counters(), c0, "queries_answered") == 2, "both answers")
        # both answers land at the next pass; the second evicts the first (its leases released)
        first = [r.name for r in small.lookup_pass(x, r1, end_step=False)]
        second = [r.name for r in small.lookup_pass(y, r2)]
        self.assertEqual((first, second), (["RETRY"] * 4, ["HIT_PENDING"] * 4))
        self.assertEqual(delta(small.tier.counters(), c0, "leases_evicted"), 1)
        for keys, ctx, payloads in ((x, r1, x_payloads), (y, r2, y_payloads)):
            self.assertEqual([r.name for r in small.lookup_until_settled(keys, ctx)[-1]], ["HIT"] * 4)
            self.assertEqual(small.load(keys, ctx), payloads)
            small.finish(ctx)
        wait_for(lambda: ENV["manager"].leases() == 0, "every lease released")

        # a promotion of keys this tier never answered (no lease): the load queries them again,
        # and reports the part it could copy (4 of 6 pages exist) through successful_keys
        from vllm.v1.kv_offload.tiering.base import TransferJob
        z, z_payloads = self.prefix(seed=22, chunks=6)
        self.publish(z[:4], {k: z_payloads[k] for k in z[:4]})
        c1 = small.tier.counters()
        ctx = small.new_request()
        with small.manager.lock:  # what TieringOffloadingManager does around a tier's load
            out = small.manager.primary_tier.prepare_write(z, ctx)
            job = TransferJob(job_id=1 << 40, keys=list(out.keys_to_store), chunk_ids=out.store_spec.chunk_ids,
                              is_promotion=True, req_context=ctx)
            small.tier.submit_load(job)
            small.tier.drain_jobs()
            (result,) = list(small.tier.get_finished_jobs())
            done = set(result.successful_keys or ())
            small.manager.primary_tier.complete_write([k for k in z if k in done], ctx, True)
            small.manager.primary_tier.complete_write([k for k in z if k not in done], ctx, False)
        self.assertFalse(result.success)
        self.assertEqual(done, set(z[:4]))
        for key, chunk in zip(job.keys, job.chunk_ids):
            if key in done:
                self.assertEqual(small.row(int(chunk)), z_payloads[key])
        c2 = small.tier.counters()
        self.assertEqual(delta(c2, c1, "load_requeried_pages"), 6)
        self.assertEqual(delta(c2, c1, "load_pages_failed"), 2)
        small.finish(ctx)


if __name__ == "__main__":
    unittest.main()
