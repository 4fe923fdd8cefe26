"""OrbitKV as a secondary tier of vLLM's native KV offloading (``TieringOffloadingSpec``).

Targets vLLM 0.33 (``vllm.v1.kv_offload.tiering``: ``SecondaryTierManager`` with ``lookup`` ->
MISS/HIT/RETRY, ``submit_store``/``submit_load`` of ``TransferJob``s, ``get_finished_jobs`` ->
``JobResult`` with ``successful_keys``, ``drain_jobs``, ``on_schedule_end``). Loaded without a
vLLM change through the tier factory's ``module_path``::

    kv_connector = "OffloadingConnector"
    kv_connector_extra_config = {
        "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 8 << 30,
        "secondary_tiers": [{"type": "OrbitKvTier", "module_path": "orbitkv.vllm.tier",
                             "socket_path": "/run/orbitkv/manager.sock", "timeout_s": 2.0}]}

Every other key of the tier's dict is a keyword of :class:`OrbitKvTier` (below).

What it owns: one :class:`~orbitkv.pages.ManagerPages` (one Manager connection, registered in the
namespace of :func:`~orbitkv.vllm.identity.offload_identity`), two worker threads, and the
per-request table of lookup answers and the Manager leases behind them. A page is one chunk row of
vLLM's primary host region (``primary_kv_view[c]``, ``strides[0]`` bytes, all workers' bytes of the
chunk, padding included); its name is the ``OffloadKey`` (the chained block hash plus the 4-byte
group index). vLLM's block hash already folds in the request's ``cache_salt`` (first block) and
LoRA adapter (every block) and is chained, so the key is used as it is (hashed with SHA-256 only
if longer than the Manager's 64-byte limit).

Thread model. vLLM calls every method under its tiering manager's lock (scheduler thread, or its
tier-poll thread), never concurrently; those calls do no Manager I/O and never wait, except
``drain_jobs`` and ``shutdown``, which are meant to. Manager I/O runs on two daemon threads:

- ``orbitkv-tier-lookup``: one QUERY per (request, key group) per step, batched from the keys
  vLLM looked up during the step and flushed at ``on_schedule_end``; polls PENDING queries (pages
  being staged from SSD) until they settle or ``timeout_s`` passes; releases leases.
- ``orbitkv-tier-io``: store jobs (PUBLISH of rows) and load jobs (copy leased pages into rows).

Both take work from bounded queues (``lookup_queue_depth``, ``io_queue_depth``) and hand results
back through deques the scheduler side drains without blocking.

Invariants:

- ``lookup`` never blocks and never raises: a key the worker has not answered is RETRY, a PENDING
  query is RETRY until it settles, a failure or a full queue is MISS, each counted.
- A HIT holds its Manager lease until a load job copies the page, the request finishes, or the
  lease table (``max_held_lookups`` QUERY answers) evicts the oldest answer (released, counted).
  A load whose key lost its lease reads the page again (a fresh QUERY): at worst a partial load,
  reported through ``JobResult.successful_keys``.
- A hold is released by exactly one thread: the lookup worker while no load claims it, else the
  load job that claimed it (``read_into`` releases after copying).
- A failed load marks its keys MISS for that request, so vLLM does not promote the same doomed
  page again (the failed-promotion livelock the fs tier guards against).
- Every submitted job yields exactly one ``JobResult`` (a refused one at once, as failed).

Supported: any ``OffloadingConfig`` (groups, chunk sizes, TP/PP/DP, replicated or canonical
layouts): the namespace names all of it, so only identical layouts share pages. Refused: a chunk row
larger than the Manager's largest ``dramSlotBytes`` class (``ManagerPages`` refuses it without a
round trip, counted ``manager_write_too_large``, one error line). Not returned: HIT_PENDING; vLLM
0.33's tiering manager acts on a tier's HIT and RETRY only and takes anything else as MISS.

Measured here (2 shared cores, 64 KiB rows, scheduler steps 2 ms apart): steady state, a request's
16 chunks answer RETRY for one pass, HIT (HIT_PENDING in vLLM) the next and HIT from vLLM's primary
tier one pass later, about 8 ms from the first lookup; the first request of a connection waits
about 0.5 s (connect, register, map arenas). Storing 16 rows: about 12 ms.

Size: ``OrbitKvTier`` is about 520 lines because vLLM's tier interface is 15 methods and the
scheduler-side tables share their hand-off deques with the two worker loops; the loops
(``_lookup_loop``, ``_io_loop`` and what they call) are the part to move into a class of their own
when the tier grows.

Design note: answers are batched per request because vLLM asks one key at a time but scans a
request's whole prefix in one pass (it keeps scanning past RETRY), so one QUERY per request and
group per step answers all of them; chained keys make the Manager's "longest present prefix" the
same answer vLLM's scan wants. QUERY naming does not depend on the position of a name in the list
(the Manager's key is SHA-256(namespace, group, name)), so a load may re-query any subset.
"""

from __future__ import annotations

import collections
import gc
import hashlib
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Deque, Dict, Iterable, List, Optional, Tuple

from typing_extensions import override

from vllm.v1.kv_offload.base import (
    ConfigInfoMapping,
    Locality,
    LookupResult,
    Medium,
    OffloadingCounterMetadata,
    OffloadingMetricMetadata,
    OffloadKey,
    ReqContext,
    RequestOffloadingContext,
    ScheduleEndContext,
)
from vllm.v1.kv_offload.tiering.base import JobResult, SecondaryTierManager, TransferJob
from vllm.v1.metrics.cache_hit_source import CacheHitSource

from ..pages import DEFAULT_RETRY_AFTER_S, DEFAULT_TIMEOUT_S, Lookup, ManagerPages
from .identity import offload_identity

log = logging.getLogger("orbitkv.vllm.tier")

#: Metric this tier reports through ``get_stats`` (a counter per ``event``).
EVENTS_METRIC = "vllm:kv_offload_orbitkv_events"

#: Tier counters (fixed names, so the table is bounded); ``counters()`` adds the ``manager_*``
#: counters of :class:`~orbitkv.pages.ManagerPages`.
COUNTERS = (
    "lookups", "lookup_hits", "lookup_misses", "lookup_retries", "bad_keys", "queries",
    "queries_answered", "queries_pending", "queries_pending_timeout", "queries_refused", "answers_stale",
    "leases_evicted", "requests_evicted", "store_jobs", "store_jobs_failed", "store_pages",
    "load_jobs", "load_jobs_failed", "load_pages", "load_pages_failed", "load_requeried_pages",
    "jobs_refused", "errors")

_MAX_NAME = 64
_STOP = object()


def page_name(key: bytes) -> bytes:
    """The Manager page name of an ``OffloadKey``: the key itself, or its SHA-256 if longer than
    the Manager's 64-byte name limit (raises ValueError for an empty key)."""
    key = bytes(key)
    if not key:
        raise ValueError("empty OffloadKey")
    return key if len(key) <= _MAX_NAME else hashlib.sha256(key).digest()


class _Counters:
    """Thread-safe fixed-name counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(COUNTERS, 0)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._values[name] += n

    def snapshot(self) -> Dict[str, int]:
        with self._lock:
            return dict(self._values)


@dataclass(eq=False)
class _Hold:
    """One QUERY answer holding leases: ``keys[i]`` is page ``i`` of ``lookup``."""
    req_id: str
    keys: List[bytes]
    lookup: Lookup
    claimed: bool = False  # a load job owns it (and releases it); scheduler-owned flag


@dataclass
class _Answer:
    hit: bool
    hold: Optional[_Hold] = None
    index: int = 0
    expires: float = float("inf")


@dataclass
class _Request:
    answers: Dict[bytes, _Answer] = field(default_factory=dict)
    unsent: Dict[int, List[bytes]] = field(default_factory=dict)  # group index -> keys, lookup order
    asked: set = field(default_factory=set)  # keys unsent or in flight
    generation: int = 0


@dataclass
class _Query:
    req_id: str
    generation: int
    keys: List[bytes]


@dataclass
class _Job:
    job_id: int
    store: bool
    rows: List[Tuple[bytes, int]]  # (key, primary chunk id)
    holds: List[Tuple[_Hold, Dict[int, Tuple[bytes, int]]]] = field(default_factory=list)


class OrbitKvTier(SecondaryTierManager):
    """A secondary tier backed by the OrbitKV Manager on this host; see the module header.

    Keywords (from the tier's dict in ``secondary_tiers``): ``socket_path`` (required),
    ``timeout_s`` (bound on one Manager answer and on a PENDING query), ``retry_after_s`` (how long
    the Manager counts as down after a failure), ``lookup_queue_depth``, ``io_queue_depth``,
    ``max_held_lookups``, ``miss_ttl_s`` (how long a MISS answer is reused for a request),
    ``poll_interval_s`` (PENDING poll cadence), and the identity fields an
    ``OffloadingConfig`` lacks: ``model_dtype``, ``revision``, ``weights_digest``, ``tokenizer``."""

    medium: ClassVar[Medium] = Medium.CPU
    cache_hit_source: ClassVar[CacheHitSource] = CacheHitSource.HOST

    def __init__(self, offloading_spec: Any, primary_kv_view: memoryview, tier_type: str, *,
                 socket_path: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 retry_after_s: float = DEFAULT_RETRY_AFTER_S, lookup_queue_depth: int = 256,
                 io_queue_depth: int = 64, max_held_lookups: int = 1024, miss_ttl_s: float = 1.0,
                 poll_interval_s: float = 0.002,
                 model_dtype: Optional[str] = None,
                 revision: Optional[str] = None, weights_digest: Optional[str] = None,
                 tokenizer: Optional[str] = None, instance_id: Optional[str] = None,
                 locality: Optional[str] = None, backpressure_detector: Any = None) -> None:
        super().__init__(offloading_spec, primary_kv_view, tier_type, backpressure_detector)
        if min(lookup_queue_depth, io_queue_depth, max_held_lookups) < 1 or timeout_s <= 0:
            raise ValueError("queue depths and max_held_lookups must be >= 1, timeout_s > 0")
        self.locality = Locality(locality) if locality is not None else Locality.LOCAL
        self._row_bytes = int(primary_kv_view.strides[0])
        self._num_rows = int(primary_kv_view.shape[0])
        self._flat = primary_kv_view.cast("B")  # a 2-D view has no row sub-views; slice a flat one
        self.identity = offload_identity(offloading_spec.config, row_bytes=self._row_bytes,
                                         model_dtype=model_dtype, revision=revision,
                                         weights=weights_digest, tokenizer=tokenizer)
        self.namespace = self.identity.namespace()
        self.pages = ManagerPages(socket_path, self.namespace, instance_id=instance_id, timeout_s=timeout_s,
                                  retry_after_s=retry_after_s)
        self._timeout_s = float(timeout_s)
        self._miss_ttl_s = float(miss_ttl_s)
        self._poll_interval_s = float(poll_interval_s)
        self._max_held = int(max_held_lookups)
        self._counters = _Counters()
        self._reported: Dict[str, int] = {}
        # scheduler-owned state (under vLLM's manager lock)
        self._requests: "collections.OrderedDict[str, _Request]" = collections.OrderedDict()
        self._max_requests = 4 * self._max_held
        self._holds: "collections.OrderedDict[int, _Hold]" = collections.OrderedDict()
        self._unsent: Dict[str, None] = {}  # requests with keys to query at the step's end, in order
        self._queries_in_flight = 0
        self._load_keys: Dict[int, Tuple[str, List[bytes]]] = {}  # load job id -> (request, keys)
        self._closed = False
        # worker hand-offs
        self._lookup_q: "queue.Queue[object]" = queue.Queue(maxsize=lookup_queue_depth)
        self._io_q: "queue.Queue[object]" = queue.Queue(maxsize=io_queue_depth)
        self._answers: Deque[Tuple[_Query, Optional[Lookup], int]] = collections.deque()
        self._releases: Deque[Lookup] = collections.deque()
        self._finished: Deque[JobResult] = collections.deque()
        self._jobs_cv = threading.Condition()
        self._jobs_in_flight = 0
        self._lookup_thread = threading.Thread(target=self._lookup_loop, name="orbitkv-tier-lookup", daemon=True)
        self._io_thread = threading.Thread(target=self._io_loop, name="orbitkv-tier-io", daemon=True)
        self._lookup_thread.start()
        self._io_thread.start()
        log.info("OrbitKV tier %s: Manager %s, namespace %s, page %d bytes (%d tokens)", tier_type, socket_path,
                 self.namespace.digest_hex()[:16], self._row_bytes, self.identity.page_tokens)

    # -- counters and metrics ------------------------------------------------------------------------

    def counters(self) -> Dict[str, int]:
        """Cumulative tier counters plus the Manager connection's (``manager_*``)."""
        values = self._counters.snapshot()
        values.update({f"manager_{k}": v for k, v in self.pages.snapshot().items()})
        return values

    @classmethod
    @override
    def build_metric_definitions(cls, extra_config: Dict[str, Any]) -> Dict[str, OffloadingMetricMetadata]:
        return {EVENTS_METRIC: OffloadingCounterMetadata(
            documentation="OrbitKV tier events (lookups, answers, jobs, Manager failures), by event.",
            labelnames=("event",))}

    @override
    def get_stats(self) -> Any:
        """The counter increments since the last call, as vLLM offloading stats (None if none)."""
        from vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics import OffloadingConnectorStats
        values = self.counters()
        stats = OffloadingConnectorStats()
        for name, value in values.items():
            delta = value - self._reported.get(name, 0)
            if delta:
                stats.increase_counter(EVENTS_METRIC, delta, (name,))
        self._reported = values
        return None if stats.is_empty() else stats

    @classmethod
    @override
    def config_info_keys(cls, tier_config: Dict[str, Any]) -> Tuple[str, ...]:
        return ("orbitkv_namespace", "orbitkv_page_bytes")

    @override
    def config_info(self) -> ConfigInfoMapping:
        return {"orbitkv_namespace": self.namespace.digest_hex()[:16], "orbitkv_page_bytes": self._row_bytes}

    # -- requests and lookups (scheduler side) ------------------------------------------------------

    @override
    def on_new_request(self, req_context: ReqContext) -> RequestOffloadingContext:
        self._request(req_context.req_id)
        return RequestOffloadingContext()

    @override
    def on_request_finished(self, req_context: ReqContext) -> None:
        request = self._requests.pop(req_context.req_id, None)
        if request is not None:
            self._drop_request(req_context.req_id, request)

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        self._counters.add("lookups")
        try:
            return self._lookup(bytes(key), req_context.req_id)
        except Exception:  # noqa: BLE001 - never an exception into the scheduler
            self._counters.add("errors")
            log.exception("OrbitKV tier lookup failed; answering MISS")
            return self._miss()

    def _lookup(self, key: bytes, req_id: str) -> LookupResult:
        self._apply_answers()
        if self._closed:
            return self._miss()
        if not key or len(key) < 5:
            self._counters.add("bad_keys")
            return self._miss()
        request = self._request(req_id)
        answer = request.answers.get(key)
        if answer is not None:
            if answer.hit:
                self._counters.add("lookup_hits")
                return LookupResult.HIT
            if time.monotonic() < answer.expires:
                return self._miss()
            del request.answers[key]
        if key not in request.asked:
            request.asked.add(key)
            request.unsent.setdefault(int.from_bytes(key[-4:], "big"), []).append(key)
            self._unsent[req_id] = None
        self._counters.add("lookup_retries")
        return LookupResult.RETRY

    def _miss(self) -> LookupResult:
        self._counters.add("lookup_misses")
        return LookupResult.MISS

    def _request(self, req_id: str) -> _Request:
        request = self._requests.get(req_id)
        if request is None:
            request = self._requests[req_id] = _Request()
            while len(self._requests) > self._max_requests:  # requests vLLM never finished
                old_id, old = self._requests.popitem(last=False)
                self._counters.add("requests_evicted")
                self._drop_request(old_id, old)
        return request

    def _drop_request(self, req_id: str, request: _Request) -> None:
        """Releases the holds of a request that is gone (their answers go with it)."""
        for hold in {a.hold for a in request.answers.values() if a.hold is not None}:
            self._release_hold(hold)
        request.answers.clear()
        request.generation += 1  # answers still in flight are stale

    @override
    def on_schedule_end(self, context: ScheduleEndContext) -> None:
        try:
            self._apply_answers()
            self._flush_queries()
        except Exception:  # noqa: BLE001
            self._counters.add("errors")
            log.exception("OrbitKV tier on_schedule_end failed")

    def _flush_queries(self) -> None:
        """One QUERY per (request, key group) for the keys asked this step; a full queue answers
        them MISS at once (for ``miss_ttl_s``)."""
        dirty, self._unsent = self._unsent, {}
        for req_id in dirty:
            request = self._requests.get(req_id)
            if request is None or not request.unsent:
                continue
            batches, request.unsent = request.unsent, {}
            for keys in batches.values():
                query = _Query(req_id, request.generation, keys)
                try:
                    self._lookup_q.put_nowait(query)
                    self._queries_in_flight += 1
                except queue.Full:
                    self._counters.add("queries_refused")
                    self._apply(query, None, 0)

    def _apply_answers(self) -> None:
        while self._answers:
            query, lookup, pages = self._answers.popleft()
            self._queries_in_flight -= 1
            self._apply(query, lookup, pages)

    def _apply(self, query: _Query, lookup: Optional[Lookup], pages: int) -> None:
        request = self._requests.get(query.req_id)
        if request is None or request.generation != query.generation:
            self._counters.add("answers_stale")
            if lookup is not None:
                self._releases.append(lookup)
                self._wake_lookup()
            return
        hold = None
        if lookup is not None and pages > 0:
            hold = _Hold(query.req_id, query.keys[:pages], lookup)
            self._holds[id(hold)] = hold
            self._evict_holds()
        expires = time.monotonic() + self._miss_ttl_s
        for i, key in enumerate(query.keys):
            request.asked.discard(key)
            request.answers[key] = _Answer(True, hold, i) if i < pages and hold is not None \
                else _Answer(False, expires=expires)

    def _evict_holds(self) -> None:
        while len(self._holds) > self._max_held:
            _, hold = self._holds.popitem(last=False)
            self._counters.add("leases_evicted")
            self._forget_hold(hold)
            self._release_hold(hold)

    def _forget_hold(self, hold: _Hold) -> None:
        """Drops the answers that point at ``hold``: their next lookup queries again."""
        request = self._requests.get(hold.req_id)
        if request is None:
            return
        for key in hold.keys:
            answer = request.answers.get(key)
            if answer is not None and answer.hold is hold:
                del request.answers[key]

    def _release_hold(self, hold: _Hold) -> None:
        self._holds.pop(id(hold), None)
        if not hold.claimed:
            hold.claimed = True
            self._releases.append(hold.lookup)
            self._wake_lookup()

    def _wake_lookup(self) -> None:
        try:
            self._lookup_q.put_nowait(None)
        except queue.Full:
            pass  # the worker is busy and drains releases before its next query

    # -- jobs (scheduler side) ------------------------------------------------------------------------

    @override
    def submit_store(self, job_metadata: TransferJob) -> None:
        self._counters.add("store_jobs")
        try:
            rows = [(bytes(k), int(c)) for k, c in zip(job_metadata.keys, job_metadata.chunk_ids)]
            self._submit(_Job(job_metadata.job_id, True, rows))
        except Exception:  # noqa: BLE001
            self._counters.add("errors")
            log.exception("OrbitKV tier submit_store failed")
            self._refuse(job_metadata.job_id)

    @override
    def submit_load(self, job_metadata: TransferJob) -> None:
        self._counters.add("load_jobs")
        try:
            self._apply_answers()
            rows = [(bytes(k), int(c)) for k, c in zip(job_metadata.keys, job_metadata.chunk_ids)]
            job = _Job(job_metadata.job_id, False, [])
            req_id = job_metadata.req_context.req_id
            self._load_keys[job.job_id] = (req_id, [key for key, _ in rows])
            request = self._requests.get(req_id)
            by_hold: Dict[int, Tuple[_Hold, Dict[int, Tuple[bytes, int]]]] = {}
            for key, chunk in rows:
                answer = request.answers.get(key) if request is not None else None
                hold = answer.hold if answer is not None and answer.hit else None
                if hold is not None and not hold.claimed:
                    by_hold.setdefault(id(hold), (hold, {}))[1][answer.index] = (key, chunk)
                else:
                    job.rows.append((key, chunk))  # no lease of ours: the job queries it again
            for hold, wanted in by_hold.values():
                hold.claimed = True
                self._holds.pop(id(hold), None)
                self._forget_hold(hold)  # the read releases every lease of the hold
                job.holds.append((hold, wanted))
            self._submit(job)
        except Exception:  # noqa: BLE001
            self._counters.add("errors")
            log.exception("OrbitKV tier submit_load failed")
            self._refuse(job_metadata.job_id)

    def _submit(self, job: _Job) -> None:
        if self._closed:
            self._refuse(job.job_id, job)
            return
        with self._jobs_cv:
            self._jobs_in_flight += 1
        try:
            self._io_q.put_nowait(job)
        except queue.Full:
            with self._jobs_cv:
                self._jobs_in_flight -= 1
            self._refuse(job.job_id, job)

    def _refuse(self, job_id: int, job: Optional[_Job] = None) -> None:
        self._counters.add("jobs_refused")
        if job is not None:
            for hold, _ in job.holds:
                self._releases.append(hold.lookup)
            self._wake_lookup()
        self._finished.append(JobResult(job_id=job_id, success=False))

    @override
    def get_finished_jobs(self) -> Iterable[JobResult]:
        self._apply_answers()
        results = []
        while self._finished:
            result = self._finished.popleft()
            loaded = self._load_keys.pop(result.job_id, None)
            if loaded is not None and not result.success:
                self._mark_failed(*loaded, result.successful_keys or ())
            results.append(result)
        return results

    def _mark_failed(self, req_id: str, keys: List[bytes], successful: Iterable[bytes]) -> None:
        """A failed load's keys answer MISS for the rest of the request, so vLLM does not promote
        the same unreadable page again and again."""
        request = self._requests.get(req_id)
        if request is None:
            return
        done = set(successful)
        for key in keys:
            if key not in done:
                request.asked.discard(key)
                request.answers[key] = _Answer(False)

    @override
    def has_pending_work(self) -> bool:
        with self._jobs_cv:
            jobs = self._jobs_in_flight
        return bool(jobs or self._queries_in_flight or self._answers or self._finished or self._unsent)

    @override
    def drain_jobs(self) -> None:
        with self._jobs_cv:
            while self._jobs_in_flight:
                self._jobs_cv.wait()

    @override
    def shutdown(self) -> None:
        """Runs the queued jobs to their end (each bounded by ``timeout_s``), refuses new ones,
        releases every lease and closes the connection."""
        if self._closed:
            return
        self._closed = True
        self._io_q.put(_STOP)
        self._io_thread.join()
        for request in self._requests.values():
            for hold in {a.hold for a in request.answers.values() if a.hold is not None}:
                if not hold.claimed:
                    hold.claimed = True
                    self._releases.append(hold.lookup)
        self._requests.clear()
        self._holds.clear()
        self._lookup_q.put(_STOP)
        self._lookup_thread.join()
        while self._answers:
            _, lookup, _ = self._answers.popleft()
            if lookup is not None:
                lookup.close()
        self.pages.close()
        # A failed Manager call leaves an exception cycle holding row views of the primary region;
        # collect it now, or vLLM's unmap of the region right after this finds it still exported.
        gc.collect()
        self._flat.release()

    # -- lookup worker ---------------------------------------------------------------------------------

    def _lookup_loop(self) -> None:
        pending: List[Tuple[_Query, Lookup, float]] = []
        while True:
            self._do_releases()
            try:
                item = self._lookup_q.get(timeout=self._poll_interval_s if pending else 0.1)
            except queue.Empty:
                item = None
            if item is _STOP:
                break
            try:
                if isinstance(item, _Query):
                    self._run_query(item, pending)
                if pending:
                    pending[:] = [p for p in pending if not self._settle(*p)]
            except Exception:  # noqa: BLE001 - the worker must survive anything
                self._counters.add("errors")
                log.exception("OrbitKV tier lookup worker")
        for query, lookup, _ in pending:
            lookup.close()
            self._answers.append((query, None, 0))
        self._do_releases()

    def _do_releases(self) -> None:
        while self._releases:
            self._releases.popleft().close()

    def _run_query(self, query: _Query, pending: List[Tuple[_Query, Lookup, float]]) -> None:
        self._counters.add("queries")
        lookup = self.pages.lookup([page_name(k) for k in query.keys])
        if lookup.pending:
            self._counters.add("queries_pending")
            pending.append((query, lookup, time.monotonic() + self._timeout_s))
        else:
            self._post(query, lookup)

    def _settle(self, query: _Query, lookup: Lookup, deadline: float) -> bool:
        if lookup.settled:
            self._post(query, lookup)
            return True
        if time.monotonic() >= deadline:
            self._counters.add("queries_pending_timeout")
            lookup.close()
            self._post(query, None)
            return True
        return False

    def _post(self, query: _Query, lookup: Optional[Lookup]) -> None:
        if lookup is None or lookup.pages == 0:
            if lookup is not None:
                lookup.close()
            self._answers.append((query, None, 0))
        else:
            self._answers.append((query, lookup, lookup.pages))
        self._counters.add("queries_answered")

    # -- I/O worker ------------------------------------------------------------------------------------

    def _io_loop(self) -> None:
        while True:
            job = self._io_q.get()
            if job is _STOP:
                break
            try:
                result = self._run_store(job) if job.store else self._run_load(job)
            except Exception:  # noqa: BLE001
                self._counters.add("errors")
                log.exception("OrbitKV tier job %s", job.job_id)
                for hold, _ in job.holds:
                    hold.lookup.close()
                result = JobResult(job_id=job.job_id, success=False)
            self._finish(result)
        while True:  # jobs queued behind the stop: failed, their leases released
            try:
                job = self._io_q.get_nowait()
            except queue.Empty:
                break
            if isinstance(job, _Job):
                for hold, _ in job.holds:
                    hold.lookup.close()
                self._counters.add("jobs_refused")
                self._finish(JobResult(job_id=job.job_id, success=False))

    def _finish(self, result: JobResult) -> None:
        self._finished.append(result)
        with self._jobs_cv:
            self._jobs_in_flight -= 1
            self._jobs_cv.notify_all()

    def _row(self, chunk: int) -> memoryview:
        if not 0 <= chunk < self._num_rows:
            raise IndexError(f"primary chunk {chunk} outside 0..{self._num_rows - 1}")
        return self._flat[chunk * self._row_bytes:(chunk + 1) * self._row_bytes]

    def _run_store(self, job: _Job) -> JobResult:
        start = time.monotonic()
        stored = self.pages.write([(page_name(key), self._row(chunk)) for key, chunk in job.rows])
        done = sum(stored)
        self._counters.add("store_pages", done)
        ok = done == len(job.rows)
        if not ok:
            self._counters.add("store_jobs_failed")
        return JobResult(job_id=job.job_id, success=ok, transfer_time=time.monotonic() - start,
                         transfer_bytes=done * self._row_bytes)

    def _run_load(self, job: _Job) -> JobResult:
        start = time.monotonic()
        copied: List[bytes] = []
        wanted_total = len(job.rows) + sum(len(w) for _, w in job.holds)
        for hold, wanted in job.holds:
            hold.lookup.read_into(self._sink(wanted, copied), self._timeout_s)
        if job.rows:
            self._counters.add("load_requeried_pages", len(job.rows))
            wanted = {i: row for i, row in enumerate(job.rows)}
            self.pages.read_into([page_name(key) for key, _ in job.rows], self._sink(wanted, copied),
                                 self._timeout_s)
        self._counters.add("load_pages", len(copied))
        ok = len(copied) == wanted_total
        if not ok:
            self._counters.add("load_jobs_failed")
            self._counters.add("load_pages_failed", wanted_total - len(copied))
        return JobResult(job_id=job.job_id, success=ok, successful_keys=None if ok else tuple(copied),
                         transfer_time=time.monotonic() - start, transfer_bytes=len(copied) * self._row_bytes)

    def _sink(self, wanted: Dict[int, Tuple[bytes, int]], copied: List[bytes]):
        row_bytes = self._row_bytes

        def sink(index: int, page: memoryview) -> None:
            entry = wanted.get(index)
            if entry is None:
                return
            if page.nbytes != row_bytes:  # another layout under the same name: never a wrong hit
                self._counters.add("errors")
                return
            self._row(entry[1])[:] = page.cast("B") if page.format != "B" else page
            copied.append(entry[0])
        return sink
