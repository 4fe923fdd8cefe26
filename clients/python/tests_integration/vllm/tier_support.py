"""Test support for the OrbitKV vLLM tier: one vLLM "instance" = the installed vLLM's own
offloading stack built from an ``OffloadingConfig`` (``OffloadingSpecFactory`` ->
``TieringOffloadingSpec.get_manager()`` -> ``TieringOffloadingManager`` over a
``CPUPrimaryTierOffloadingManager`` on a real ``SharedOffloadRegion`` in /dev/shm, with the
``OrbitKvTier`` loaded by ``SecondaryTierFactory`` from ``module_path``), driven the way vLLM's
offloading scheduler drives it (one lookup pass per request per step, keys in prefix order,
stopping at the first MISS, then ``on_schedule_end``), with the GPU worker's two copies
(GPU -> primary row, primary row -> GPU) done by the test on the primary region's bytes.

Block hashes come from vLLM's own hasher (``Request`` + ``get_request_block_hasher`` + sha256),
so ``cache_salt`` enters them the way it does in the engine.

Thread model: the test thread only; every manager call holds ``manager.lock`` as vLLM's scheduler
does (``shutdown`` excepted).
"""

from __future__ import annotations

import time
import uuid
from typing import Dict, List, Optional, Sequence

from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.kv_offload.base import LookupResult, ReqContext, ScheduleEndContext, make_offload_key
from vllm.v1.kv_offload.config import (OffloadingCacheConfig, OffloadingConfig, OffloadingGroupConfig,
                                       OffloadingModelConfig, OffloadingParallelConfig)
from vllm.v1.kv_offload.factory import OffloadingSpecFactory
from vllm.v1.kv_offload.tiering.manager import TieringOffloadingManager
from vllm.v1.request import Request

BLOCK_TOKENS = 16
ROW_BYTES = 64 * 1024  # one chunk row: one 16-token block of one worker (64 KiB, a Manager slot class)
NUM_CHUNKS = 48
STEP_S = 0.002  # pause between emulated scheduler steps
# The most one scheduler pass may take while the Manager is stalled or gone: a tenth of the tier's
# timeout_s (10 s), so a pass that waited for the Manager fails it, with room for a descheduled
# thread on 2 shared cores (a pass takes about a millisecond).
PASS_BOUND_S = 1.0

init_none_hash(sha256)  # vLLM does this at engine start; sha256 gives a process-independent seed


def offloading_config(*, model: str, dtype: str = "float16", engine_id: Optional[str] = None,
                      socket_path: str, timeout_s: float = 10.0, tier_extra: Optional[dict] = None,
                      num_chunks: int = NUM_CHUNKS) -> OffloadingConfig:
    """The ``OffloadingConfig`` vLLM builds for a one-worker, one-group engine with the OrbitKV tier."""
    tier = {"type": "OrbitKvTier", "module_path": "orbitkv.vllm.tier", "socket_path": socket_path,
            "timeout_s": timeout_s, "retry_after_s": 0.5}
    tier.update(tier_extra or {})
    extra = {"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": num_chunks * ROW_BYTES,
             "secondary_tiers": [tier]}
    return OffloadingConfig(
        groups=(OffloadingGroupConfig(tokens_per_block=BLOCK_TOKENS,
                                      layer_names=("model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn"),
                                      group_id=0),),
        worker_kv_bytes_per_block=ROW_BYTES, enable_kv_cache_events=False, extra_config=extra,
        engine_id=engine_id or f"okvtest-{uuid.uuid4().hex[:12]}",
        model=OffloadingModelConfig(name=model, dtype=dtype, max_model_len=4096),
        cache=OffloadingCacheConfig(tokens_per_hash=BLOCK_TOKENS, blocks_per_chunk=1),
        parallel=OffloadingParallelConfig(rank=0, world_size=1, tp_size=1, pp_size=1, pcp_size=1, dcp_size=1,
                                          data_parallel_index=0, data_parallel_size=1,
                                          data_parallel_rank_local=None, is_parallelism_agnostic=True),
        kv_cache_layout="NHD")


def chunk_keys(tokens: Sequence[int], cache_salt: Optional[str] = None, req_id: str = "r") -> List[bytes]:
    """The OffloadKeys vLLM's offloading scheduler forms for a prompt (block hash + group 0)."""
    request = Request(req_id, list(tokens), SamplingParams(max_tokens=1), None, cache_salt=cache_salt,
                      block_hasher=get_request_block_hasher(BLOCK_TOKENS, sha256))
    return [make_offload_key(h, 0) for h in request.block_hashes]


def prompt(seed: int, chunks: int) -> List[int]:
    return [(seed * 7919 + i) % 50000 for i in range(chunks * BLOCK_TOKENS + 1)]


class Instance:
    """One engine's offloading stack (see the module header)."""

    def __init__(self, config: OffloadingConfig):
        self.spec = OffloadingSpecFactory.create_spec(config)
        self.manager = self.spec.get_manager()
        assert isinstance(self.manager, TieringOffloadingManager), type(self.manager)
        self.tier = self.manager.secondary_tiers[0]
        self.view = self.manager.primary_tier.get_kv_memoryview()
        self.flat = self.view.cast("B")
        self.region_path = self.manager.primary_tier._mmap_region.mmap_path
        self._seq = 0

    def row(self, chunk: int) -> bytes:
        return bytes(self.flat[chunk * ROW_BYTES:(chunk + 1) * ROW_BYTES])

    def step_end(self) -> None:
        with self.manager.lock:
            self.manager.on_schedule_end(ScheduleEndContext(new_req_ids=(), preempted_req_ids=()))

    def new_request(self) -> ReqContext:
        self._seq += 1
        ctx = ReqContext(req_id=f"req-{self._seq}")
        with self.manager.lock:
            self.manager.on_new_request(ctx)
        return ctx

    def finish(self, ctx: ReqContext, deadline_s: float = 20.0) -> None:
        with self.manager.lock:
            self.manager.on_request_finished(ctx)
        self.settle(deadline_s)

    def settle(self, deadline_s: float = 20.0) -> None:
        """Steps until no transfer job is in flight (the engine keeps stepping while
        ``has_pending_work``), failing after ``deadline_s``."""
        deadline = time.monotonic() + deadline_s
        while True:
            with self.manager.lock:
                pending = self.manager.has_pending_work()
            if not pending:
                return
            if time.monotonic() > deadline:
                raise AssertionError("offloading jobs did not finish in time")
            self.step_end()
            time.sleep(STEP_S)

    def store(self, keys: Sequence[bytes], payloads: Dict[bytes, bytes]) -> None:
        """A request computes ``keys``: GPU -> primary (the worker's copy, done here on the row
        bytes), ``complete_store`` (cascades to the tier), then steps until the cascade ends."""
        ctx = self.new_request()
        with self.manager.lock:
            out = self.manager.prepare_store(list(keys), ctx)
        assert out is not None, "the primary tier refused the store"
        for key, chunk in zip(out.keys_to_store, out.store_spec.chunk_ids):
            self.flat[int(chunk) * ROW_BYTES:(int(chunk) + 1) * ROW_BYTES] = payloads[key]
        self.step_end()
        with self.manager.lock:
            self.manager.complete_store(list(keys), ctx, True)
        self.finish(ctx)

    def lookup_pass(self, keys: Sequence[bytes], ctx: ReqContext, end_step: bool = True) -> List[LookupResult]:
        """One scheduler pass over a request's keys (``_maximal_prefix_lookup``: keep scanning past
        RETRY and HIT_PENDING, stop at the first MISS), then the step's end (unless ``end_step``
        is False: promotions the pass started are then not yet submitted to the tier)."""
        results = []
        with self.manager.lock:
            for key in keys:
                result = self.manager.lookup(key, ctx)
                results.append(result)
                if result is LookupResult.MISS:
                    break
        if end_step:
            self.step_end()
        return results

    def lookup_until_settled(self, keys: Sequence[bytes], ctx: ReqContext, deadline_s: float = 20.0):
        """Steps until a pass answers only HIT (or a MISS ends it); returns every pass's answers."""
        passes = []
        deadline = time.monotonic() + deadline_s
        while True:
            results = self.lookup_pass(keys, ctx)
            passes.append(results)
            if all(r is LookupResult.HIT for r in results) or LookupResult.MISS in results:
                return passes
            if time.monotonic() > deadline:
                raise AssertionError(f"lookups did not settle: last pass {results}")
            time.sleep(STEP_S)

    def load(self, keys: Sequence[bytes], ctx: ReqContext) -> Dict[bytes, bytes]:
        """Primary -> GPU for keys that answered HIT: the bytes of each key's primary row."""
        with self.manager.lock:
            spec = self.manager.prepare_load(list(keys), ctx)
        rows = {key: self.row(int(chunk)) for key, chunk in zip(keys, spec.chunk_ids)}
        with self.manager.lock:
            self.manager.complete_load(list(keys), ctx)
        return rows

    def shutdown(self) -> None:
        self.flat.release()
        self.manager.shutdown()
