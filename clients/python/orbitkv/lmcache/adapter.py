"""OrbitKV as an LMCache L2 store: the ``native_plugin`` connector (stdlib only).

LMCache's multiprocess (MP) mode keeps KV chunks in L1 (its own host memory) and hands them to
L2 adapters. Its ``native_plugin`` adapter type imports a connector class, constructs it with
``adapter_params`` as keyword arguments, and wraps it in LMCache's own
``NativeConnectorL2Adapter`` (the wrapper its Redis and file-system connectors use). That wrapper
owns LMCache's side: task ids, the three per-operation eventfds, result bitmaps, client-side
lock counts and byte accounting. :class:`OrbitKvConnector` is the connector: it owns the Manager
side. A server or ``lmcache bench l2`` selects it with::

    {"type": "native_plugin", "module_path": "orbitkv.lmcache.adapter",
     "class_name": "OrbitKvConnector",
     "adapter_params": {"socket_path": "/run/orbitkv/manager.sock", "dtype": "bfloat16",
                        "chunk_size": 256}}

The connector surface (what the wrapper calls; LMCache 0.5.6): ``event_fd() -> int``,
``submit_batch_set(keys, views) -> int``, ``submit_batch_get(keys, views) -> int``,
``submit_batch_exists(keys) -> int``, ``drain_completions() -> [(future_id, ok, error,
per_key_bools)]``, ``close()``. Keys are the wrapper's serialisation of an ``ObjectKey``,
``<model>@<kv_rank:08x>@<group:x>@<chunk_hash hex>[@<cache_salt>]``; views are byte views of the
memory objects (the wrapper passes ``MemoryObj.byte_array``, a zero-copy overlay of L1).

Names and namespaces. A page's name is SHA-256 of a domain tag and the whole key string, so the
model, the KV rank (TP/PP slice), the object group, the chunk hash and the request's cache salt
all separate pages. The namespace is per model: :class:`EngineIdentity` with the key's model
name, the ``dtype``/``kv_dtype``/``chunk_size``/``revision``/digests from the adapter params and
the layout ``lmcache:l2-object:<kv_layout>``. An LMCache server that serves several models gets
one namespace (one Manager session) per model, at most ``max_models``; ``model`` pins the
connector to one model and refuses keys of any other (a miss / an unstored chunk, counted).

Thread model. ``submit_*`` run on LMCache's controller threads (under the wrapper's lock) and
only enqueue: a full queue or a closed connector completes the operation at once as failed
(``rejected_full``, ``rejected_closed``), so a submit never blocks. ``num_workers`` threads run
the operations against :class:`ManagerPages` (thread-safe, one connection per model) and post
completions; the wrapper's demux thread calls ``drain_completions``. Completions are signalled
by one non-blocking eventfd (``event_fd``): a worker appends, then writes the eventfd; drain reads
the eventfd, then swaps the list, so no completion is ever left unsignalled.

Invariants. Every submitted future id gets exactly one completion, within a bounded time: each
Manager wait is bounded by ``timeout_s`` (a slice of a batch needs at most two, plus one per
chunk still being staged), and after a failure the store is down for ``retry_after_s`` and answers at once.
No exception escapes into LMCache: bad input, an unknown model, a Manager that is down, slow, full
or restarting make the key a miss (get, exists) or unstored (set), counted in :meth:`snapshot`.
A load copies a page only into a buffer of exactly its length (``size_mismatch`` otherwise), so a
chunk of another shape is never a hit. The job queue (``queue_depth``), the model table
(``max_models``), the QUERYs a worker has in flight (``keys_per_round``) and the counter names are
bounded; completions are at most the operations submitted since the last drain.

Copies. A store copies each chunk once, from the L1 view straight into its granted arena slot
(``Client.publish``); a load copies once, from the leased arena page into the L1 view. Nothing
else touches the bytes.

Design notes. ``native_plugin`` rather than ``plugin`` (a full ``L2AdapterInterface`` subclass):
the wrapper is LMCache's own, shared with its RESP and native file-system connectors, so the
semantics LMCache relies on (bitmaps, eventfd routing, accounting) are upstream code, and a
bench against Redis compares the stores, not two wrappers. The cost: LMCache's "lock" is the
wrapper's client-side refcount, not a Manager lease, so a chunk found by a lookup can be evicted
before its load, which then reports a miss (LMCache treats loads as may-fail). Exists answers
each key on its own (LMCache's keys are independent chunks, and a batch has gaps):
:meth:`ManagerPages.present_each` asks with one CONTAINS frame per slice of up to
``keys_per_round`` (128) keys: one round trip whatever its hits and gaps, nothing leased or held;
a chunk on the Manager's SSD counts (the get that follows stages it), and on a Manager with peers
the keys it does not hold are asked once more with a QUERY each. Exists jobs queued right behind
the one a worker takes join it (up to ``keys_per_round`` keys in all, never past a job of
another kind), so a burst of lookups shares one CONTAINS (``exists_merged``); store jobs likewise
share one PUBLISH (``sets_merged``: one PUBLISH_RESERVE and one PUBLISH_COMMIT for the lot, each job
completed with its own keys' outcomes). Get
reads the longest present prefix first (one QUERY and one RELEASE; LMCache loads what a lookup
found, so that is mostly the whole batch) and hands the keys after the first missing one to
:meth:`ManagerPages.read_each`, one single-name QUERY per key, all written before the first answer
is read: at most two round trips per slice (RELEASEs are not waited for). Measured warm here (2
shared cores), reading 8 × 256 KiB pages took 1.1 ms through ``read_each`` against 0.35 ms
through one prefix QUERY; 80 names, half present, take 0.18 ms through one CONTAINS against
2.25 ms as one QUERY each. A chunk being staged (PENDING) counts as loaded if it settles within
``timeout_s`` (ManagerPages waits for each pending name in turn, so a slice of k such chunks waits
at most k × ``timeout_s``). The slice bounds the live operations on the store's one connection at
``num_workers`` × ``keys_per_round`` (256 by default), under the Manager's
``maxOperationsPerConnection`` (1024; past it a QUERY is BUSY: a miss, counted). Lookups were
first a prefix QUERY repeated past each missing key, then one pipelined QUERY per key; on a local
socket a frame costs about as much as a round trip, hence one frame per batch now (the runs of
each design are in docs/bench-lmcache.md).
No ``submit_batch_delete``: the Manager owns eviction (the wrapper logs that
LMCache-driven deletes are a no-op).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import logging
import os
import threading
from typing import Deque, Dict, List, Optional, Sequence, Tuple

from ..identity import EngineIdentity, join_layout
from ..pages import DEFAULT_RETRY_AFTER_S, DEFAULT_TIMEOUT_S, ManagerPages, byte_view

log = logging.getLogger("orbitkv.lmcache")

#: Domain tag hashed before the key string into a page name.
NAME_DOMAIN = b"orbitkv/lmcache-l2-key/v1\0"
#: Separator of LMCache's key serialisation (``@`` is forbidden in model names and salts).
KEY_SEPARATOR = "@"

COUNTERS = ("submitted_set", "submitted_get", "submitted_exists", "rejected_full", "rejected_closed",
            "bad_requests", "keys_stored", "keys_not_stored", "keys_found", "keys_missing", "keys_loaded",
            "keys_not_loaded", "size_mismatch", "refused_model", "refused_models_full", "bad_keys",
            "errors", "completions", "exists_merged", "sets_merged")
#: Job kinds whose queued jobs join the one a worker takes, and the counter of those that joined.
_MERGED = {"exists": "exists_merged", "set": "sets_merged"}

Completion = Tuple[int, bool, str, Optional[List[bool]]]


def page_name(key: str) -> bytes:
    """The Manager page name of one LMCache key string (32 bytes)."""
    return hashlib.sha256(NAME_DOMAIN + key.encode("utf-8")).digest()


def model_of(key: str) -> Optional[str]:
    """The model name of an LMCache key string, or None when it is not one."""
    model, sep, rest = key.partition(KEY_SEPARATOR)
    return model if sep and model and rest else None


class _Counters:
    """Fixed-name integer counters guarded by one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: Dict[str, int] = dict.fromkeys(COUNTERS, 0)

    def add(self, name: str, n: int = 1) -> None:
        if n:
            with self._lock:
                self._values[name] += n

    def snapshot(self) -> Dict[str, int]:
        with self._lock:
            return dict(self._values)


class _Job:
    """One submitted batch: ``kind`` is ``set``, ``get`` or ``exists``; ``views`` is None for exists."""
    __slots__ = ("kind", "future_id", "keys", "views")

    def __init__(self, kind: str, future_id: int, keys: List[str], views: Optional[List[memoryview]]):
        self.kind, self.future_id, self.keys, self.views = kind, future_id, keys, views


class _JobQueue:
    """A bounded FIFO of jobs; ``offer`` never blocks. Guarded by ``_cond``."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._cond = threading.Condition()
        self._jobs: Deque[_Job] = collections.deque()
        self._closed = False

    def offer(self, job: _Job) -> str:
        """``"ok"``, ``"full"`` or ``"closed"``."""
        with self._cond:
            if self._closed:
                return "closed"
            if len(self._jobs) >= self.capacity:
                return "full"
            self._jobs.append(job)
            self._cond.notify()
            return "ok"

    def take(self) -> Optional[_Job]:
        """The next job; None once closed (waits while open and empty)."""
        with self._cond:
            while not self._jobs and not self._closed:
                self._cond.wait()
            return None if self._closed else self._jobs.popleft()

    def take_following(self, kind: str, max_keys: int) -> List[_Job]:
        """The jobs of ``kind`` queued right at the front, in order, while their keys add up to at
        most ``max_keys``; never waits. A job of another kind ends the run, so no job is answered
        before one submitted ahead of it."""
        out: List[_Job] = []
        with self._cond:
            while self._jobs and self._jobs[0].kind == kind and len(self._jobs[0].keys) <= max_keys:
                job = self._jobs.popleft()
                max_keys -= len(job.keys)
                out.append(job)
        return out

    def close(self) -> List[_Job]:
        """Closes the queue, wakes every worker and returns the jobs never started."""
        with self._cond:
            self._closed = True
            left, self._jobs = list(self._jobs), collections.deque()
            self._cond.notify_all()
            return left


class _CompletionPort:
    """Completions and the eventfd that signals them. Guarded by ``_lock``; the eventfd is
    non-blocking and closed only under the lock, so a late worker never writes a reused fd."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: Optional[int] = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._fileno = self._fd
        self._done: List[Completion] = []

    @property
    def fileno(self) -> int:
        return self._fileno

    def post(self, completion: Completion) -> None:
        with self._lock:
            if self._fd is None:
                return
            self._done.append(completion)
            os.eventfd_write(self._fd, 1)

    def drain(self) -> List[Completion]:
        with self._lock:
            if self._fd is None:
                return []
            try:
                os.eventfd_read(self._fd)  # reset first: a later post signals again
            except BlockingIOError:
                pass
            done, self._done = self._done, []
            return done

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
            self._done = []
        if fd is not None:
            os.close(fd)


class _ModelStores:
    """One :class:`ManagerPages` per model name, created on first use, at most ``max_models``.
    Guarded by ``_lock``; the stores themselves are thread-safe."""

    def __init__(self, socket_path: str, identity_fields: dict, max_models: int, timeout_s: float,
                 retry_after_s: float, pinned_model: Optional[str], counters: _Counters) -> None:
        self._socket_path = socket_path
        self._identity_fields = identity_fields
        self._max_models = max_models
        self._timeout_s = timeout_s
        self._retry_after_s = retry_after_s
        self._pinned = pinned_model
        self._counters = counters
        self._lock = threading.Lock()
        self._stores: Dict[str, ManagerPages] = {}
        self._closed = False

    def identity(self, model: str) -> EngineIdentity:
        return EngineIdentity(model_id=model, **self._identity_fields)

    def store(self, model: str) -> Optional[ManagerPages]:
        """The store of ``model``, or None (counted) when it is refused."""
        if self._pinned is not None and model != self._pinned:
            return None
        with self._lock:
            found = self._stores.get(model)
            if found is not None or self._closed:
                return found
            if len(self._stores) >= self._max_models:
                self._counters.add("refused_models_full")
                return None
            try:
                namespace = self.identity(model).namespace()
            except ValueError as e:  # a model name the namespace cannot hold
                log.warning("LMCache model %r cannot name an OrbitKV namespace: %s", model, e)
                return None
            found = ManagerPages(self._socket_path, namespace, timeout_s=self._timeout_s,
                                 retry_after_s=self._retry_after_s)
            self._stores[model] = found
            return found

    def snapshot(self) -> Dict[str, Dict[str, int]]:
        with self._lock:
            stores = dict(self._stores)
        return {model: store.snapshot() for model, store in stores.items()}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            store.close()


class OrbitKvConnector:
    """LMCache ``native_plugin`` connector over a Manager; see the module header.

    Adapter params (keyword arguments): ``socket_path`` (the Manager's engine socket),
    ``dtype`` (the model dtype) and ``chunk_size`` (LMCache's chunk size in tokens) are required;
    ``kv_dtype`` (default: ``dtype``), ``kv_layout`` (LMCache's memory layout of one chunk, e.g.
    ``"KV_2LTD"``; default ``"bytes"``), ``revision``, ``weights_digest``, ``tokenizer_digest``,
    ``model`` (accept only this model), ``max_models`` (8), ``num_workers`` (2), ``queue_depth``
    (64 batches), ``keys_per_round`` (128 keys pipelined per round trip), ``timeout_s`` (2.0) and
    ``retry_after_s`` (1.0) are optional. A bad value
    raises ValueError here, so a misconfigured LMCache fails at start, never later."""

    def __init__(self, socket_path: str, dtype: str, chunk_size: int, *, kv_dtype: Optional[str] = None,
                 kv_layout: str = "bytes", revision: str = "unspecified", weights_digest: str = "",
                 tokenizer_digest: str = "", model: Optional[str] = None, max_models: int = 8,
                 num_workers: int = 2, queue_depth: int = 64, keys_per_round: int = 128,
                 timeout_s: float = DEFAULT_TIMEOUT_S, retry_after_s: float = DEFAULT_RETRY_AFTER_S) -> None:
        if not isinstance(socket_path, str) or not socket_path:
            raise ValueError("socket_path must be the Manager's socket path")
        for name, value, low in (("chunk_size", chunk_size, 1), ("max_models", max_models, 1),
                                 ("num_workers", num_workers, 1), ("queue_depth", queue_depth, 1),
                                 ("keys_per_round", keys_per_round, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}: {value!r}")
        if not timeout_s > 0 or not retry_after_s >= 0:
            raise ValueError("timeout_s must be > 0 and retry_after_s >= 0")
        if model is not None and (not isinstance(model, str) or not model or KEY_SEPARATOR in model):
            raise ValueError(f"model must be a non-empty name without {KEY_SEPARATOR!r}: {model!r}")
        identity_fields = dict(dtype=dtype, kv_dtype=kv_dtype or dtype, page_tokens=chunk_size,
                               kv_layout=join_layout(["lmcache", "l2-object", kv_layout]), revision=revision,
                               weights_digest=weights_digest, tokenizer_digest=tokenizer_digest)
        EngineIdentity(model_id=model or "probe", **identity_fields).namespace()  # raises on a bad field
        self.timeout_s = float(timeout_s)
        self.keys_per_round = keys_per_round
        self._counters = _Counters()
        self._stores = _ModelStores(socket_path, identity_fields, max_models, self.timeout_s, float(retry_after_s),
                                    model, self._counters)
        self._port = _CompletionPort()
        self._queue = _JobQueue(queue_depth)
        self._future_ids = itertools.count(1)
        self._id_lock = threading.Lock()
        self._workers = [threading.Thread(target=self._work, name=f"orbitkv-lmcache-{i}", daemon=True)
                         for i in range(num_workers)]
        for worker in self._workers:
            worker.start()

    # -- the native connector surface ------------------------------------------------------------

    def event_fd(self) -> int:
        """The eventfd made readable when completions are ready (one for every operation)."""
        return self._port.fileno

    def submit_batch_set(self, keys: Sequence[str], views: Sequence[object]) -> int:
        return self._submit("set", keys, views)

    def submit_batch_get(self, keys: Sequence[str], views: Sequence[object]) -> int:
        return self._submit("get", keys, views)

    def submit_batch_exists(self, keys: Sequence[str]) -> int:
        return self._submit("exists", keys, None)

    def drain_completions(self) -> List[Completion]:
        """Every completion posted since the last drain: ``(future_id, ok, error, per_key)``."""
        return self._port.drain()

    def close(self) -> None:
        """Stops the workers (each finishes its batch, bounded by the Manager timeouts), fails the
        batches never started, closes the Manager sessions and the eventfd. Idempotent."""
        for job in self._queue.close():
            self._complete(job, False, "connector closed", [False] * len(job.keys))
        for worker in self._workers:
            if worker is not threading.current_thread():
                worker.join(4 * self.timeout_s + 1)
        self._stores.close()
        self._port.close()

    # -- observability ---------------------------------------------------------------------------

    def snapshot(self) -> Dict[str, object]:
        """The connector's counters, plus each model store's (``stores``)."""
        out: Dict[str, object] = dict(self._counters.snapshot())
        out["stores"] = self._stores.snapshot()
        return out

    def namespace_of(self, model: str):
        """The namespace keys of ``model`` are stored in."""
        return self._stores.identity(model).namespace()

    # -- submission ------------------------------------------------------------------------------

    def _submit(self, kind: str, keys: Sequence[str], views: Optional[Sequence[object]]) -> int:
        with self._id_lock:
            future_id = next(self._future_ids)
        self._counters.add("submitted_" + kind)
        try:
            key_list = [str(k) for k in keys]
            view_list = None if views is None else [byte_view(v) for v in views]
            if view_list is not None and len(view_list) != len(key_list):
                raise ValueError(f"{len(key_list)} keys but {len(view_list)} buffers")
        except (TypeError, ValueError) as e:
            self._counters.add("bad_requests")
            n = len(keys) if hasattr(keys, "__len__") else 0
            self._port.post((future_id, False, f"bad request: {e}", [False] * n))
            return future_id
        job = _Job(kind, future_id, key_list, view_list)
        verdict = self._queue.offer(job)
        if verdict != "ok":
            self._counters.add("rejected_" + verdict)
            self._complete(job, False, f"OrbitKV connector queue {verdict}", [False] * len(key_list))
        return future_id

    def _complete(self, job: _Job, ok: bool, error: str, per_key: List[bool]) -> None:
        job.views = None  # the L1 buffers are LMCache's again once it sees the completion
        self._counters.add("completions")
        self._port.post((job.future_id, ok, error, per_key))

    # -- workers ---------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            job = self._queue.take()
            if job is None:
                return
            jobs = [job]
            if job.kind in _MERGED:  # the lookups (stores) queued behind it share its CONTAINS (PUBLISH)
                jobs += self._queue.take_following(job.kind, self.keys_per_round - len(job.keys))
                self._counters.add(_MERGED[job.kind], len(jobs) - 1)
            self._serve(jobs)

    def _serve(self, jobs: List[_Job]) -> None:
        """Runs ``jobs`` (one, or exists or set jobs that go together) as one batch and completes each."""
        first = jobs[0]
        together = first if len(jobs) == 1 else _Job(
            first.kind, 0, [k for j in jobs for k in j.keys],
            None if first.views is None else [v for j in jobs for v in j.views])
        try:
            per_key = self._run(together)
        except Exception as e:  # noqa: BLE001 - a bug must not hang LMCache: fail the batch, count it
            self._counters.add("errors")
            log.exception("OrbitKV LMCache connector: %s batch failed", first.kind)
            for job in jobs:
                self._complete(job, False, f"{type(e).__name__}: {e}", [False] * len(job.keys))
            return
        start = 0
        for job in jobs:
            mine, start = per_key[start:start + len(job.keys)], start + len(job.keys)
            ok = all(mine) if job.kind == "set" else True
            error = "" if ok else f"{mine.count(False)} of {len(mine)} chunks not stored"
            self._complete(job, ok, error, mine)

    def _run(self, job: _Job) -> List[bool]:
        per_key = [False] * len(job.keys)
        for store, indexes in self._by_store(job.keys):
            names = [page_name(job.keys[i]) for i in indexes]
            if job.kind == "set":
                done = self._store(store, names, [job.views[i] for i in indexes])
            elif job.kind == "get":
                done = self._load(store, names, [job.views[i] for i in indexes])
            else:
                done = self._present(store, names)
            for i, flag in zip(indexes, done):
                per_key[i] = flag
        hits = per_key.count(True)
        if job.kind == "set":
            self._counters.add("keys_stored", hits)
            self._counters.add("keys_not_stored", len(per_key) - hits)
        elif job.kind == "get":
            self._counters.add("keys_loaded", hits)
            self._counters.add("keys_not_loaded", len(per_key) - hits)
        else:
            self._counters.add("keys_found", hits)
            self._counters.add("keys_missing", len(per_key) - hits)
        return per_key

    def _by_store(self, keys: List[str]) -> List[Tuple[ManagerPages, List[int]]]:
        """Key indexes grouped by their model's store, in key order; refused keys are left out."""
        groups: Dict[str, List[int]] = {}
        for i, key in enumerate(keys):
            model = model_of(key)
            if model is None:
                self._counters.add("bad_keys")
                continue
            groups.setdefault(model, []).append(i)
        out = []
        for model, indexes in groups.items():
            store = self._stores.store(model)
            if store is None:
                self._counters.add("refused_model", len(indexes))
                continue
            out.append((store, indexes))
        return out

    def _store(self, store: ManagerPages, names: List[bytes], views: List[memoryview]) -> List[bool]:
        writable = [i for i, v in enumerate(views) if len(v) > 0]
        done = [False] * len(names)
        for i, ok in zip(writable, store.write([(names[i], views[i]) for i in writable])):
            done[i] = ok
        return done

    def _slices(self, n: int) -> range:
        return range(0, n, self.keys_per_round)

    def _present(self, store: ManagerPages, names: List[bytes]) -> List[bool]:
        found: List[bool] = []
        for start in self._slices(len(names)):
            found += store.present_each(names[start:start + self.keys_per_round], wait_s=self.timeout_s)
        return found

    def _load(self, store: ManagerPages, names: List[bytes], views: List[memoryview]) -> List[bool]:
        """A prefix read first (one QUERY for the slice: LMCache loads what a lookup found, so it
        is mostly all of it), then each key after the first missing one on its own."""
        copied = [False] * len(names)
        handed = [False] * len(names)

        def sink_from(base: int):
            def sink(i: int, page: memoryview) -> None:
                destination = views[base + i]
                if len(page) != len(destination):
                    self._counters.add("size_mismatch")
                    return
                destination[:] = page
                copied[base + i] = True
            return sink

        for start in self._slices(len(names)):
            end = min(start + self.keys_per_round, len(names))
            run = store.read_into(names[start:end], sink_from(start), self.timeout_s)
            handed[start:start + run] = [True] * run
            rest = start + run + 1  # names[start + run] is missing (or a failure: then the store is down)
            if rest < end:
                handed[rest:end] = store.read_each(names[rest:end], sink_from(rest), wait_s=self.timeout_s)
        return [h and c for h, c in zip(handed, copied)]
