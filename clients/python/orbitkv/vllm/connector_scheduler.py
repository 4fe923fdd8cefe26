"""The scheduler half of :class:`~orbitkv.vllm.connector.OrbitKvConnector`: which blocks of a
request the Manager can hand out, which blocks to load into which block ids, which to publish.

Owns a bounded table of the requests it tracks (:class:`_Tracked`, at most ``max_requests``) and
the Manager leases those requests hold. Per request, in the order vLLM's scheduler calls it:

0. ``on_new_request`` — when the request is added (it may then wait in vLLM's queue): one PREPARE
   (:meth:`ManagerPages.prepare`) over the names of its whole blocks from block 0, never the
   final token's block, written without waiting for the answer, so the Manager stages what is
   only on SSD or at a peer while the request queues. Which blocks vLLM will find in its own
   cache is not known yet, so the whole named prefix is prepared (pages already in the Manager's
   DRAM are only counted there). The lookup in step 1 reuses the prepare's operation id, which
   makes the Manager hand the QUERY what the prepare staged (protocol 9.4); a request that ends
   before any lookup cancels it. Off with ``prepare = False``; counted in ``prepares``.
1. ``get_num_new_matched_tokens`` — one QUERY (:meth:`ManagerPages.lookup`) over the names of the
   whole blocks beyond what is computed, at most ``(num_tokens - 1) // block_size`` of them, so
   the last prompt token is never claimed. A PENDING answer (pages being staged from SSD or a
   peer) returns ``(None, False)``: the scheduler skips the request and asks again next step;
   each later call polls once; past ``max_pending_s`` it is a miss. So one call costs at most
   one round trip (QUERY or poll), each bounded by ``timeout_s``. Asked again with the same
   computed count (vLLM could not allocate blocks yet), it answers from the lookup it holds: one
   QUERY per request admission. A hit is a whole number of blocks, loaded synchronously.
2. ``update_state_after_alloc`` — fixes the load: the request's block ids for those blocks; the
   lookup (its leases) is kept until the worker has loaded.
3. ``build_connector_meta`` — emits the loads fixed since the last step and, for every scheduled
   request, the blocks whose KV is complete after this step and not yet published (the save
   cursor), with their names and block ids.
4. ``update_connector_output`` — the worker's report (:class:`OrbitKvWorkerMeta`): loaded or
   failed loads; their leases are released. A failed load rewinds the save cursor, since vLLM
   recomputes those blocks.
5. ``request_finished`` — releases everything the request still holds; returns
   ``(False, None)``: saves are synchronous, so vLLM may free the blocks at once.

Page names are vLLM's own block hashes (``Request.block_hashes``): vLLM 0.33 folds the request's
``cache_salt`` into the first block's hash and LoRA into every block's (``generate_block_hash_
extra_keys``), and chains each hash over its parent, so a name already says "this prefix, this
salt, this adapter"; the namespace says "this model, dtype, layout" (:mod:`orbitkv.vllm.identity`).
With ``hash_block_size < block_size`` a block's name is the hash of its last hash block.

Failure policy: the Manager being down, slow, full or restarting is a miss inside
:class:`ManagerPages` (counted there); anything unexpected here is caught at the vLLM boundary,
counted in ``errors`` and answered as a miss, never raised into the scheduler. If vLLM ever
takes more external tokens than the lookup holds, the load names only the pages held and the
worker reports the other block ids invalid, so vLLM recomputes them.

Thread model: vLLM calls every method from the engine core's scheduling thread; the state has no
lock. Invariant: a lease is held only by a lookup in ``_Tracked.asked`` or ``_Tracked.loading``,
and every table entry leaves in ``request_finished`` (or is never made when the table is full).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..pages import Lookup, ManagerPages

log = logging.getLogger("orbitkv.vllm.connector")

COUNTERS = ("requests", "table_full", "not_ready", "prepares", "prepares_skipped", "prepares_taken_over",
            "prepares_cancelled", "lookups", "matched_requests", "matched_tokens",
            "pending_answers", "pending_expired", "loads_planned", "loads_done", "loads_failed",
            "save_pages_planned", "errors")


@dataclass
class LoadPlan:
    """Load ``names[i]`` into block ``block_ids[i]`` of every layer, before the step's forward."""
    req_id: str
    names: List[bytes]
    block_ids: List[int]


@dataclass
class SavePlan:
    """Publish block ``block_ids[i]`` of every layer as page ``names[i]`` after the step's forward,
    charged to tenant label ``tenant`` (the request's ``cache_salt``; None: the namespace's default)."""
    req_id: str
    names: List[bytes]
    block_ids: List[int]
    tenant: Optional[str] = None


def tenant_of(request: Any) -> Optional[str]:
    """The tenant label a request's pages are published under: its ``cache_salt`` when it is one
    (1..64 UTF-8 bytes, the protocol's bound), else None. The salt is already folded into the block
    hashes; the label only lets the Manager's operator give salts byte budgets (protocol 5.6)."""
    salt = getattr(request, "cache_salt", None)
    if isinstance(salt, str) and 1 <= len(salt.encode("utf-8")) <= 64:
        return salt
    return None


@dataclass
class _Asked:
    """A lookup made for one admission of a request: blocks from ``first_block``."""
    lookup: Lookup
    first_block: int
    asked_at: float
    was_pending: bool = False


@dataclass
class _Tracked:
    request: Any
    asked: Optional[_Asked] = None
    loading: Optional[_Asked] = None  # leases kept until the worker reports the load
    saved_blocks: int = -1            # save cursor: blocks [0, saved_blocks) need no publish
    prepared: int = 0                 # the live prepare's operation id, until a lookup takes it over


@dataclass
class SchedulerConfig:
    block_size: int
    hash_block_size: int
    max_requests: int = 4096
    max_pending_s: float = 2.0
    load: bool = True
    save: bool = True
    prepare: bool = True
    prepare_first_use_ms: int = 0     # when a request added now is expected to be looked up
    prepare_priority: int = 0


class ConnectorScheduler:
    """See the module header."""

    def __init__(self, config: SchedulerConfig, clock: Callable[[], float] = time.monotonic):
        self.config = config
        self._clock = clock
        self._store: Optional[ManagerPages] = None
        self._requests: Dict[str, _Tracked] = {}
        self._loads_to_emit: List[LoadPlan] = []
        self.stats: Dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._hash_ratio = config.block_size // config.hash_block_size

    def attach(self, store: ManagerPages) -> None:
        """The page store for this engine's namespace (known once the worker has described its
        pages); until then every request is a miss counted in ``not_ready``."""
        self._store = store

    @property
    def store(self) -> Optional[ManagerPages]:
        return self._store

    # -- vLLM scheduler hooks -------------------------------------------------------------------

    def on_new_request(self, request: Any) -> None:
        try:
            self._prepare(request)
        except Exception as e:  # noqa: BLE001 - a bug here must cost a prepare, not the engine
            self._error("on_new_request", e)

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        try:
            return self._matched(request, num_computed_tokens), False
        except Exception as e:  # noqa: BLE001 - a bug here must cost a miss, not the engine
            self._error("get_num_new_matched_tokens", e)
            self._drop_asked(self._requests.get(request.request_id))
            return 0, False

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        try:
            self._after_alloc(request, blocks, num_external_tokens)
        except Exception as e:  # noqa: BLE001
            self._error("update_state_after_alloc", e)

    def build_connector_meta(self, scheduler_output: Any,
                             kv_cache_manager: Any) -> Tuple[List[LoadPlan], List[SavePlan]]:
        loads, self._loads_to_emit = self._loads_to_emit, []
        saves: List[SavePlan] = []
        if not self.config.save:
            return loads, saves
        try:
            scheduled = scheduler_output.num_scheduled_tokens
            for new in scheduler_output.scheduled_new_reqs:
                self._plan_save(new.req_id, new.num_computed_tokens, scheduled.get(new.req_id, 0),
                                kv_cache_manager, saves)
            cached = scheduler_output.scheduled_cached_reqs
            for i, req_id in enumerate(cached.req_ids):
                self._plan_save(req_id, cached.num_computed_tokens[i], scheduled.get(req_id, 0),
                                kv_cache_manager, saves)
        except Exception as e:  # noqa: BLE001
            self._error("build_connector_meta", e)
        return loads, saves

    def on_worker_report(self, loaded: Any, failed: Any) -> None:
        for req_id in list(loaded) + list(failed):
            tracked = self._requests.get(req_id)
            if tracked is None or tracked.loading is None:
                continue
            if req_id in failed:
                self.stats["loads_failed"] += 1
                tracked.saved_blocks = min(tracked.saved_blocks, tracked.loading.first_block)
            else:
                self.stats["loads_done"] += 1
            tracked.loading.lookup.close()
            tracked.loading = None

    def request_finished(self, request: Any) -> None:
        tracked = self._requests.pop(request.request_id, None)
        if tracked is None:
            return
        self._end_prepare(tracked)
        self._drop_asked(tracked)
        if tracked.loading is not None:
            tracked.loading.lookup.close()
            tracked.loading = None
        self._loads_to_emit = [p for p in self._loads_to_emit if p.req_id != request.request_id]

    def shutdown(self) -> None:
        for tracked in list(self._requests.values()):
            self.request_finished(tracked.request)
        if self._store is not None:
            self._store.close()

    def snapshot(self) -> Dict[str, int]:
        out = dict(self.stats)
        out["tracked_requests"] = len(self._requests)
        if self._store is not None:
            out.update({f"store_{k}": v for k, v in self._store.snapshot().items()})
        return out

    # -- internals ------------------------------------------------------------------------------

    def _track(self, request: Any) -> Optional[_Tracked]:
        tracked = self._requests.get(request.request_id)
        if tracked is None:
            if len(self._requests) >= self.config.max_requests:
                self.stats["table_full"] += 1
                return None
            tracked = self._requests[request.request_id] = _Tracked(request)
            self.stats["requests"] += 1
        tracked.request = request
        return tracked

    def block_count(self, request: Any) -> int:
        """How many whole blocks of the request have a name (its hashed tokens)."""
        return len(request.block_hashes) // self._hash_ratio

    def names(self, request: Any, first: int, last: int) -> List[bytes]:
        """The page names of blocks ``[first, last)``: a block's name is the hash of its last
        hash block, which vLLM chains over every token before it."""
        hashes = request.block_hashes
        r = self._hash_ratio
        last = min(last, len(hashes) // r)
        if r == 1:
            return list(hashes[first:last])
        return [hashes[(i + 1) * r - 1] for i in range(first, last)]

    def _prepare(self, request: Any) -> None:
        if not (self.config.load and self.config.prepare) or self._store is None:
            return
        last = min(self.block_count(request), (request.num_tokens - 1) // self.config.block_size)
        tracked = self._track(request) if last > 0 else None
        if tracked is None or tracked.prepared:
            return
        tracked.prepared = self._store.prepare(self.names(request, 0, last), self.config.prepare_first_use_ms,
                                               self.config.prepare_priority)
        self.stats["prepares" if tracked.prepared else "prepares_skipped"] += 1

    def _end_prepare(self, tracked: _Tracked) -> None:
        if tracked.prepared and self._store is not None and self._store.cancel_prepare(tracked.prepared):
            self.stats["prepares_cancelled"] += 1
        tracked.prepared = 0

    def _matched(self, request: Any, num_computed_tokens: int) -> Optional[int]:
        tracked = self._track(request)
        if tracked is None or not self.config.load:
            return 0
        if self._store is None:
            self.stats["not_ready"] += 1
            return 0
        block = self.config.block_size
        first = -(-num_computed_tokens // block)
        last = min(self.block_count(request), (request.num_tokens - 1) // block)  # never claim the final token
        asked = tracked.asked
        if asked is not None and asked.first_block != first:
            self._drop_asked(tracked)
            asked = None
        if last <= first:
            self._end_prepare(tracked)
            return 0
        if asked is None:  # this call's one round trip is the QUERY (taking over the prepare, if any)
            self.stats["lookups"] += 1
            prepared, tracked.prepared = tracked.prepared, 0
            if prepared:
                self.stats["prepares_taken_over"] += 1
            asked = tracked.asked = _Asked(self._store.lookup(self.names(request, first, last), prepared),
                                           first, self._clock())
            if asked.lookup.pending:
                asked.was_pending = True
                self.stats["pending_answers"] += 1
                return None
        elif asked.lookup.pending and not asked.lookup.settled:  # this call's one round trip is the poll
            if self._clock() - asked.asked_at > self.config.max_pending_s:
                self.stats["pending_expired"] += 1
                self._drop_asked(tracked)
                return 0
            self.stats["pending_answers"] += 1
            return None
        pages = min(asked.lookup.pages, last - first)
        if pages <= 0:
            self._drop_asked(tracked)
            return 0
        return pages * block

    def _after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        tracked = self._track(request)
        if tracked is None:
            return
        asked = tracked.asked
        if num_external_tokens <= 0 or asked is None:
            self._drop_asked(tracked)
            return
        pages = -(-num_external_tokens // self.config.block_size)
        first = asked.first_block
        ids = list(blocks.get_block_ids()[0][first:first + pages])
        names = self.names(request, first, first + pages)
        usable = min(len(names), asked.lookup.pages, len(ids))
        if usable < pages:
            # vLLM took more than the lookup holds: the worker loads what it can and reports the
            # rest invalid, so vLLM recomputes it; counted, as it is a bug somewhere
            self._error("update_state_after_alloc", ValueError(
                f"request {request.request_id}: {num_external_tokens} external tokens exceed the "
                f"{asked.lookup.pages} pages looked up from block {first} ({len(ids)} block ids)"))
            names = names[:usable]
        if tracked.loading is not None:  # an earlier load not yet confirmed: keep one lease set per request
            tracked.loading.lookup.close()
        tracked.asked, tracked.loading = None, asked
        self._loads_to_emit.append(LoadPlan(request.request_id, names, ids))
        self.stats["loads_planned"] += 1
        self.stats["matched_requests"] += 1
        self.stats["matched_tokens"] += num_external_tokens

    def hit_source(self, request: Any) -> str:
        """"disk" when the request's pages were staged (PENDING first: from SSD or a peer), else "host"."""
        tracked = self._requests.get(request.request_id)
        loading = tracked.loading if tracked is not None else None
        return "disk" if loading is not None and loading.was_pending else "host"

    def _plan_save(self, req_id: str, computed: int, scheduled: int, kv_cache_manager: Any,
                   saves: List[SavePlan]) -> None:
        tracked = self._requests.get(req_id)
        if tracked is None or scheduled <= 0 or kv_cache_manager is None:
            return
        block = self.config.block_size
        if tracked.saved_blocks < 0:
            tracked.saved_blocks = computed // block  # what is computed at admission was cached already
        end = min(self.block_count(tracked.request), (computed + scheduled) // block)
        if end <= tracked.saved_blocks:
            return
        block_ids = kv_cache_manager.get_block_ids(req_id)[0]
        end = min(end, len(block_ids))
        start = tracked.saved_blocks
        if end > start:
            saves.append(SavePlan(req_id, self.names(tracked.request, start, end), list(block_ids[start:end]),
                                  tenant_of(tracked.request)))
            self.stats["save_pages_planned"] += end - start
            tracked.saved_blocks = end

    def _drop_asked(self, tracked: Optional[_Tracked]) -> None:
        if tracked is not None and tracked.asked is not None:
            tracked.asked.lookup.close()
            tracked.asked = None

    def _error(self, where: str, error: BaseException) -> None:
        self.stats["errors"] += 1
        if self.stats["errors"] == 1 or self.stats["errors"] % 1000 == 0:
            log.exception("OrbitKvConnector %s failed (%d errors so far); answering a miss", where,
                          self.stats["errors"], exc_info=error)
