"""SGLang HiCache L3 storage over an OrbitKV Manager: ``OrbitKvHiCacheStorage``.

SGLang loads it with ``--hicache-storage-backend dynamic`` and an extra config naming this module
and class, plus ``socket_path`` (required) and optionally ``timeout_s``, ``retry_after_s``,
``exists_wait_s``, ``model_path``, ``model_revision``, ``weights_digest``, ``instance_id``. Its
factory calls ``OrbitKvHiCacheStorage(storage_config, kwargs)``; the cache controller then calls
:meth:`register_mem_pool_host` in the same try block, so a refusal there fails the attach.

Owns one :class:`~orbitkv.pages.ManagerPages` (made at registration: the namespace needs the host
pool's geometry) and a :class:`HostPagePlan` (where each page's bytes lie in the host pool). The
pages live in the Manager; the host pool and its slots belong to SGLang.

Page image: the pool's flat data page (``get_data_page(flat=True)``; K then V for MHA), so the v1
zero-copy interface (``interface_v1: 1``: ``batch_get_v1``/``batch_set_v1``) and the legacy one
(``get``/``batch_get``/``set``/``batch_set``/``exists``) read each other's pages, and a page is
byte for byte the file SGLang's ``HiCacheFile`` writes. v1 reads copy from the Manager's arena
straight into the host slots; v1 writes hand the pool's memory to the publish, which copies it into
the Manager's slots (MLA: one run; MHA: the K and V runs one after the other, never gathered into a
buffer first). The plan checks the runs against the pool's ``get_page_buffer_meta`` at
registration.

Names and namespace: SGLang's key is a hex SHA-256 chain over the page's tokens seeded with the
request's ``extra_key`` and ``cache_salt`` (``get_storage_hash_str``), so the salt is in every key;
the page name is SHA-256 of the key. The namespace (:class:`~orbitkv.identity.EngineIdentity`):
SGLang's storage model name (it carries the pool's format tag), revision, weights and tokenizer
digests (of ``model_path`` when local: read once per model, then cached; ``weights_digest`` in the
config skips it), model and KV dtypes, page size, ``sglang-hicache:<layout>:<mha|mla>:<geometry>:
cp<r>/<n>`` and the pipeline stage. MHA pages are per TP rank; MLA pages are one copy for all TP
ranks, as in SGLang's own backends (only rank 0 writes them, ``is_storage_writer``). The DP rank
and size are in the namespace: with DP attention ``tp_rank`` is local to the attention group and
SGLang's own config says ``dp_rank`` disambiguates it; replicas then do not share pages (the price
of an identity that never conflates two ranks).

Refused (``UnsupportedLayout``, a ValueError): host pools other than plain
``MHATokenToKVPoolHost``/``MLATokenToKVPoolHost`` (scales, indexers, Mamba/SWA, envelopes: pages
that cannot be restored whole), layouts other than ``page_first``/``page_first_direct``, DCP,
split heads, packed DSA rows, allocator-only pools, and any sidecar pool offered through
``register_mem_host_pool_v2``; v2 batch calls naming a sidecar answer a miss.

Failure policy: nothing raises into SGLang; batch calls always return a list of ``len(keys)`` (or a
count). Manager failures are misses / unstored pages, counted by ``ManagerPages``, every wait
bounded by ``timeout_s``; bad input is a miss counted in ``rejected_input``; anything unexpected is
caught at the public method, counted in ``internal_errors`` and logged once per method.

Thread model: SGLang calls ``batch_exists`` (prefetch thread), ``batch_get_v1`` (prefetch I/O
thread) and ``batch_set_v1`` (backup thread) concurrently. ``ManagerPages`` is thread-safe; counters
and metric samples are guarded by ``_lock``; the plan is immutable once registered.

Design note: one QUERY per SGLang batch (128 pages, ``STORAGE_BATCH_SIZE``), so a prefetch is two
round trips (exists, then read) whatever its length. ``bin/bench-hicache`` times the three calls
through SGLang's own controller against ``HiCacheFile`` and a memcpy (docs/performance.md).
"""

from __future__ import annotations

import collections
import hashlib
import logging
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

import torch

from sglang.srt.mem_cache.hicache_storage import (
    HiCacheStorage,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolName,
    PoolTransfer,
    PoolTransferResult,
)

from ..client import PageParts
from ..identity import EngineIdentity, dtype_name, join_layout, tokenizer_digest, weights_digest
from ..pages import DEFAULT_RETRY_AFTER_S, DEFAULT_TIMEOUT_S, ManagerPages

log = logging.getLogger("orbitkv.sglang")

#: Host pool layouts whose page is a fixed set of contiguous runs (see :class:`HostPagePlan`).
SUPPORTED_LAYOUTS = ("page_first", "page_first_direct")
#: Bound on each metric sample queue between two ``get_stats`` calls.
METRIC_SAMPLES = 4096

COUNTERS = ("exists_calls", "exists_pages_asked", "exists_pages_found", "get_calls", "get_pages_asked",
            "get_pages_read", "set_calls", "set_pages_asked", "set_pages_stored", "rejected_input",
            "not_registered", "page_size_mismatch", "refused_sidecar", "clear_refused", "internal_errors")

_METRIC_SERIES = ("prefetch_pgs", "backup_pgs", "prefetch_bandwidth", "backup_bandwidth")


class UnsupportedLayout(ValueError):
    """A storage config or host pool whose pages this backend cannot store and restore whole."""


@dataclass(frozen=True)
class BackendConfig:
    """The backend's keys in SGLang's ``--hicache-storage-backend-extra-config``."""
    socket_path: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    retry_after_s: float = DEFAULT_RETRY_AFTER_S
    #: How long ``batch_exists`` waits for pages the Manager is staging from SSD (default ``timeout_s``).
    exists_wait_s: Optional[float] = None
    model_path: Optional[str] = None
    revision: Optional[str] = None
    weights_digest: Optional[str] = None
    instance_id: Optional[str] = None

    @classmethod
    def from_extra_config(cls, extra: Optional[dict]) -> "BackendConfig":
        extra = extra or {}
        socket_path = extra.get("socket_path")
        if not isinstance(socket_path, str) or not socket_path:
            raise ValueError("orbitkv HiCache backend: extra config needs \"socket_path\", the Manager's Unix socket")

        def seconds(key: str, default: Optional[float], allow_zero: bool) -> Optional[float]:
            value = extra.get(key, default)
            if value is None:
                return None
            if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or value < 0 or (value == 0 and not allow_zero)):
                raise ValueError(f"orbitkv HiCache backend: \"{key}\" must be a number of seconds "
                                 f"{'>= 0' if allow_zero else '> 0'}, got {value!r}")
            return float(value)

        def text(key: str) -> Optional[str]:
            value = extra.get(key)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"orbitkv HiCache backend: \"{key}\" must be a non-empty string, got {value!r}")
            return value

        return cls(socket_path=socket_path, timeout_s=seconds("timeout_s", DEFAULT_TIMEOUT_S, False),
                   retry_after_s=seconds("retry_after_s", DEFAULT_RETRY_AFTER_S, True),
                   exists_wait_s=seconds("exists_wait_s", None, True), model_path=text("model_path"),
                   revision=text("model_revision"), weights_digest=text("weights_digest"),
                   instance_id=text("instance_id"))


def page_name(key: str) -> bytes:
    """The OrbitKV page name of an SGLang storage key: SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(key.encode("utf-8")).digest()


def refuse_unsupported_config(config: HiCacheStorageConfig) -> None:
    """Raises :class:`UnsupportedLayout` for storage configurations this backend does not store."""
    if not config.model_name:
        raise UnsupportedLayout("orbitkv HiCache backend: the storage config names no model; pages of "
                                "different models would share a namespace")
    if config.dcp_size != 1:
        raise UnsupportedLayout(f"orbitkv HiCache backend: decode context parallelism (dcp_size="
                                f"{config.dcp_size}) is not supported")
    if config.should_split_heads:
        raise UnsupportedLayout("orbitkv HiCache backend: split heads across heterogeneous TP sizes "
                                "(tp_lcm_size) is not supported")


class HostPagePlan:
    """Where the bytes of one KV page lie in a registered SGLang host pool, and how they map to the
    page image the Manager stores (the pool's flat data page: K then V for MHA).

    Immutable after construction; the pool's memory is written only by whoever owns the slots.
    Construction refuses (``UnsupportedLayout``) every pool whose page is not a complete, fixed
    set of contiguous runs of one tensor, and checks the runs against the pool's own zero-copy
    description (``get_page_buffer_meta``) on its first and last page.
    """

    def __init__(self, pool: Any, config: HiCacheStorageConfig):
        from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
        from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost

        kind = {MHATokenToKVPoolHost: "mha", MLATokenToKVPoolHost: "mla"}.get(type(pool))
        if kind is None:
            raise UnsupportedLayout(
                f"orbitkv HiCache backend: host pool {type(pool).__name__} is not supported; only "
                "MHATokenToKVPoolHost and MLATokenToKVPoolHost, whose page is the whole KV state of its "
                "tokens (pools with scales, indexers, Mamba/SWA state or page envelopes are refused)")
        if (kind == "mla") != bool(config.is_mla_model):
            raise UnsupportedLayout(f"orbitkv HiCache backend: host pool {type(pool).__name__} disagrees with "
                                    f"the storage config (is_mla_model={config.is_mla_model})")
        if pool.layout not in SUPPORTED_LAYOUTS:
            raise UnsupportedLayout(
                f"orbitkv HiCache backend: host layout {pool.layout!r} is not supported; use "
                "--hicache-mem-layout page_first (io backend kernel) or page_first_direct (io backend direct)")
        if getattr(pool, "kv_buffer", None) is None:
            raise UnsupportedLayout("orbitkv HiCache backend: the host pool has no KV buffer (allocator-only pool)")
        if pool.dcp_size != 1:
            raise UnsupportedLayout("orbitkv HiCache backend: a host pool with decode context parallelism "
                                    "is not supported")
        if kind == "mla" and getattr(pool, "dsa_kv_cache_store_fp8", False):
            raise UnsupportedLayout("orbitkv HiCache backend: packed DSA MLA rows need their indexer pages, "
                                    "which this backend does not store")
        if pool.kv_buffer.device.type != "cpu" or not pool.kv_buffer.is_contiguous():
            raise UnsupportedLayout("orbitkv HiCache backend: the host KV buffer must be one contiguous CPU tensor")
        self.pool = pool
        self.kind = kind
        self.layout: str = pool.layout
        self.dtype: torch.dtype = pool.dtype
        self.page_tokens: int = pool.page_size
        self.capacity_tokens: int = pool.size
        self.page_bytes: int = pool.get_size_per_token() * pool.page_size
        self.geometry: Tuple[int, ...] = ((pool.layer_num, pool.head_num, pool.head_dim) if kind == "mha"
                                          else (pool.layer_num, pool.kv_cache_dim))
        for start in {0, self.capacity_tokens - self.page_tokens}:
            self._check_page(start)

    def _check_page(self, start: int) -> None:
        runs = [(part.data_ptr(), part.numel()) for part in self.parts(start)]
        pointers, sizes = self.pool.get_page_buffer_meta(torch.arange(start, start + self.page_tokens))
        flat = self.pool.get_data_page(start, flat=True)
        if (runs != list(zip(pointers, sizes)) or sum(sizes) != self.page_bytes
                or flat.numel() * flat.element_size() != self.page_bytes):
            raise UnsupportedLayout(f"orbitkv HiCache backend: the {self.layout} pages of "
                                    f"{type(self.pool).__name__} are not the runs its get_page_buffer_meta names")

    def parts(self, start: int) -> List[torch.Tensor]:
        """The page's contiguous runs in image order, as byte views of the pool (no copy)."""
        page = self.pool.get_data_page(start, flat=False)
        pieces = page.unbind(0) if self.kind == "mha" else (page,)
        return [piece.view(-1).view(torch.uint8) for piece in pieces]

    def image(self, start: int) -> Any:
        """The page image for a publish, with no copy: the pool's own memory for a single run (MLA),
        else its runs as one :class:`~orbitkv.client.PageParts` (MHA: K, then V), which the publish
        writes into the Manager's slot one after the other."""
        parts = self.parts(start)
        if len(parts) == 1:
            return parts[0].numpy()
        return PageParts([part.numpy() for part in parts])

    def fill(self, start: int, image: memoryview) -> None:
        """Copies a page image into the page's runs."""
        offset = 0
        for part in self.parts(start):
            n = part.numel()
            with memoryview(part.numpy()) as dst, image[offset:offset + n] as src:
                dst[:] = src
            offset += n

    def page_starts(self, pages: int, host_indices: Any) -> Optional[List[int]]:
        """The first host slot of each page, or None when ``host_indices`` does not name ``pages``
        aligned pages inside the pool."""
        if (not isinstance(host_indices, torch.Tensor) or host_indices.dim() != 1
                or host_indices.numel() != pages * self.page_tokens):
            return None
        starts = host_indices[::self.page_tokens].tolist()
        for start in starts:
            if start < 0 or start % self.page_tokens or start + self.page_tokens > self.capacity_tokens:
                return None
        return starts

    def flat_bytes(self, tensor: Any) -> Optional[torch.Tensor]:
        """A byte view of a flat data page tensor (legacy interface), or None if it is not one."""
        if (not isinstance(tensor, torch.Tensor) or tensor.device.type != "cpu" or not tensor.is_contiguous()
                or tensor.numel() * tensor.element_size() != self.page_bytes):
            return None
        return tensor.view(-1).view(torch.uint8)


class _PageSizeMismatch(Exception):
    pass


def _engine_settings() -> Dict[str, Any]:
    """The running engine's model settings (path, tokenizer, revision, dtype, quantization), or {}
    outside an SGLang engine (no server arguments published in this process)."""
    try:
        from sglang.srt.runtime_context import get_server_args
        args = get_server_args()
    except Exception:  # noqa: BLE001 - not inside an engine: a test or a tool builds the backend
        return {}
    return {name: getattr(args, name, None)
            for name in ("model_path", "tokenizer_path", "revision", "dtype", "quantization", "dp_size")}


class OrbitKvHiCacheStorage(HiCacheStorage):
    """SGLang's HiCache L3 storage in an OrbitKV Manager; see the module header."""

    def __init__(self, storage_config: HiCacheStorageConfig, kwargs: Optional[dict] = None):
        refuse_unsupported_config(storage_config)
        self.storage_config = storage_config
        self.config = BackendConfig.from_extra_config(storage_config.extra_config)
        self.mem_pool_host = None
        self.identity: Optional[EngineIdentity] = None
        self._plan: Optional[HostPagePlan] = None
        self._pages: Optional[ManagerPages] = None
        self._lock = threading.Lock()
        self._counters: Dict[str, int] = dict.fromkeys(COUNTERS, 0)  # guarded by _lock
        self._metrics_enabled = bool(storage_config.enable_storage_metrics)
        self._samples: Dict[str, Deque[float]] = {  # guarded by _lock
            name: collections.deque(maxlen=METRIC_SAMPLES) for name in _METRIC_SERIES}
        self._logged: set = set()  # guarded by _lock: methods whose unexpected error was logged

    # -- registration ----------------------------------------------------------------------------

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        """Binds the host pool: checks its layout, builds the namespace, opens the store (lazily
        connected). Raises :class:`UnsupportedLayout` for a pool it cannot store whole."""
        plan = HostPagePlan(mem_pool_host, self.storage_config)
        identity = self._identity(plan)
        pages = ManagerPages(self.config.socket_path, identity.namespace(), instance_id=self.config.instance_id,
                             timeout_s=self.config.timeout_s, retry_after_s=self.config.retry_after_s)
        previous, self._pages = self._pages, pages
        super().register_mem_pool_host(mem_pool_host)
        self._plan, self.identity = plan, identity
        if previous is not None:
            previous.close()

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        """Accepts the KV pool already registered; refuses every other pool (sidecars, drafts)."""
        if host_pool_name == PoolName.KV and host_pool is self.mem_pool_host:
            return
        raise UnsupportedLayout(
            f"orbitkv HiCache backend: host pool {host_pool_name!s} ({type(host_pool).__name__}) is not "
            "supported; only the KV pool is stored, and pages whose sidecar state is not stored are never hits")

    def _identity(self, plan: HostPagePlan) -> EngineIdentity:
        sc, cfg, engine = self.storage_config, self.config, _engine_settings()
        model_path = cfg.model_path or engine.get("model_path") or (
            sc.model_name if os.path.isdir(sc.model_name) else None)
        local = model_path if model_path and os.path.isdir(model_path) else None
        tokenizer_path = engine.get("tokenizer_path") or local
        dtype = str(engine.get("dtype") or "unspecified")
        if engine.get("quantization"):
            dtype += f"+{engine['quantization']}"
        mla = plan.kind == "mla"
        return EngineIdentity(
            model_id=sc.model_name, dtype=dtype, kv_dtype=dtype_name(plan.dtype), page_tokens=plan.page_tokens,
            kv_layout=join_layout(["sglang-hicache", plan.layout, plan.kind, *plan.geometry,
                                   f"cp{sc.attn_cp_rank}/{sc.attn_cp_size}"]),
            revision=cfg.revision or engine.get("revision") or "unspecified",
            weights_digest=cfg.weights_digest or (weights_digest(local) if local else ""),
            tokenizer_digest=tokenizer_digest(tokenizer_path) if tokenizer_path and os.path.isdir(tokenizer_path) else "",
            tp_size=1 if mla else sc.tp_size, tp_rank=0 if mla else sc.tp_rank,
            pp_size=sc.pp_size, pp_rank=sc.pp_rank,
            # outside an engine the DP size is unknown: the smallest one that holds the rank
            dp_size=max(int(engine.get("dp_size") or 1), sc.dp_rank + 1), dp_rank=sc.dp_rank)

    # -- zero-copy interface ---------------------------------------------------------------------

    def batch_get_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        """Reads the longest stored prefix of ``keys`` into the host slots ``host_indices``
        (``page_tokens`` slots per key); True for each page read."""
        return self._guard("batch_get_v1", lambda: [False] * _length(keys), self._get_v1, keys, host_indices)

    def batch_set_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        """Stores the pages in host slots ``host_indices`` under ``keys``; True for each page the
        Manager now holds (stored now or already resident)."""
        return self._guard("batch_set_v1", lambda: [False] * _length(keys), self._set_v1, keys, host_indices)

    def batch_exists(self, keys: List[str], extra_info: Optional[HiCacheStorageExtraInfo] = None) -> int:
        """How many pages of ``keys``, from the first, are stored (a missing page ends the run)."""
        return self._guard("batch_exists", lambda: 0, self._exists, keys)

    # -- legacy interface ------------------------------------------------------------------------

    def get(self, key: str, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> Optional[torch.Tensor]:
        """Reads one flat data page into ``target_location`` (a fresh one if None); None on a miss."""
        return self._guard("get", lambda: None, lambda: self._get_legacy([key], [target_location])[0])

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> List[Optional[torch.Tensor]]:
        """One flat data page per key for the longest stored prefix, then None for the rest (SGLang
        uses the pages up to the first None); always a list of ``len(keys)``."""
        return self._guard("batch_get", lambda: [None] * _length(keys), self._get_legacy, keys, target_locations)

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        return self._guard("set", lambda: False, lambda: all(self._set_legacy([key], [value])))

    def batch_set(self, keys: List[str], values: Optional[Any] = None, target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        """True if the Manager now holds every page (an empty batch is trivially stored)."""
        return self._guard("batch_set", lambda: False, lambda: all(self._set_legacy(keys, values)))

    def exists(self, key: str) -> bool:
        return self._guard("exists", lambda: False, lambda: self._exists([key]) == 1)

    # -- v2 (hybrid pools): every sidecar transfer is refused ------------------------------------

    def batch_exists_v2(self, keys: List[str], pool_transfers: Optional[List[PoolTransfer]] = None,
                        extra_info: Optional[HiCacheStorageExtraInfo] = None) -> PoolTransferResult:
        """KV pages only: a query naming any sidecar pool is a miss."""
        if pool_transfers:
            self._count("refused_sidecar")
            return PoolTransferResult.empty()
        pages = self.batch_exists(keys, extra_info)
        return PoolTransferResult(pages, {PoolName.KV: pages} if pages else {})

    def batch_get_v2(self, transfers: List[PoolTransfer],
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> Dict[str, List[bool]]:
        return self._refuse_transfers(transfers)

    def batch_set_v2(self, transfers: List[PoolTransfer],
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> Dict[str, List[bool]]:
        return self._refuse_transfers(transfers)

    def _refuse_transfers(self, transfers: Sequence[PoolTransfer]) -> Dict[str, List[bool]]:
        self._count("refused_sidecar", len(transfers or ()))
        return {t.name: [False] * len(t.keys or ()) for t in transfers or ()}

    # -- housekeeping ----------------------------------------------------------------------------

    def clear(self) -> bool:
        """Refused (False): pages in the Manager are shared by every engine of the namespace and
        immutable; the Manager evicts them, no engine deletes them."""
        self._count("clear_refused")
        self._log_once("clear", logging.WARNING,
                       "orbitkv HiCache backend: clear() is not supported; the Manager's pages are shared "
                       "and evicted by the Manager")
        return False

    def get_stats(self):
        """SGLang's ``StorageMetrics`` (pages per batch and GiB/s of each prefetch and backup since
        the last call, when storage metrics are enabled) with :meth:`counters` as ``.counters``."""
        metrics = _metrics_class()()
        with self._lock:
            for name in _METRIC_SERIES:
                getattr(metrics, name).extend(self._samples[name])
                self._samples[name].clear()
        metrics.counters = self.counters()
        return metrics

    def counters(self) -> Dict[str, int]:
        """This backend's counters and its store's (``ManagerPages.snapshot``), in one dict."""
        with self._lock:
            out = dict(self._counters)
        if self._pages is not None:
            out.update(self._pages.snapshot())
        return out

    def close(self) -> None:
        pages, self._pages = self._pages, None
        if pages is not None:
            pages.close()

    # -- internals -------------------------------------------------------------------------------

    def _ready(self) -> Optional[Tuple[HostPagePlan, ManagerPages]]:
        plan, pages = self._plan, self._pages
        if plan is None or pages is None:
            self._count("not_registered")
            return None
        return plan, pages

    def _names(self, keys: Sequence[str]) -> Optional[List[bytes]]:
        if not all(isinstance(k, str) for k in keys):
            self._count("rejected_input")
            return None
        return [page_name(k) for k in keys]

    def _exists(self, keys: List[str]) -> int:
        ready, names = self._ready(), self._names(keys)
        if ready is None or names is None or not names:
            return 0
        _, pages = ready
        wait_s = self.config.timeout_s if self.config.exists_wait_s is None else self.config.exists_wait_s
        found = pages.contains(names, wait_s=wait_s)
        self._count_many(exists_calls=1, exists_pages_asked=len(names), exists_pages_found=found)
        return found

    def _v1_batch(self, keys: List[str], host_indices: torch.Tensor):
        """(plan, pages, names, slot starts) of a v1 batch, or None when it must be all misses."""
        ready, names = self._ready(), self._names(keys)
        if ready is None or names is None or not keys:
            return None
        plan, pages = ready
        starts = plan.page_starts(len(keys), host_indices)
        if starts is None:
            self._count("rejected_input")
            return None
        return plan, pages, names, starts

    def _get_v1(self, keys: List[str], host_indices: torch.Tensor) -> List[bool]:
        n, batch = len(keys), self._v1_batch(keys, host_indices)
        if batch is None:
            return [False] * n
        plan, pages, names, starts = batch
        began = time.perf_counter()
        read = self._read(pages, plan, names, lambda i, image: plan.fill(starts[i], image))
        self._count_many(get_calls=1, get_pages_asked=n, get_pages_read=read)
        self._sample("prefetch", read, plan.page_bytes, began)
        return [True] * read + [False] * (n - read)

    def _set_v1(self, keys: List[str], host_indices: torch.Tensor) -> List[bool]:
        n, batch = len(keys), self._v1_batch(keys, host_indices)
        if batch is None:
            return [False] * n
        plan, pages, names, starts = batch
        began = time.perf_counter()
        stored = pages.write([(names[i], plan.image(starts[i])) for i in range(n)])
        self._count_many(set_calls=1, set_pages_asked=n, set_pages_stored=sum(stored))
        self._sample("backup", sum(stored), plan.page_bytes, began)
        return stored

    def _get_legacy(self, keys: List[str], targets: Optional[Sequence[Any]]) -> List[Optional[torch.Tensor]]:
        n = len(keys)
        ready, names = self._ready(), self._names(keys)
        if ready is None or names is None or n == 0:
            return [None] * n
        plan, pages = ready
        targets = list(targets) if targets is not None else [None] * n
        targets = [t if t is not None else plan.pool.get_dummy_flat_data_page() for t in targets]
        views = [plan.flat_bytes(t) for t in targets]
        if len(views) != n or any(v is None for v in views):
            self._count("rejected_input")
            return [None] * n

        def fill(i: int, image: memoryview) -> None:
            with memoryview(views[i].numpy()) as dst:
                dst[:] = image

        read = self._read(pages, plan, names, fill)
        self._count_many(get_calls=1, get_pages_asked=n, get_pages_read=read)
        return [targets[i] if i < read else None for i in range(n)]

    def _set_legacy(self, keys: List[str], values: Optional[Sequence[Any]]) -> List[bool]:
        n = len(keys)
        ready, names = self._ready(), self._names(keys)
        if ready is None or names is None or n == 0:
            return [False] * n if n else []
        plan, pages = ready
        views = [plan.flat_bytes(v) for v in values] if values is not None else []
        if len(views) != n or any(v is None for v in views):
            self._count("rejected_input")
            return [False] * n
        stored = pages.write([(name, view.numpy()) for name, view in zip(names, views)])
        self._count_many(set_calls=1, set_pages_asked=n, set_pages_stored=sum(stored))
        return stored

    def _read(self, pages: ManagerPages, plan: HostPagePlan, names: List[bytes],
              fill: Callable[[int, memoryview], None]) -> int:
        """Reads the longest stored prefix of ``names`` through ``fill``; the pages filled."""
        filled = 0

        def sink(i: int, image: memoryview) -> None:
            nonlocal filled
            if len(image) != plan.page_bytes:
                raise _PageSizeMismatch(f"page {i} holds {len(image)} bytes, expected {plan.page_bytes}")
            fill(i, image)
            filled = i + 1

        try:
            return pages.read_into(names, sink)
        except _PageSizeMismatch as e:
            self._count("page_size_mismatch")
            self._log_once("page_size_mismatch", logging.ERROR, "orbitkv HiCache backend: %s", e)
            return filled

    def _guard(self, method: str, fallback: Callable[[], Any], call: Callable[..., Any], *args: Any) -> Any:
        """Runs ``call``; an unexpected exception is counted, logged once per method, and answered
        with ``fallback()`` (a miss), because nothing may raise into SGLang's storage threads."""
        try:
            return call(*args)
        except Exception:  # noqa: BLE001 - the one boundary where the unexpected becomes a miss
            self._count("internal_errors")
            self._log_once(method, logging.ERROR, "orbitkv HiCache backend: %s failed; answering a miss",
                           method, exc_info=True)
            return fallback()

    def _sample(self, kind: str, pages: int, page_bytes: int, began: float) -> None:
        if not self._metrics_enabled or pages == 0:
            return
        elapsed = max(time.perf_counter() - began, 1e-9)
        with self._lock:
            self._samples[f"{kind}_pgs"].append(pages)
            self._samples[f"{kind}_bandwidth"].append(pages * page_bytes / (1 << 30) / elapsed)

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counters[name] += n

    def _count_many(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                self._counters[name] += n

    def _log_once(self, what: str, level: int, message: str, *args: Any, exc_info: bool = False) -> None:
        with self._lock:
            if what in self._logged:
                return
            self._logged.add(what)
        log.log(level, message, *args, exc_info=exc_info)


def _length(items: Any) -> int:
    try:
        return len(items)
    except TypeError:
        return 0


_METRICS_CLASS = None


def _metrics_class():
    """SGLang's ``StorageMetrics`` with a ``counters`` dict (imported on first use: the metrics
    module costs seconds to import and SGLang asks for stats only with storage metrics on)."""
    global _METRICS_CLASS
    if _METRICS_CLASS is None:
        from sglang.srt.observability.metrics_collector import StorageMetrics

        @dataclass
        class OrbitKvStorageMetrics(StorageMetrics):
            counters: Dict[str, int] = field(default_factory=dict)

        _METRICS_CLASS = OrbitKvStorageMetrics
    return _METRICS_CLASS
