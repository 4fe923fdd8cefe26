"""OrbitKV as a vLLM KV connector: ``OrbitKvConnector(KVConnectorBase_V1)`` (vLLM 0.33.0).

Load it with::

    --kv-transfer-config '{"kv_connector": "OrbitKvConnector",
                           "kv_connector_module_path": "orbitkv.vllm.connector",
                           "kv_role": "kv_both", "kv_load_failure_policy": "recompute",
                           "kv_connector_extra_config": {"socket_path": "/run/orbitkv/m.sock",
                                                         "timeout_s": 2.0}}'

vLLM's ``KVConnectorFactory`` imports ``kv_connector_module_path`` (it takes priority over the
built-in registry) and constructs the class twice: ``role=SCHEDULER`` in the engine core and
``role=WORKER`` beside each model runner. The class does not subclass ``SupportsHMA``, so
vLLM 0.33 turns the hybrid KV-cache manager off by itself (no flag needed).

Owns the vLLM boundary and nothing else: it checks the KV layout at construction
(:func:`~orbitkv.vllm.connector_layout.supported_spec`: one group of ``FullAttentionSpec``,
unquantised, TP = PP = DCP = PCP = 1; anything else raises ``UnsupportedKvLayout`` before the
engine serves a request), then hands every hook to one half:

- scheduler role -> :class:`~orbitkv.vllm.connector_scheduler.ConnectorScheduler` (lookups,
  leases, load and save plans);
- worker role -> :class:`~orbitkv.vllm.connector_worker.ConnectorWorker` (copies between pages
  and the KV-cache tensors; publishing).

A page is one vLLM block (``block_size`` tokens) of every layer, named by vLLM's block hash
(which already carries ``cache_salt`` and LoRA), in the namespace of
:func:`orbitkv.vllm.identity.vllm_identity` whose layout descriptor names the attention backend,
the resolved physical layout, layers, KV heads, head sizes, block and kernel block size and the
KV dtype (:class:`~orbitkv.vllm.connector_layout.KvPageBinding`).

Handshake: only the worker sees the tensors and the attention backend, so it builds the namespace
in ``register_kv_caches`` and returns it from ``get_handshake_metadata``; vLLM's engine core
passes it to the scheduler's ``set_xfer_handshake_metadata`` before the first request. The
scheduler checks the page size against its own ``KVCacheConfig`` and opens its own connection in
that namespace; before that it answers misses (``not_ready``).

Messages: scheduler -> worker :class:`OrbitKvConnectorMetadata` (loads, saves, per step); worker ->
scheduler :class:`OrbitKvWorkerMeta` (loads done or failed, so the scheduler releases its leases).

Extra config keys: ``socket_path`` (required), ``timeout_s`` (default 2.0: bound on one Manager
answer; the scheduler never waits longer on one call, except the first call after a
(re)connect, which also registers), ``retry_after_s`` (1.0), ``max_requests`` (4096 tracked
requests), ``max_pending_s`` (how long a request may wait for pages being staged from SSD, default
``timeout_s``), ``prepare`` (default true: a PREPARE per added request, from ``on_new_request``),
``prepare_first_use_ms`` (0: when an added request is expected to be looked up; the Manager starts
staging that long ahead of it minus its read estimate and lets the pages go 2 s after it unless a
lookup took them), ``max_prepares`` (256 live per connection). ``kv_role`` ``kv_producer`` only
publishes, ``kv_consumer`` only loads (and prepares).

``kv_load_failure_policy``: vLLM 0.33 defaults to ``"fail"``, which fails a request whose
promised blocks could not be loaded (the Manager died between the scheduler's answer and the
worker's read); ``"recompute"`` recomputes them. Either way vLLM discards what the step computed
over the unloaded blocks, and the worker publishes nothing of that request in that step; the
scheduler role logs a warning unless the policy is ``"recompute"``.

Device: the copies are torch operations that work on CPU and CUDA tensors alike; the CPU path is
what the tests run (CPU attention backend, layout ``LBHNC``: per layer ``[num_blocks, kv_heads,
block_size, 2 * head_size]``, strides ``(kv_heads*block_size*2*head_size, block_size*2*head_size,
2*head_size, 1)``). The CUDA path (device index tensors, pinned host staging) has not run on a GPU
yet: it is qualified only when a GPU machine runs it.

Thread model: each role's hooks are called by one vLLM thread (scheduler: the engine core loop;
worker: the model runner); see the two halves.

Design note. Loads are synchronous (vLLM runs them in ``start_load_kv`` before the forward), not
asynchronous (``WAITING_FOR_REMOTE_KVS``): the copies are small next to one Manager round trip
(gathering 16 pages of 16 KiB from the CPU cache takes 0.03 ms, scattering them 0.12 ms, best of
30 on this 2-core host), so a background thread and per-request completion tracking would buy
less than they cost. The worker reads the pages over its own QUERY rather than through the
scheduler's leases: a lease is an offset into an arena of one connection's Manager, and a worker
process cannot prove its own mapping belongs to the same Manager incarnation after a restart; its
own lease proves every restored byte, and the scheduler's lease, held until the worker reports,
keeps the pages in DRAM meanwhile. The price is one QUERY per loaded request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set

import torch

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorHandshakeMetadata,
    KVConnectorMetadata,
    KVConnectorRole,
    KVConnectorWorkerMetadata,
)
from vllm.v1.metrics.cache_hit_source import CacheHitSource

from ..pages import DEFAULT_RETRY_AFTER_S, DEFAULT_TIMEOUT_S, ManagerPages
from ..state import Namespace
from .connector_layout import KvPageBinding, UnsupportedKvLayout, layer_names, page_bytes, supported_spec
from .connector_scheduler import ConnectorScheduler, LoadPlan, SavePlan, SchedulerConfig
from .connector_worker import ConnectorWorker
from .identity import vllm_identity

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

log = logging.getLogger("orbitkv.vllm.connector")

__all__ = ["OrbitKvConnector", "OrbitKvConnectorMetadata", "OrbitKvHandshake", "OrbitKvWorkerMeta",
           "UnsupportedKvLayout"]


@dataclass
class OrbitKvConnectorMetadata(KVConnectorMetadata):
    """One step's work for the worker: loads before the forward, saves after it."""
    loads: List[LoadPlan] = field(default_factory=list)
    saves: List[SavePlan] = field(default_factory=list)


@dataclass
class OrbitKvWorkerMeta(KVConnectorWorkerMetadata):
    """The worker's report of one step's loads."""
    loaded: Set[str] = field(default_factory=set)
    failed: Set[str] = field(default_factory=set)

    def aggregate(self, other: "KVConnectorWorkerMetadata") -> "KVConnectorWorkerMetadata":
        if not isinstance(other, OrbitKvWorkerMeta):
            return self
        return OrbitKvWorkerMeta(self.loaded | other.loaded, self.failed | other.failed)


@dataclass
class OrbitKvHandshake(KVConnectorHandshakeMetadata):
    """What the worker found in ``register_kv_caches``: the namespace its pages live in."""
    namespace: Namespace
    descriptor: str
    page_bytes: int


class _Settings:
    """The ``kv_connector_extra_config`` keys, checked once."""

    def __init__(self, kv_transfer_config: Any):
        extra = dict(kv_transfer_config.kv_connector_extra_config or {})
        self.socket_path = extra.get("socket_path")
        if not self.socket_path:
            raise ValueError("OrbitKvConnector needs kv_connector_extra_config.socket_path (the Manager's socket)")
        self.timeout_s = float(extra.get("timeout_s", DEFAULT_TIMEOUT_S))
        self.retry_after_s = float(extra.get("retry_after_s", DEFAULT_RETRY_AFTER_S))
        self.max_requests = int(extra.get("max_requests", 4096))
        self.max_pending_s = float(extra.get("max_pending_s", self.timeout_s))
        self.prepare = bool(extra.get("prepare", True))
        self.prepare_first_use_ms = int(extra.get("prepare_first_use_ms", 0))
        self.max_prepares = int(extra.get("max_prepares", 256))
        if (self.timeout_s <= 0 or self.retry_after_s < 0 or self.max_requests < 1 or self.max_pending_s < 0
                or not 0 <= self.prepare_first_use_ms <= 2 ** 31 - 1 or self.max_prepares < 0):
            raise ValueError(f"OrbitKvConnector: invalid extra config {extra}")
        self.load = bool(kv_transfer_config.is_kv_consumer)
        self.save = bool(kv_transfer_config.is_kv_producer)

    def store(self, namespace: Namespace) -> ManagerPages:
        return ManagerPages(self.socket_path, namespace, timeout_s=self.timeout_s, retry_after_s=self.retry_after_s,
                            max_prepares=self.max_prepares)


class OrbitKvConnector(KVConnectorBase_V1):
    """See the module header."""

    def __init__(self, vllm_config: "VllmConfig", role: KVConnectorRole, kv_cache_config: "KVCacheConfig"):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        self._spec = supported_spec(vllm_config, kv_cache_config)
        self._settings = _Settings(self._kv_transfer_config)
        self._page_bytes = page_bytes(self._spec, kv_cache_config)
        self._scheduler: Optional[ConnectorScheduler] = None
        self._worker: Optional[ConnectorWorker] = None
        self._handshake: Optional[OrbitKvHandshake] = None
        self._unbound_blocks: Set[int] = set()  # loads that met no registered KV cache
        self._unbound_requests: Set[str] = set()
        if role == KVConnectorRole.SCHEDULER:
            if getattr(self._kv_transfer_config, "kv_load_failure_policy", "fail") != "recompute":
                log.warning("OrbitKvConnector: kv_load_failure_policy is not 'recompute': a page that cannot be "
                            "loaded after the scheduler counted it (the Manager died in between) fails its "
                            "request instead of recomputing it; set \"kv_load_failure_policy\": \"recompute\"")
            block = int(self._spec.block_size)
            self._scheduler = ConnectorScheduler(SchedulerConfig(
                block_size=block, hash_block_size=int(kv_cache_config.hash_block_size or block),
                max_requests=self._settings.max_requests, max_pending_s=self._settings.max_pending_s,
                load=self._settings.load, save=self._settings.save, prepare=self._settings.prepare,
                prepare_first_use_ms=self._settings.prepare_first_use_ms))

    @property
    def requires_kv_delivery(self) -> bool:
        return False  # a best-effort cache: a dropped save is a later miss

    def snapshot(self) -> Dict[str, int]:
        """Counters of this role (and of its Manager connection, ``store_*``)."""
        if self._scheduler is not None:
            return self._scheduler.snapshot()
        return self._worker.snapshot() if self._worker is not None else {}

    # -- worker role -----------------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: Dict[str, torch.Tensor]) -> None:
        from vllm.distributed.kv_transfer.kv_connector.utils import get_current_attn_backends

        names = layer_names(self._kv_cache_config)
        backends = {b.get_name() for b in get_current_attn_backends(self._vllm_config, names)}
        if len(backends) != 1:
            raise UnsupportedKvLayout(f"OrbitKvConnector needs one attention backend for all layers, got {backends}")
        layout = (self._kv_cache_config.kv_cache_layout or self._vllm_config.cache_config.kv_cache_layout)
        if not layout:
            raise UnsupportedKvLayout("the KV-cache layout is not resolved (KVCacheConfig.kv_cache_layout)")
        binding = KvPageBinding(kv_caches, self._spec, self._kv_cache_config, backends.pop(), str(layout))
        if binding.page_bytes != self._page_bytes:
            raise UnsupportedKvLayout(f"page of {binding.page_bytes} B != the spec's {self._page_bytes} B")
        namespace = vllm_identity(self._vllm_config, page_tokens=binding.format.block_size,
                                  kv_layout=binding.format.descriptor, tp_rank=0, pp_rank=0).namespace()
        if self._worker is not None:
            self._worker.close()
        self._worker = ConnectorWorker(binding, self._settings.store(namespace), self._settings.timeout_s)
        self._handshake = OrbitKvHandshake(namespace, binding.format.descriptor, binding.page_bytes)
        log.info("OrbitKvConnector worker: pages of %d B (%s) at %s", binding.page_bytes,
                 binding.format.descriptor, self._settings.socket_path)

    def get_handshake_metadata(self) -> Optional[KVConnectorHandshakeMetadata]:
        return self._handshake

    def start_load_kv(self, forward_context: "ForwardContext", **kwargs: Any) -> None:
        meta = self._metadata()
        if meta is not None and meta.loads:
            if self._worker is None:  # no tensors registered: nothing loaded, all recomputed
                for plan in meta.loads:
                    self._unbound_blocks.update(plan.block_ids)
                    self._unbound_requests.add(plan.req_id)
                return
            self._worker.load(meta.loads)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # loads complete inside start_load_kv: a page spans every layer

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor, attn_metadata: Any, **kwargs: Any) -> None:
        return  # a page spans every layer: it is gathered once in wait_for_save

    def wait_for_save(self) -> None:
        meta = self._metadata()
        if meta is not None and meta.saves and self._worker is not None:
            self._worker.save(meta.saves)

    def get_finished(self, finished_req_ids: Set[str]):
        return None, None  # loads and saves are synchronous

    def get_block_ids_with_load_errors(self) -> Set[int]:
        invalid = self._worker.take_invalid_block_ids() if self._worker is not None else set()
        invalid |= self._unbound_blocks
        self._unbound_blocks = set()
        return invalid

    def build_connector_worker_meta(self) -> Optional[KVConnectorWorkerMetadata]:
        loaded, failed = self._worker.take_report() if self._worker is not None else (set(), set())
        failed |= self._unbound_requests
        self._unbound_requests = set()
        return OrbitKvWorkerMeta(loaded, failed) if loaded or failed else None

    def shutdown(self) -> None:
        if self._worker is not None:
            self._worker.close()
        if self._scheduler is not None:
            self._scheduler.shutdown()

    def _metadata(self) -> Optional[OrbitKvConnectorMetadata]:
        if not self.has_connector_metadata():
            return None
        meta = self._get_connector_metadata()
        return meta if isinstance(meta, OrbitKvConnectorMetadata) else None

    # -- scheduler role --------------------------------------------------------------------------

    def set_xfer_handshake_metadata(self, metadata: Dict[int, KVConnectorHandshakeMetadata]) -> None:
        if self._scheduler is None:
            return
        found = [m for m in metadata.values() if isinstance(m, OrbitKvHandshake)]
        if not found:
            log.warning("OrbitKvConnector: no worker described its pages; every request is a miss")
            return
        first = found[0]
        if any(m.namespace != first.namespace for m in found[1:]):
            raise UnsupportedKvLayout("OrbitKvConnector workers disagree on the page namespace")
        if first.page_bytes != self._page_bytes:
            raise UnsupportedKvLayout(f"the worker's page of {first.page_bytes} B != the scheduler's "
                                      f"{self._page_bytes} B")
        if self._scheduler.store is not None:
            self._scheduler.store.close()
        self._scheduler.attach(self._settings.store(first.namespace))
        log.info("OrbitKvConnector scheduler: namespace %s (%s)", first.namespace.digest().hex()[:16],
                 first.descriptor)

    def on_new_request(self, request: "Request") -> None:
        self._scheduler.on_new_request(request)

    def get_num_new_matched_tokens(self, request: "Request", num_computed_tokens: int):
        return self._scheduler.get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request: "Request", blocks: "KVCacheBlocks", num_external_tokens: int) -> None:
        self._scheduler.update_state_after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: "SchedulerOutput") -> KVConnectorMetadata:
        loads, saves = self._scheduler.build_connector_meta(scheduler_output, self._kv_cache_manager)
        return OrbitKvConnectorMetadata(loads, saves)

    def get_external_cache_hit_sources(self, request: "Request", num_external_tokens: int):
        if num_external_tokens == 0:
            return {}
        source = CacheHitSource.DISK if self._scheduler.hit_source(request) == "disk" else CacheHitSource.HOST
        return {source: num_external_tokens}

    def update_connector_output(self, connector_output: Any) -> None:
        meta = getattr(connector_output, "kv_connector_worker_meta", None)
        if isinstance(meta, OrbitKvWorkerMeta):
            self._scheduler.on_worker_report(meta.loaded, meta.failed)

    def request_finished(self, request: "Request", block_ids: List[int]):
        self._scheduler.request_finished(request)
        return False, None
