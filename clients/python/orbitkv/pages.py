"""The Manager as a page store for engine adapters: every failure is a miss (stdlib only).

:class:`ManagerPages` is what the vLLM, SGLang and LMCache adapters talk to. It owns one
:class:`~orbitkv.client.Client` (connected and registered lazily), names pages in one state group
of one namespace, and turns everything that can go wrong with a Manager (not running, restarting,
slow, full, refusing) into an answer the engine can act on: a miss, a page left unstored, or a
lookup still pending. It never raises for a Manager failure and never waits longer than
``timeout_s`` for one answer.

Operations (all thread-safe):

- :meth:`lookup` — QUERY (HOST_READY) for a run of page names: a :class:`Lookup` with the length
  of the longest consecutive prefix the Manager can hand out, whether it is still being staged
  (PENDING: from SSD, or from a peer within ``peer_wait_ms`` on a clustered Manager), and the
  leases it holds. Non-blocking beyond one round trip.
  The caller reads (:meth:`Lookup.read_into`) or drops (:meth:`Lookup.close`) it.
- :meth:`read_into` — lookup, wait (bounded) for staging, copy each page into the caller's
  buffer, release.
- :meth:`prepare` — PREPARE (protocol 5.11) for a run of page names a request will ask for soon,
  written without waiting for the answer: the Manager stages the pages that are only on SSD or
  at a peer into DRAM meanwhile. Returns the operation id; pass it to :meth:`lookup` as
  ``prepared`` and the QUERY takes the prepare over (protocol 9.4), or end it with
  :meth:`cancel_prepare` when the request goes away. At most ``max_prepares`` are live; past
  that, or while the Manager is down, a prepare is a counted no-op (``prepare_skipped``).
- :meth:`contains` — the length of the consecutive prefix present, holding nothing afterwards.
- :meth:`present_each` — whether each of independent page names is held (CONTAINS: one frame
  for the batch, nothing held); :meth:`read_each` — each present one handed over on its own.
- :meth:`write` — PUBLISH_RESERVE, copy each page into its granted arena slot, PUBLISH_COMMIT.

Failure policy. A connection error, a timeout or an unexpected ERROR counts in :attr:`stats`
(``failures_*``), closes the connection (the Manager then releases all it held for it, protocol
9.6) and makes the store *down* for ``retry_after_s``: calls in that window return misses at once
(``skipped_down``) instead of paying a timeout each; the next call after it reconnects and
registers with a higher epoch. Each failure in a row doubles the window, up to
``MAX_RETRY_AFTER_S`` (a registration resets it): a Manager that stays frozen would otherwise cost
the engine one ``timeout_s`` stall every ``timeout_s + retry_after_s``. BUSY and NO_SPACE refusals
are load, not failures: the answer is a miss or an unstored page, counted (``refused_busy``,
``write_refused``), and the connection stays; so is TOO_LARGE (a page above the Manager's largest
slot, or a QUERY above its page limit), which also counts ``write_too_large`` and logs once: it is a
configuration mismatch (the Manager's ``dramSlotBytes``), not load. Pages above the largest slot
class the Manager announced at registration are refused that way without a round trip.

Counters are plain integers in a dict guarded by ``_lock``; their names are fixed (``COUNTERS``),
so the table is bounded.

Missed lookups park their operation. A FINAL miss holds nothing at the Manager, but its operation
lives until RELEASE; instead of a RELEASE per miss (a write here, a frame to decode and answer
there), the store keeps up to ``MAX_PARKED_OPERATIONS`` such operations per connection and the
next lookup asks with one of them at the next revision, which replaces the miss (protocol 9.4).
A hit or a PENDING answer is never parked: its leases go back with RELEASE as before.

Design note: one connection per store, not a pool. The client pipelines requests on one socket and
a Manager answers a 22-page QUERY in 0.1–0.5 ms here (docs/performance.md), well below anything an
engine step waits for; a second socket would add a second registration and session for no gain.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import protocol as p
from .client import PEER_WAIT_MAX_MILLIS, Client, OrbitKvError, PageParts, PageToPublish, PublishOutcome, byte_view
from .state import FullGroup, Namespace, RecoveryContract

log = logging.getLogger("orbitkv.pages")

#: Default bound on one answer from the Manager (seconds); adapters expose it as ``timeout_s``.
DEFAULT_TIMEOUT_S = 2.0
#: Default time a store stays down after a failure before it reconnects (seconds).
DEFAULT_RETRY_AFTER_S = 1.0
#: Default peer wait of a QUERY (milliseconds): how long a clustered Manager may keep a lookup
#: PENDING while it finds and fetches pages only peers hold (protocol 5.3); a single-node Manager
#: ignores it. An engine that knows its prefill rate sizes it with ``client.peer_wait_for``.
DEFAULT_PEER_WAIT_MS = 1000
#: Longest down window after failures in a row (seconds), unless ``retry_after_s`` is longer.
MAX_RETRY_AFTER_S = 30.0
#: Default bound on live prepares per store: they count against the Manager's
#: ``maxOperationsPerConnection`` (1,024) together with lookups, so they may take at most a quarter.
DEFAULT_MAX_PREPARES = 256
#: How long past its first use a prepare is taken to have ended at the Manager (seconds): its
#: ``prepareGraceMillis`` default. Only bounds this store's table; the Manager decides.
PREPARE_GRACE_S = 2.0
#: Operations of missed lookups a store keeps for its next lookups (see the module header); they
#: count against ``maxOperationsPerConnection`` with the prepares and live lookups.
MAX_PARKED_OPERATIONS = 64

COUNTERS = ("lookups", "lookup_pages", "hit_pages", "pending", "reads", "pages_read", "writes", "pages_written",
            "write_refused", "write_too_large", "write_already_resident", "refused_busy", "connects", "failures_connect",
            "failures_timeout", "failures_error", "skipped_down", "prepares", "prepare_pages", "prepare_skipped",
            "prepare_refused", "prepare_trimmed", "prepare_taken_over", "prepare_cancelled")

# Refusals that leave the connection as it is: load (BUSY, NO_SPACE) and a request the Manager's
# limits do not admit (TOO_LARGE: a page above the largest DRAM slot, too many pages in one QUERY).
_LOAD_REFUSALS = (p.ErrorCode.BUSY, p.ErrorCode.NO_SPACE, p.ErrorCode.TOO_LARGE)


class _Down(Exception):
    """The store is down (a recent failure) or could not connect: answer a miss."""


@dataclass
class Lookup:
    """A QUERY's answer for a run of page names: ``pages`` consecutive pages from the first are
    present (leased, or being staged while ``pending``). Holds the Manager's leases until
    :meth:`close` (or a completed :meth:`read_into`); a miss holds nothing."""
    store: "ManagerPages"
    pages: int
    pending: bool
    _client: Optional[Client] = None
    _operation_id: int = 0
    _result: Optional[p.QueryResult] = None
    _closed: bool = field(default=False)
    #: how many names the QUERY asked for (the most ``pages`` can become when it settles)
    named: int = 0

    @property
    def settled(self) -> bool:
        """False while the Manager is still staging; polls without blocking."""
        if not self.pending:
            return True
        return self.store._poll(self)

    def read_into(self, sink: Callable[[int, memoryview], None], wait_s: Optional[float] = None) -> int:
        """Waits (at most ``wait_s``, default the store's timeout) until settled, calls
        ``sink(i, page_bytes)`` for each present page ``i`` in order, then releases. Returns how
        many pages were handed to ``sink`` (0 on any failure: read none of them)."""
        try:
            return self.store._read(self, sink, wait_s)
        finally:
            self.close()

    def close(self) -> None:
        """Releases whatever this lookup holds (idempotent; never raises)."""
        if not self._closed:
            self._closed = True
            self.store._release(self)


@dataclass
class _Prepare:
    """A PREPARE this store sent and no QUERY or CANCEL has ended yet; ``reply`` is its answer's
    waiter (checked without blocking)."""
    client: Client
    ends_at: float
    reply: object = None
    seen: bool = False


class ManagerPages:
    """One namespace's pages at a Manager, for one engine process; see the module header."""

    def __init__(self, socket_path: str, namespace: Namespace, *, instance_id: Optional[str] = None,
                 contract: Optional[RecoveryContract] = None, group_id: int = 0,
                 timeout_s: float = DEFAULT_TIMEOUT_S, retry_after_s: float = DEFAULT_RETRY_AFTER_S,
                 peer_wait_ms: int = DEFAULT_PEER_WAIT_MS, max_prepares: int = DEFAULT_MAX_PREPARES,
                 clock: Callable[[], float] = time.monotonic):
        if timeout_s <= 0 or retry_after_s < 0 or not 0 <= peer_wait_ms <= PEER_WAIT_MAX_MILLIS or max_prepares < 0:
            raise ValueError(f"timeout_s must be > 0, retry_after_s >= 0, peer_wait_ms in [0, {PEER_WAIT_MAX_MILLIS}], "
                             "max_prepares >= 0")
        self.max_prepares = max_prepares
        self.peer_wait_ms = int(peer_wait_ms)
        self.socket_path = os.fspath(socket_path)
        self.namespace = namespace
        self.page_tokens = namespace.page_tokens
        self.contract = contract or RecoveryContract(namespace.page_tokens, [FullGroup(group_id)])
        self.group_id = group_id
        self.instance_id = instance_id or f"py-{os.uname().nodename}-{os.getpid()}-{id(self):x}"
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self._clock = clock
        self._lock = threading.Lock()
        self._connect_lock = threading.Lock()
        self._client: Optional[Client] = None
        self._down_until = float("-inf")
        self._failures_in_a_row = 0  # guarded by _lock; reset by a registration
        self._epoch = 0
        self._operation_ids = itertools.count(1)
        self._closed = False
        self._prepares: Dict[int, _Prepare] = {}  # guarded by _lock; at most max_prepares
        #: (operation id, revision of its FINAL miss) on ``_parked_client``; guarded by _lock
        self._parked: List[Tuple[int, int]] = []
        self._parked_client: Optional[Client] = None
        #: the connection whose Manager answered CONTAINS with UNKNOWN_OPERATION (it predates it);
        #: asked again after a reconnect (the Manager may have been upgraded)
        self._without_contains: Optional[Client] = None
        self.stats: Dict[str, int] = dict.fromkeys(COUNTERS, 0)

    # -- public operations -----------------------------------------------------------------------

    def lookup(self, names: Sequence[bytes], prepared: int = 0) -> Lookup:
        """QUERY HOST_READY for ``names`` (pages 0..n-1 of one group); never raises. ``prepared``:
        the id :meth:`prepare` returned for this request; the QUERY reuses it when the prepare went
        out on this connection, so it takes the prepare over (its staged pages are leased and
        counted as consumed, the rest let go)."""
        with self._lock:
            self.stats["lookups"] += 1
            self.stats["lookup_pages"] += len(names)
        if not names:
            return Lookup(self, 0, False)
        try:
            client = self._connected()
        except _Down:
            return Lookup(self, 0, False)
        op, revision = self._take_prepare(prepared, client), 0
        if not op:
            op, revision = self._operations(client, 1)[0]
        try:
            result = client.query(op, {self.group_id: list(names)}, prompt_tokens=len(names) * self.page_tokens + 1,
                                  revision=revision, peer_wait_millis=self.peer_wait_ms)
        except OrbitKvError as e:
            if revision:  # a refused QUERY left the parked miss as it was: end it
                client.release_nowait([op])
            if e.code in _LOAD_REFUSALS:
                self._count("refused_busy")
                return Lookup(self, 0, False)
            self._failed(client, "failures_error", e)
            return Lookup(self, 0, False)
        except Exception as e:  # noqa: BLE001 - every Manager failure is a miss, counted
            self._failed(client, _failure_kind(e), e)
            return Lookup(self, 0, False)
        pages = self._present_pages(result, len(names))
        pending = result.status == p.QueryStatus.PENDING
        if pages == 0 and not pending:
            self._park_or_release(client, [(op, result.revision)])
            return Lookup(self, 0, False)
        lookup = Lookup(self, pages, pending, client, op, result, named=len(names))
        if lookup.pending:
            self._count("pending")
        else:
            self._count("hit_pages", pages)
        return lookup

    def prepare(self, names: Sequence[bytes], first_use_ms: int = 0, priority: int = 0) -> int:
        """PREPARE for ``names`` (as :meth:`lookup` would ask for them), expected to be looked up in
        ``first_use_ms`` ms; written without waiting for the answer, so it costs no round trip once
        connected. The operation id to pass to :meth:`lookup` or :meth:`cancel_prepare`, or 0 when
        nothing was sent (no names, the Manager down, ``max_prepares`` live); never raises."""
        if not names:
            return 0
        try:
            client = self._connected()
        except _Down:
            self._count("prepare_skipped")
            return 0
        now = self._clock()
        with self._lock:
            self._prune_prepares(now)
            if len(self._prepares) >= self.max_prepares:
                self.stats["prepare_skipped"] += 1
                return 0
            op = next(self._operation_ids)
            entry = self._prepares[op] = _Prepare(client, now + first_use_ms / 1000 + PREPARE_GRACE_S)
        request = p.Prepare(op, first_use_ms, priority, len(names) * self.page_tokens + 1, 0,
                            [p.QueryGroup(self.group_id, p.KeyForm.BLOCK_HASH, [bytes(n) for n in names])])
        entry.reply = client.send(request)
        if client.failed:
            with self._lock:
                self._prepares.pop(op, None)
            self._failed(client, "failures_error", ConnectionError("writing PREPARE failed"))
            self._count("prepare_skipped")
            return 0
        self._count("prepares")
        self._count("prepare_pages", len(names))
        return op

    def cancel_prepare(self, operation_id: int) -> bool:
        """Ends a prepare no lookup will take over (its request finished or was aborted): CANCEL,
        written without waiting. False when there was nothing live to cancel; never raises."""
        with self._lock:
            entry = self._prepares.pop(operation_id, None)
            if entry is None or entry.client is not self._client or entry.ends_at <= self._clock():
                return False
            self._note_answer(entry)
            self.stats["prepare_cancelled"] += 1
        try:
            entry.client.cancel_nowait(operation_id)
        except Exception as e:  # noqa: BLE001 - a lost connection ends the prepare anyway
            self._failed(entry.client, _failure_kind(e), e)
        return True

    def contains(self, names: Sequence[bytes], wait_s: float = 0.0) -> int:
        """How many consecutive pages of ``names``, from the first, the Manager can hand out.
        A prefix still being staged counts as present only if it settles within ``wait_s``."""
        lookup = self.lookup(names)
        try:
            if lookup.pending and not self._wait_settled(lookup, wait_s):
                return 0
            return lookup.pages
        finally:
            lookup.close()

    def present_each(self, names: Sequence[bytes], wait_s: float = 0.0) -> List[bool]:
        """Whether the Manager holds each page of ``names`` on its own (not as a prefix: a store
        keyed by independent chunks asks this). One CONTAINS (protocol 5.13) for the batch: one
        frame each way, nothing leased, staged or parked; a page in DRAM or on the Manager's SSD
        counts (the read that follows stages it). A page reported present can still be gone when
        it is read: that read misses it. On a Manager with peers (and ``peer_wait_ms`` > 0) the
        names it does not hold are asked once more with one QUERY each, so a page only a peer
        holds counts when it arrives within ``wait_s``; a Manager that predates CONTAINS is asked
        that way for every name (see :meth:`read_each`)."""
        if not names:
            return []
        client = self._lookup_client(names)
        if client is None:
            return [False] * len(names)
        if client is self._without_contains:
            return self._each(names, None, wait_s, counted=True)
        try:
            found, peers = self._locate(client, names)
        except OrbitKvError as e:
            if e.code == p.ErrorCode.UNKNOWN_OPERATION:
                self._without_contains = client
                log.info("OrbitKV: the Manager at %s predates CONTAINS; presence is asked with one QUERY per name",
                         self.socket_path)
                return self._each(names, None, wait_s, counted=True)
            if e.code in _LOAD_REFUSALS:
                self._count("refused_busy")
            else:
                self._failed(client, "failures_error", e)
            return [False] * len(names)
        except Exception as e:  # noqa: BLE001 - every Manager failure is a miss, counted
            self._failed(client, _failure_kind(e), e)
            return [False] * len(names)
        self._count("hit_pages", sum(found))
        if peers and self.peer_wait_ms > 0 and not all(found):
            missing = [i for i, present in enumerate(found) if not present]
            for i, present in zip(missing, self._each([names[i] for i in missing], None, wait_s, counted=True)):
                found[i] = present
        return found

    def _locate(self, client: Client, names: Sequence[bytes]) -> Tuple[List[bool], bool]:
        """CONTAINS for ``names``: whether the Manager holds each, and whether it has peers. One
        frame per name width (a group's names share one) and per slice that fits both the page
        count and the frame size; raises as :meth:`Client.contains` does."""
        found = [False] * len(names)
        peers = False
        by_width: Dict[int, List[int]] = {}
        for i, name in enumerate(names):
            by_width.setdefault(len(name), []).append(i)
        limits = client.registered.limits
        for width, indexes in by_width.items():
            fit = (limits.max_frame_bytes - p.CONTAINS_ONE_GROUP_BYTES) // max(1, width)
            limit = max(1, min(limits.max_pages_per_query, fit))
            for start in range(0, len(indexes), limit):
                part = indexes[start:start + limit]
                group = p.QueryGroup(self.group_id, p.KeyForm.BLOCK_HASH, [bytes(names[i]) for i in part])
                reply = client.contains([group])
                if len(reply.locations) != len(part):
                    raise p.ProtocolError(p.ErrorCode.MALFORMED,
                                          f"CONTAINED has {len(reply.locations)} locations for {len(part)} names")
                for i, at in zip(part, reply.locations):
                    found[i] = at != p.PageLocation.ABSENT
                peers = peers or reply.peers
        return found, peers

    def read_each(self, names: Sequence[bytes], sink: Callable[[int, memoryview], None],
                  wait_s: float = 0.0) -> List[bool]:
        """Each page of ``names`` on its own, handed to ``sink(i, page_bytes)`` before it is
        released; True for each page handed over. One QUERY per name, all written with one write
        before the first answer is read, then their RELEASEs with one write that is not waited for
        (:meth:`Client.release_nowait`): one round trip for the batch, and nothing held once the
        Manager has read the RELEASEs, before any later request of this store. A page still being
        staged (from SSD, or from a peer) counts only if it settles within ``wait_s``."""
        return self._each(names, sink, wait_s)

    def _lookup_client(self, names: Sequence[bytes], counted: bool = False) -> Optional[Client]:
        """Counts a lookup of ``names`` (unless ``counted`` already) and returns the connected
        client, or None while the store is down."""
        if not counted:
            self._count("lookups")
            self._count("lookup_pages", len(names))
        try:
            return self._connected()
        except _Down:
            return None

    def _each(self, names: Sequence[bytes], sink: Optional[Callable[[int, memoryview], None]],
              wait_s: float, counted: bool = False) -> List[bool]:
        if not names:
            return []
        client = self._lookup_client(names, counted)
        if client is None:
            return [False] * len(names)
        ops = self._operations(client, len(names))
        found = [False] * len(names)
        held: List[int] = []
        missed: List[Tuple[int, int]] = []
        deadline = self._clock() + wait_s  # one wait for the whole batch, not one per staging page
        try:
            replies = client.call_all(
                [p.Query(op, revision, p.CompletionTarget.HOST_READY, self.page_tokens + 1, 0,
                         [p.QueryGroup(self.group_id, p.KeyForm.BLOCK_HASH, [bytes(name)])], 0, self.peer_wait_ms)
                 for (op, revision), name in zip(ops, names)], p.QueryResult)
            for i, ((op, revision), reply) in enumerate(zip(ops, replies)):
                if isinstance(reply, OrbitKvError):
                    if revision:  # the refusal left the parked miss as it was
                        held.append(op)
                    if reply.code not in _LOAD_REFUSALS:
                        raise reply
                    self._count("refused_busy")
                    continue
                if reply.status == p.QueryStatus.FINAL and not reply.hit:
                    missed.append((op, reply.revision))
                    continue
                held.append(op)
                lookup = Lookup(self, self._present_pages(reply, 1), reply.status == p.QueryStatus.PENDING,
                                client, op, reply, named=1)
                if lookup.pending:  # staging from SSD, or (no pages yet) asking peers
                    self._count("pending")
                    if not self._wait_settled(lookup, max(0.0, deadline - self._clock())):
                        continue
                if lookup.pages != 1:
                    continue
                if sink is None:
                    found[i] = True
                else:
                    found[i] = self._read(lookup, lambda _, page, i=i: sink(i, page), 0.0) == 1
            client.release_nowait(held)
            self._park_or_release(client, missed)
        except Exception as e:  # noqa: BLE001 - every Manager failure is a miss, counted
            self._failed(client, _failure_kind(e), e)
            return [False] * len(names)
        self._count("hit_pages", sum(found))
        return found

    def read_into(self, names: Sequence[bytes], sink: Callable[[int, memoryview], None],
                  wait_s: Optional[float] = None) -> int:
        """Copies the longest present prefix of ``names`` through ``sink(i, page_bytes)``; the
        number of pages copied (0 on a miss or any failure)."""
        return self.lookup(names).read_into(sink, wait_s)

    def write(self, pages: Sequence[Tuple[bytes, object]], tenant: Optional[str] = None) -> List[bool]:
        """Publishes ``(name, buffer)`` pairs (any buffer: bytes, memoryview, a numpy array's
        ``data``; or a :class:`~orbitkv.client.PageParts` of several buffers); per page True when
        the Manager now holds it (sealed or already resident).
        ``tenant``: the tenant label (a ``cache_salt``, 1..64 UTF-8 bytes) the pages are charged to
        under the Manager's tenant quotas; ``None``: the namespace's default tenant."""
        if not pages:
            return []
        self._count("writes")
        try:
            client = self._connected()
        except _Down:
            return [False] * len(pages)
        # A page above the Manager's largest slot class (REGISTERED's arenas) is refused here, with
        # no round trip: the Manager would answer TOO_LARGE for the whole batch.
        largest = max((a.slot_bytes for a in client.registered.arenas), default=0)
        views = [(bytes(name), data if isinstance(data, PageParts) else byte_view(data)) for name, data in pages]
        fits = [i for i, (_, view) in enumerate(views) if len(view) <= largest]
        if len(fits) < len(views):
            self._count("write_refused", len(views) - len(fits))
            self._too_large(len(views) - len(fits), f"pages above the largest slot, {largest} bytes")
        stored = [False] * len(views)
        if not fits:
            return stored
        try:
            outcomes = client.publish([PageToPublish(self.group_id, *views[i]) for i in fits], tenant)
        except OrbitKvError as e:
            if e.code in _LOAD_REFUSALS:
                self._count("write_refused", len(fits))
                if e.code == p.ErrorCode.TOO_LARGE:
                    self._too_large(len(fits), str(e))
                return stored
            self._failed(client, "failures_error", e)
            return stored
        except Exception as e:  # noqa: BLE001
            self._failed(client, _failure_kind(e), e)
            return stored
        for i, o in zip(fits, outcomes):
            stored[i] = o in (PublishOutcome.SEALED, PublishOutcome.ALREADY_RESIDENT)
            if o == PublishOutcome.SEALED:
                self._count("pages_written")
            elif o == PublishOutcome.ALREADY_RESIDENT:
                self._count("write_already_resident")
            else:
                self._count("write_refused")
        return stored

    def _too_large(self, pages: int, why: str) -> None:
        with self._lock:
            first = self.stats["write_too_large"] == 0
            self.stats["write_too_large"] += pages
        if first:
            log.error("OrbitKV Manager at %s: pages too large to store (%s): give it a dramSlotBytes class that "
                      "holds one page; these pages are not cached", self.socket_path, why)

    def snapshot(self) -> Dict[str, int]:
        """A copy of the counters."""
        with self._lock:
            return dict(self.stats)

    @property
    def up(self) -> bool:
        """Whether a registered connection is open now (False as soon as it is known lost)."""
        with self._lock:
            return self._client is not None and not self._client.failed

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
            self._prepares.clear()
        if client is not None:
            client.close()

    # -- prepare internals -----------------------------------------------------------------------

    def _take_prepare(self, operation_id: int, client: Client) -> int:
        """``operation_id`` if it is a live prepare sent on ``client`` (the QUERY takes it over), else 0."""
        if operation_id == 0:
            return 0
        with self._lock:
            entry = self._prepares.pop(operation_id, None)
            if entry is None or entry.client is not client:
                return 0
            self._note_answer(entry)
            self.stats["prepare_taken_over"] += 1
            return operation_id

    def _prune_prepares(self, now: float) -> None:
        """Drops prepares that have ended at the Manager (refused, expired) or whose connection is
        gone; caller holds ``_lock``. At most ``max_prepares`` entries: linear is fine."""
        for op in [op for op, e in self._prepares.items()
                   if e.client is not self._client or e.ends_at <= now or self._note_answer(e)]:
            del self._prepares[op]

    def _note_answer(self, entry: _Prepare) -> bool:
        """Counts the prepare's answer once it is in (never waits); True if it ended the prepare
        (an ERROR or REFUSED). Caller holds ``_lock``."""
        waiter = entry.reply
        if entry.seen or waiter is None or not waiter.done:
            return False
        entry.seen = True
        reply = waiter.value
        if isinstance(reply, p.Prepared) and reply.outcome != p.PrepareOutcome.REFUSED:
            if reply.outcome == p.PrepareOutcome.TRIMMED:
                self.stats["prepare_trimmed"] += 1
            return False
        self.stats["prepare_refused"] += 1  # ERROR (BUSY, TOO_LARGE, ...), REFUSED, or a lost connection
        return True

    # -- lookup internals ------------------------------------------------------------------------

    def _operations(self, client: Client, n: int) -> List[Tuple[int, int]]:
        """``n`` (operation id, revision) pairs to QUERY with on ``client``: parked misses at their
        next revision first, then new ids at revision 0."""
        with self._lock:
            if self._parked_client is not client:
                self._parked, self._parked_client = [], client
            taken = self._parked[len(self._parked) - min(n, len(self._parked)):]
            del self._parked[len(self._parked) - len(taken):]
        out = [(op, revision + 1) for op, revision in taken]
        out += [(next(self._operation_ids), 0) for _ in range(n - len(out))]
        return out

    def _park_or_release(self, client: Client, misses: Sequence[Tuple[int, int]]) -> None:
        """Keeps FINAL misses' operations for later lookups on ``client`` while there is room
        (``MAX_PARKED_OPERATIONS``); RELEASEs the rest without waiting."""
        if not misses:
            return
        rest: List[int] = []
        with self._lock:
            room = MAX_PARKED_OPERATIONS - len(self._parked)
            if self._parked_client is not client or self._client is not client:
                room = 0
            for op, revision in misses:
                if room > 0 and revision < p.U31_MAX:
                    self._parked.append((op, revision))
                    room -= 1
                else:
                    rest.append(op)
        if rest:
            try:
                client.release_nowait(rest)
            except Exception as e:  # noqa: BLE001
                self._failed(client, _failure_kind(e), e)

    def _present_pages(self, result: p.QueryResult, named: int) -> int:
        if result.status == p.QueryStatus.FINAL:
            return min(named, result.boundary_tokens // self.page_tokens) if result.hit else 0
        # PENDING: the pages being staged or already resident, consecutive from page 0
        count = 0
        for index, page in result.group(self.group_id).pages() if result.groups else ():
            if index != count or page.state not in (p.PageState.RESERVED, p.PageState.RESIDENT):
                break
            count += 1
        return count

    def _poll(self, lookup: Lookup) -> bool:
        client = lookup._client
        if client is None or lookup._closed:
            return True
        try:
            result = client.poll(lookup._operation_id, lookup._result.revision)
        except Exception as e:  # noqa: BLE001
            self._failed(client, _failure_kind(e), e)
            lookup.pages, lookup.pending, lookup._client = 0, False, None
            return True
        if result.status == p.QueryStatus.PENDING:
            return False
        lookup._result, lookup.pending = result, False
        lookup.pages = self._present_pages(result, lookup.named)
        self._count("hit_pages", lookup.pages)
        return True

    def _wait_settled(self, lookup: Lookup, wait_s: Optional[float]) -> bool:
        deadline = self._clock() + (self.timeout_s if wait_s is None else wait_s)
        delay = 0.0005
        while not lookup.settled:
            if self._clock() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        return True

    def _read(self, lookup: Lookup, sink: Callable[[int, memoryview], None], wait_s: Optional[float]) -> int:
        if lookup._client is None:
            return 0
        if lookup.pending and not self._wait_settled(lookup, wait_s):
            return 0
        if lookup.pages == 0 or lookup._result is None:
            return 0
        client = lookup._client
        leases = []
        for index, page in lookup._result.group(self.group_id).pages():
            if index >= lookup.pages:
                break
            if page.state != p.PageState.RESIDENT:
                return 0
            leases.append(page.lease)
        if len(leases) != lookup.pages:
            return 0
        self._count("reads")
        for i, lease in enumerate(leases):
            try:
                view = client.read_lease(lease)
            except (IndexError, ValueError) as e:
                self._failed(client, "failures_error", e)
                return 0
            try:
                sink(i, view)
            finally:
                view.release()
        self._count("pages_read", len(leases))
        return len(leases)

    def _release(self, lookup: Lookup) -> None:
        client, lookup._client = lookup._client, None
        if client is None or lookup._operation_id == 0:
            return
        try:
            client.release_nowait([lookup._operation_id])
        except Exception as e:  # noqa: BLE001
            self._failed(client, _failure_kind(e), e)

    # -- connection ------------------------------------------------------------------------------

    def _connected(self) -> Client:
        with self._lock:
            if self._closed:
                raise _Down()
            if self._client is not None:
                return self._client
            if self._clock() < self._down_until:
                self.stats["skipped_down"] += 1
                raise _Down()
        with self._connect_lock:
            with self._lock:
                if self._client is not None:
                    return self._client
                if self._clock() < self._down_until:
                    self.stats["skipped_down"] += 1
                    raise _Down()
            client = None
            try:
                client = Client(self.socket_path, timeout=self.timeout_s)
                self._epoch = max(self._epoch + 1, time.time_ns() // 1000)
                client.register(self.instance_id, self._epoch, self.namespace, self.contract)
            except Exception as e:  # noqa: BLE001
                if client is not None:
                    client.close()
                self._mark_down("failures_connect", e)
                raise _Down() from None
            with self._lock:
                if self._closed:
                    client.close()
                    raise _Down()
                self._client = client
                self._failures_in_a_row = 0
                self.stats["connects"] += 1
            return client

    def _failed(self, client: Client, counter: str, error: BaseException) -> None:
        """Drops ``client`` and marks the store down, counted once per connection: later failures
        of calls that were already in flight on it find it gone and count nothing."""
        with self._lock:
            current = self._client is client
            if current:
                self._client = None
        client.close()
        if current:
            self._mark_down(counter, error)

    def _mark_down(self, counter: str, error: BaseException) -> None:
        with self._lock:
            first = self.stats[counter] == 0
            self.stats[counter] += 1
            self._failures_in_a_row += 1
            window = min(self.retry_after_s * 2 ** min(self._failures_in_a_row - 1, 16),
                         max(self.retry_after_s, MAX_RETRY_AFTER_S))
            self._down_until = self._clock() + window
        if first:  # one line per kind of failure; the counters say how often
            log.warning("OrbitKV Manager at %s: %s (%s); answering misses for %.1f s, then reconnecting",
                        self.socket_path, counter, error, window)

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.stats[name] += n


def _failure_kind(error: BaseException) -> str:
    return "failures_timeout" if isinstance(error, TimeoutError) else "failures_error"


