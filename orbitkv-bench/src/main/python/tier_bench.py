"""The vLLM secondary tier against a memcpy: store and load of KV chunks through ``OrbitKvTier``,
next to a copy of the same bytes between two shared mappings, and a missing lookup, in one run.

What runs: one Manager process (started here, ``ssdPolicy=on-evict``: DRAM first, as vLLM's own
CPU tier keeps its rows in memory), and, per chunk size, vLLM's real offloading stack built from an
``OffloadingConfig`` (``OffloadingSpecFactory`` -> ``TieringOffloadingSpec`` -> its CPU primary
tier on a ``SharedOffloadRegion`` in /dev/shm, the ``OrbitKvTier`` loaded by vLLM's
``SecondaryTierFactory`` from ``module_path``). The bench drives the tier the way vLLM's tiering
manager does: ``submit_store`` / ``submit_load`` of ``TransferJob`` s over primary rows, and
``get_finished_jobs``; lookups through ``lookup`` + ``on_schedule_end`` until every key is HIT.

Arms, per (chunk size, chunks per job), interleaved round by round so load on the shared machine
hits them alike:

- **memcpy**: the job's rows copied from the primary region into a second shared mapping of the
  same size (``memoryview`` slice assignment: one ``memmove`` per row), the destination touched
  before (as the Manager's slots are once its DRAM has been full once);
- **store**: ``submit_store`` of fresh keys, timed by the tier's own ``JobResult.transfer_time``
  (the I/O worker's PUBLISH_RESERVE, copy into the granted slots, PUBLISH_COMMIT) and by the wall
  time from submit until ``get_finished_jobs`` returns it;
- **load**: the stored keys looked up until HIT (leases held), the rows zeroed, ``submit_load``;
  timed the same two ways; every loaded row is compared with what was stored (a wrong byte ends
  the run with status 1).

A warm-up writes twice the Manager's DRAM of that slot class first, so every slot has been
written once and stores run in steady state (a full cache recycles touched slots). Missing
lookups: ``ManagerPages.lookup`` of one never-stored name on the tier's own connection (the
round trip the tier's lookup worker pays for a key the Manager does not hold), median of
``--miss-lookups`` twice: right after the transfers (the Manager's QUERY path still partly
interpreted: its missing-QUERY round trip falls from ~140 to ~40 us over its first ~10,000 QUERYs)
and again after ``--miss-warm-up`` more lookups (a Manager that has served a while).

Prints one Markdown table: per row the medians (and p90) of memcpy, store and load per job, their
GB/s and the ratios store/memcpy and load/memcpy (time of the memcpy over time of the operation:
1.0 = as fast as the copy; the target is >= 0.8), then the missing-lookup line.

usage: tier_bench.py OUT_DIR [--rounds N] [--sizes-kib 256,2048] [--jobs 1,8] [--miss-lookups N]
                     [--miss-warm-up N]
needs: ORBITKV_JAR (the Manager jar), the vLLM venv (vllm 0.33), PYTHONPATH with clients/python.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid

from bench_manager import ManagerProcess, pct, slots_of_class

BLOCK_TOKENS = 16


class TierStack:
    """vLLM's offloading stack for one chunk size, with the OrbitKV tier as its secondary tier."""

    def __init__(self, model_dir: str, socket_path: str, row_bytes: int, rows: int):
        from vllm.v1.kv_offload.config import (OffloadingCacheConfig, OffloadingConfig, OffloadingGroupConfig,
                                               OffloadingModelConfig, OffloadingParallelConfig)
        from vllm.v1.kv_offload.factory import OffloadingSpecFactory
        tier = {"type": "OrbitKvTier", "module_path": "orbitkv.vllm.tier", "socket_path": socket_path,
                "timeout_s": 10.0, "poll_interval_s": 0.0005}
        config = OffloadingConfig(
            groups=(OffloadingGroupConfig(tokens_per_block=BLOCK_TOKENS,
                                          layer_names=("model.layers.0.self_attn.attn",), group_id=0),),
            worker_kv_bytes_per_block=row_bytes, enable_kv_cache_events=False,
            extra_config={"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": rows * row_bytes,
                          "secondary_tiers": [tier]},
            engine_id=f"bench-tier-{uuid.uuid4().hex[:12]}",
            model=OffloadingModelConfig(name=model_dir, dtype="float16", max_model_len=1 << 16),
            cache=OffloadingCacheConfig(tokens_per_hash=BLOCK_TOKENS, blocks_per_chunk=1),
            parallel=OffloadingParallelConfig(rank=0, world_size=1, tp_size=1, pp_size=1, pcp_size=1, dcp_size=1,
                                              data_parallel_index=0, data_parallel_size=1,
                                              data_parallel_rank_local=None, is_parallelism_agnostic=True),
            kv_cache_layout="NHD")
        self.spec = OffloadingSpecFactory.create_spec(config)
        self.manager = self.spec.get_manager()
        self.tier = self.manager.secondary_tiers[0]
        self.flat = self.manager.primary_tier.get_kv_memoryview().cast("B")
        self.row_bytes = row_bytes
        self.rows = rows
        self._job = 0
        self._req = 0

    def row(self, chunk: int) -> memoryview:
        return self.flat[chunk * self.row_bytes:(chunk + 1) * self.row_bytes]

    def _wait(self, job_id: int, deadline_s: float = 30.0):
        deadline = time.monotonic() + deadline_s
        while True:
            for result in self.tier.get_finished_jobs():
                if result.job_id == job_id:
                    return result
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {job_id} did not finish in {deadline_s} s")
            time.sleep(0.0001)  # lets the tier's worker threads take the GIL

    def _job_of(self, keys, chunks, promotion: bool, ctx):
        import numpy as np
        from vllm.v1.kv_offload.tiering.base import TransferJob
        self._job += 1
        return TransferJob(job_id=self._job, keys=list(keys), chunk_ids=np.array(chunks, dtype=np.int64),
                           is_promotion=promotion, req_context=ctx)

    def context(self):
        from vllm.v1.kv_offload.base import ReqContext
        self._req += 1
        ctx = ReqContext(req_id=f"bench-{self._req}")
        self.tier.on_new_request(ctx)
        return ctx

    def store(self, keys, chunks):
        """(transfer seconds, wall seconds) of one store job; raises if a key was not stored."""
        ctx = self.context()
        job = self._job_of(keys, chunks, False, ctx)
        start = time.perf_counter()
        self.tier.submit_store(job)
        result = self._wait(job.job_id)
        wall = time.perf_counter() - start
        self.tier.on_request_finished(ctx)
        if not result.success:
            raise RuntimeError(f"a store job failed: {self.tier.counters()}")
        return result.transfer_time, wall

    def lookup_all(self, keys, ctx, deadline_s: float = 30.0) -> None:
        from vllm.v1.kv_offload.base import LookupResult, ScheduleEndContext
        deadline = time.monotonic() + deadline_s
        while True:
            answers = [self.tier.lookup(key, ctx) for key in keys]
            if all(a is LookupResult.HIT for a in answers):
                return
            if LookupResult.MISS in answers:
                raise RuntimeError(f"a stored key answered MISS: {self.tier.counters()}")
            self.tier.on_schedule_end(ScheduleEndContext(new_req_ids=(), preempted_req_ids=()))
            if time.monotonic() > deadline:
                raise RuntimeError("lookups did not settle")
            time.sleep(0.0002)

    def load(self, keys, chunks, ctx):
        """(transfer seconds, wall seconds) of one load job into ``chunks``."""
        job = self._job_of(keys, chunks, True, ctx)
        start = time.perf_counter()
        self.tier.submit_load(job)
        result = self._wait(job.job_id)
        wall = time.perf_counter() - start
        if not result.success:
            raise RuntimeError(f"a load job failed: {self.tier.counters()}")
        return result.transfer_time, wall

    def shutdown(self) -> None:
        self.flat.release()
        self.manager.shutdown()


def make_model_dir(root: str) -> str:
    """A local model directory (config and tokenizer files) for the tier's identity digests."""
    path = os.path.join(root, "bench-model")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                   "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "num_hidden_layers": 1, "vocab_size": 256, "max_position_embeddings": 65536,
                   "torch_dtype": "float16", "rms_norm_eps": 1e-5}, f)
    with open(os.path.join(path, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "model": {"type": "WordLevel", "vocab": {"a": 0}}}, f)
    with open(os.path.join(path, "model.safetensors"), "wb") as f:
        f.write(b"bench-weights")
    return path


def key_of(n: int) -> bytes:
    """An OffloadKey-shaped key (32-byte hash + 4-byte group index), unique per n."""
    from vllm.v1.kv_offload.base import make_offload_key
    return make_offload_key(n.to_bytes(8, "little") * 4, 0)



def run_size(stack: TierStack, jobs: int, rounds: int, dram_slots: int, next_key, failures) -> dict:
    """One row: memcpy, store and load of ``jobs`` chunks, ``rounds`` times, interleaved."""
    size = stack.row_bytes * jobs
    dst = mmap.mmap(-1, size, mmap.MAP_SHARED)
    dst[:] = b"\x01" * size  # touched, as the Manager's slots are in steady state
    dview = memoryview(dst)
    payload = os.urandom(stack.row_bytes)
    src_chunks = list(range(jobs))
    dst_chunks = list(range(jobs, 2 * jobs))
    # warm-up: every slot of the class written once (twice the class's slots), the JVM's paths hot
    for _ in range(max(2, (2 * dram_slots + jobs - 1) // jobs)):
        keys = [next_key() for _ in range(jobs)]
        stack.store(keys, src_chunks)
    memcpy_s, store_s, store_wall, load_s, load_wall = [], [], [], [], []
    for r in range(rounds):
        for c in src_chunks:  # fresh bytes per round, so a stale page cannot pass the check
            stack.row(c)[:] = payload
            stack.row(c)[:8] = (r * jobs + c).to_bytes(8, "little")
        start = time.perf_counter()
        for i, c in enumerate(src_chunks):
            dview[i * stack.row_bytes:(i + 1) * stack.row_bytes] = stack.row(c)
        memcpy_s.append(time.perf_counter() - start)
        keys = [next_key() for _ in range(jobs)]
        t, w = stack.store(keys, src_chunks)
        store_s.append(t)
        store_wall.append(w)
        ctx = stack.context()
        stack.lookup_all(keys, ctx)
        for c in dst_chunks:
            stack.row(c)[:] = b"\0" * stack.row_bytes
        t, w = stack.load(keys, dst_chunks, ctx)
        stack.tier.on_request_finished(ctx)
        load_s.append(t)
        load_wall.append(w)
        for s, d in zip(src_chunks, dst_chunks):
            if stack.row(s) != stack.row(d):
                failures.append(f"{stack.row_bytes} B x {jobs}: round {r}, chunk {s} loaded bytes differ")
    dview.release()
    dst.close()
    med = {k: statistics.median(v) for k, v in
           (("memcpy", memcpy_s), ("store", store_s), ("store_wall", store_wall), ("load", load_s),
            ("load_wall", load_wall))}
    p90 = {k: pct(v, 0.9) for k, v in
           (("memcpy", memcpy_s), ("store", store_s), ("load", load_s))}
    return {"bytes": size, "median": med, "p90": p90}


def main(argv) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--sizes-kib", default="256,2048")
    ap.add_argument("--jobs", default="1,8")
    ap.add_argument("--miss-lookups", type=int, default=400)
    ap.add_argument("--miss-warm-up", type=int, default=12000)
    ap.add_argument("--dram", default="1g")
    args = ap.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    logging_setup()
    import orbitkv.vllm.tier  # noqa: F401 - fails early without PYTHONPATH or vLLM
    manager = ManagerProcess(["--dram-bytes", args.dram, "--ssd-bytes", "256m", "--ssd-policy", "on-evict"],
                             log_path=os.path.join(args.out_dir, "manager.log"), prefix="bench-tier.",
                             java_options=["--sun-misc-unsafe-memory-access=allow"])
    workdir = tempfile.mkdtemp(prefix="bench-tier-model.")
    failures, rows, misses, warm_misses = [], [], [], []
    counter = iter(range(1, 1 << 62))
    try:
        model_dir = make_model_dir(workdir)
        for kib in (int(s) for s in args.sizes_kib.split(",")):
            jobs_list = [int(j) for j in args.jobs.split(",")]
            stack = TierStack(model_dir, manager.socket, kib * 1024, 2 * max(jobs_list))
            try:
                slots = slots_of_class(stack.tier.pages, kib * 1024)
                for jobs in jobs_list:
                    rows.append((kib, jobs, run_size(stack, jobs, args.rounds, slots, lambda: key_of(next(counter)),
                                                     failures)))
                if not misses:
                    misses = miss_lookups(stack, args.miss_lookups, lambda: key_of(next(counter)))
                    miss_lookups(stack, args.miss_warm_up, lambda: key_of(next(counter)))
                    warm_misses = miss_lookups(stack, args.miss_lookups, lambda: key_of(next(counter)))
            finally:
                stack.shutdown()
    finally:
        manager.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(table(rows, misses, warm_misses, args))
    for f in failures:
        print(f"WRONG BYTES: {f}")
    return 1 if failures else 0


def logging_setup() -> None:
    import logging
    logging.basicConfig(level=logging.WARNING)



def miss_lookups(stack: TierStack, n: int, next_key):
    from orbitkv.vllm.tier import page_name
    pages = stack.tier.pages
    out = []
    for _ in range(n):
        name = page_name(next_key())
        start = time.perf_counter()
        lookup = pages.lookup([name])
        out.append(time.perf_counter() - start)
        if lookup.pages:
            raise RuntimeError("a never-stored name was a hit")
        lookup.close()
    return out


def table(rows, misses, warm_misses, args) -> str:
    def ms(s):
        return f"{s * 1e3:.3f}"

    def gbs(b, s):
        return f"{b / s / 1e9:.2f}"
    out = ["| chunk | chunks per job | memcpy ms (GB/s) | store ms p50 / p90 (GB/s) | load ms p50 / p90 (GB/s) "
           "| store / memcpy | load / memcpy | store wall ms | load wall ms |",
           "|---|---|---|---|---|---|---|---|---|"]
    for kib, jobs, r in rows:
        m, p, b = r["median"], r["p90"], r["bytes"]
        label = f"{kib // 1024} MiB" if kib >= 1024 else f"{kib} KiB"
        out.append(f"| {label} | {jobs} | {ms(m['memcpy'])} ({gbs(b, m['memcpy'])}) | "
                   f"{ms(m['store'])} / {ms(p['store'])} ({gbs(b, m['store'])}) | "
                   f"{ms(m['load'])} / {ms(p['load'])} ({gbs(b, m['load'])}) | "
                   f"{m['memcpy'] / m['store']:.2f} | {m['memcpy'] / m['load']:.2f} | "
                   f"{ms(m['store_wall'])} | {ms(m['load_wall'])} |")
    out.append("")
    if misses:
        out.append(f"missing lookup (one never-stored name, the tier's connection, {len(misses)} lookups): "
                   f"p50 {statistics.median(misses) * 1e6:.0f} us, p90 {pct(misses, 0.9) * 1e6:.0f} us right after "
                   "the transfers")
    if warm_misses:
        out.append(f"missing lookup after {args.miss_warm_up} more: p50 {statistics.median(warm_misses) * 1e6:.0f} us, "
                   f"p90 {pct(warm_misses, 0.9) * 1e6:.0f} us (target <= 50 us)")
    out.append(f"{args.rounds} rounds per row after a warm-up that writes twice the slot class; store and load "
               "times are the tier's JobResult.transfer_time (its I/O worker), wall = submit to "
               "get_finished_jobs; ratios are memcpy time over the operation's time (target >= 0.8).")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
