"""OrbitKV engine channel client (stdlib only: socket, mmap, struct, threading).

One :class:`Client` is one connection to a Manager and one registered engine instance
(docs/protocol.md section 1). After REGISTERED it fetches its namespace's arena descriptors from
the Manager's descriptor socket (section 6.11, ``socket.recv_fds``) and maps them, and the
destination regions it registers, with ``MAP_SHARED``; page bytes never travel over the socket.

Thread model: thread-safe. Any number of threads may call; each request is encoded whole and
written under a lock, so requests pipeline on the one connection. Whoever holds the read lock
reads the socket and decodes what the Manager sends, in arrival order: it wakes the caller waiting
on each reply (matched by request id) and routes COMPLETION events to the operation they name
(:class:`_Operations`). A caller waiting for a reply or event takes the read lock itself when it
is free and reads until its own answer is in (no thread hand-off on the common path: one caller,
one request at a time); a caller that finds it held registers as a follower and sleeps until the
holder dispatches its answer or, leaving, hands the read role to it. A daemon thread reads every
``_IDLE_READ_S`` whatever nobody waits for (COMPLETIONs of operations nobody waits on yet,
replies to requests written without waiting, a lost connection), so the socket never fills.
Every blocking call waits at most ``timeout`` seconds (TimeoutError).

What it keeps: the socket, the mappings, and per live operation only the events that route its
COMPLETIONs; leases and coverage stay with the Manager, which owns them.

Errors: a refused request raises :class:`OrbitKvError` (the Manager's ErrorCode and message;
the request had no effect). A lost connection raises ConnectionError; per-page publishing
outcomes are values (:class:`PublishOutcome`).

Design note: callers read inline because a reply handed from a reader thread to its caller
costs about 48 us of wake-ups per round trip in CPython (docs/performance.md, "The vLLM secondary
tier against a memcpy"); the reader thread stays because COMPLETION frames arrive between any two
replies (section 9.3) and must be routed even while no call is waiting. Frames are decoded and
dispatched only under the read lock, so they are routed in arrival order whoever reads them: the
routing arms an event only when the reply that starts the work is read, so a COMPLETION can
never be missed or attributed to an older revision.
"""

from __future__ import annotations

import enum
import mmap
import os
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import protocol as p
from .state import Namespace, RecoveryContract

DEFAULT_TIMEOUT_S = 30.0
#: madvise advice that maps a range writable without touching it (Linux 5.14; Python 3.12 names it)
_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23 if sys.platform.startswith("linux") else None)
_RECV_BYTES = 1 << 16
#: how often the idle reader drains what nobody waits for: not a thread woken per frame, since in
#: CPython every such wake-up competes with the caller for the interpreter lock
_IDLE_READ_S = 0.01


#: The peer wait of an engine that has not measured its prefill rate yet (milliseconds).
PEER_WAIT_UNKNOWN_RATE_MILLIS = 2_000
#: The longest peer wait ``peer_wait_for`` asks for (milliseconds).
PEER_WAIT_MAX_MILLIS = 10_000


def peer_wait_for(tokens_to_compute: int, prefill_tokens_per_second: int) -> int:
    """The ``peer_wait_millis`` for a QUERY whose prompt needs ``tokens_to_compute`` tokens of
    prefill without a hit: the time recomputing them takes at the measured rate (waiting longer for
    a peer cannot make the first token sooner), at least 1 ms and at most PEER_WAIT_MAX_MILLIS;
    PEER_WAIT_UNKNOWN_RATE_MILLIS when the rate is unknown (0). Same rule as the Java client's
    ``PeerWait.millisFor``."""
    if tokens_to_compute < 0 or prefill_tokens_per_second < 0:
        raise ValueError("tokens and rate must be >= 0")
    if prefill_tokens_per_second == 0:
        return PEER_WAIT_UNKNOWN_RATE_MILLIS
    millis = -(-tokens_to_compute * 1000 // prefill_tokens_per_second)
    return max(1, min(PEER_WAIT_MAX_MILLIS, millis))


class OrbitKvError(Exception):
    """The Manager refused a request with ERROR ``code`` (a :class:`protocol.ErrorCode`)."""

    def __init__(self, code: p.ErrorCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class PublishOutcome(enum.Enum):
    """What became of one published page (RESERVED refusal or COMMITTED outcome)."""
    SEALED = "sealed"
    DISCARDED = "discarded"
    ALREADY_RESIDENT = "already_resident"
    NO_SPACE = "no_space"
    BUSY = "busy"
    NOT_FOUND = "not_found"


_REFUSED = {p.Refusal.ALREADY_RESIDENT: PublishOutcome.ALREADY_RESIDENT, p.Refusal.NO_SPACE: PublishOutcome.NO_SPACE,
            p.Refusal.BUSY: PublishOutcome.BUSY}
_SETTLED = {p.SettleOutcome.SEALED: PublishOutcome.SEALED, p.SettleOutcome.DISCARDED: PublishOutcome.DISCARDED,
            p.SettleOutcome.NOT_FOUND: PublishOutcome.NOT_FOUND, p.SettleOutcome.ABORTED: PublishOutcome.NOT_FOUND}


def byte_view(data: object) -> memoryview:
    """A flat, format ``B`` view of any C-contiguous buffer (no copy): bytes, a memoryview, a numpy
    array's or a ctypes array's (``<B``) buffer."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


class PageParts:
    """A page image that lies in several buffers, in order (a KV page's K run, then its V run): the
    publish writes each part into the granted slot in turn, so the image is never assembled in a
    buffer of its own. ``len()`` is the image's length; each part is any C-contiguous buffer."""

    __slots__ = ("parts", "_length")

    def __init__(self, parts: Sequence[object]):
        self.parts: Tuple[memoryview, ...] = tuple(byte_view(part) for part in parts)
        self._length = sum(len(part) for part in self.parts)

    def __len__(self) -> int:
        return self._length

    def write_into(self, destination, offset: int) -> None:
        """Copies the parts, in order, into ``destination`` (a writable buffer) from ``offset``."""
        for part in self.parts:
            end = offset + len(part)
            destination[offset:end] = part
            offset = end


@dataclass(frozen=True)
class PageToPublish:
    """One page image: its group, its name (block hash or 32-byte StateKey) and its bytes (a
    buffer, or a :class:`PageParts` whose parts are written into the slot one after another)."""
    group_id: int
    name: bytes
    data: Union[bytes, PageParts]
    key_form: p.KeyForm = p.KeyForm.BLOCK_HASH

    def entry(self) -> p.PublishPage:
        return p.PublishPage(self.group_id, self.key_form, bytes(self.name), len(self.data))


@dataclass
class Region:
    """A registered ENGINE_RESTORE destination: ``page_count`` pages of ``page_bytes`` in ``path``."""
    region_id: int
    path: str
    page_bytes: int
    page_count: int
    mapping: mmap.mmap

    def page(self, index: int) -> bytes:
        """A copy of destination page ``index`` (read it only after RESTORE_DONE)."""
        if not 0 <= index < self.page_count:
            raise IndexError(index)
        start = index * self.page_bytes
        return self.mapping[start:start + self.page_bytes]


#: guards the lazy creation of every waiter's event (held for an allocation, never while waiting)
_EVENT_LOCK = threading.Lock()


class _Waiter:
    """One awaited reply or event: ``done`` once :meth:`set`. ``reader``: the connection's
    ``Client._read_until`` (the waiting thread reads the socket itself while nobody else does), or
    None to wait to be woken. A thread that has to sleep for it (:meth:`sleep`) is woken when it is
    done, or when the read role is handed to it (:meth:`wake`, ``done`` still False). The event
    behind that is made only when a thread sleeps or is woken: a caller that reads its own reply
    never needs one (an Event costs 2 us to make)."""
    __slots__ = ("_event", "done", "value", "error", "reader")

    def __init__(self, reader: Optional[Callable[["_Waiter", float], None]] = None):
        self._event: Optional[threading.Event] = None
        self.done = False
        self.value = None
        self.error: Optional[BaseException] = None
        self.reader = reader

    def set(self, value=None, error: Optional[BaseException] = None) -> None:
        self.value, self.error = value, error
        self.done = True
        event = self._event  # read after done: a sleeper that made its event later sees done first
        if event is not None:
            event.set()

    def _wake_event(self) -> threading.Event:
        if self._event is None:
            with _EVENT_LOCK:
                if self._event is None:
                    self._event = threading.Event()
        return self._event

    def sleep(self, timeout: float) -> None:
        """Sleeps until done, woken by :meth:`wake`, or ``timeout`` s; clears a wake-up that found
        it not done."""
        event = self._wake_event()
        if not self.done:
            event.wait(timeout)
        if not self.done:
            event.clear()

    def wake(self) -> None:
        """Wakes the thread sleeping for this waiter (or the next :meth:`sleep` at once)."""
        self._wake_event().set()

    def wait(self, timeout: float, what: str):
        if not self.done:
            if self.reader is not None:
                self.reader(self, timeout)
            else:
                self.sleep(timeout)
        if not self.done:
            raise TimeoutError(f"{what}: no answer within {timeout} s")
        if self.error is not None:
            raise self.error
        return self.value


class _Operations:
    """COMPLETION routing per live operation id: its current revision and one waiter per event.

    Called by the reader thread with every reply (before its caller wakes) and every COMPLETION,
    in arrival order. The reply that starts some work arms the event's waiter (QUERY_RESULT
    PENDING of a new revision: QUERY_SETTLED; RESTORE_ACCEPTED: RESTORE_DONE; CANCELLED or
    RELEASED with drained = 0: DRAINED), so a COMPLETION, always sent after that reply, finds
    it. Entries end with the operation, so the table holds at most the live operations the
    Manager allows (maxOperationsPerConnection). Guarded by ``_lock``."""

    def __init__(self, reader: Optional[Callable[[_Waiter, float], None]] = None):
        self._reader = reader
        self._lock = threading.Lock()
        self._ops: Dict[int, dict] = {}
        #: operations ended without a waiter (:meth:`Client.release_nowait`, :meth:`Client.cancel_nowait`):
        #: their entry ends with their RELEASED/CANCELLED (drained) or DRAINED, since no caller is
        #: left to forget it
        self._detached: set = set()
        self._failure: Optional[BaseException] = None

    def _op(self, op_id: int, revision: int = 0) -> dict:
        op = self._ops.get(op_id)
        if op is None:
            op = self._ops[op_id] = {"revision": revision, "ended": False, "events": {}}
        return op

    def on_frame(self, frame) -> None:
        with self._lock:
            if isinstance(frame, p.QueryResult):
                op = self._ops.get(frame.operation_id)
                if op is None or op["ended"] or frame.revision > op["revision"]:
                    op = self._ops[frame.operation_id] = {"revision": frame.revision, "ended": False, "events": {}}
                if (frame.revision == op["revision"] and frame.status == p.QueryStatus.PENDING
                        and p.CompletionEvent.QUERY_SETTLED not in op["events"]):
                    op["events"][p.CompletionEvent.QUERY_SETTLED] = _Waiter(self._reader)
            elif isinstance(frame, p.RestoreAccepted):
                self._op(frame.operation_id)["events"][p.CompletionEvent.RESTORE_DONE] = _Waiter(self._reader)
            elif isinstance(frame, (p.Cancelled, p.Released)):
                if frame.drained:
                    self._ops.pop(frame.operation_id, None)
                    self._detached.discard(frame.operation_id)
                else:
                    self._op(frame.operation_id)["events"][p.CompletionEvent.DRAINED] = _Waiter(self._reader)
            elif isinstance(frame, p.Completion):
                op = self._ops.get(frame.operation_id)
                if op is None or frame.revision < op["revision"]:
                    return
                waiter = op["events"].setdefault(frame.event, _Waiter(self._reader))
                if frame.event == p.CompletionEvent.DRAINED:
                    op["ended"] = True
                    if frame.operation_id in self._detached:
                        self._detached.discard(frame.operation_id)
                        del self._ops[frame.operation_id]
                waiter.set(frame)

    def detach(self, op_ids: Iterable[int]) -> None:
        """Nobody waits for these operations' end: forget each when it has drained."""
        with self._lock:
            if len(self._detached) >= 4 * 1024:  # ids whose RELEASE or CANCEL was refused (already ended)
                self._detached &= set(self._ops)
            self._detached.update(op_ids)

    def waiter(self, op_id: int, event: p.CompletionEvent) -> _Waiter:
        with self._lock:
            if self._failure is not None:
                w = _Waiter()
                w.set(error=self._failure)
                return w
            return self._op(op_id)["events"].setdefault(event, _Waiter(self._reader))

    def forget_if_ended(self, op_id: int) -> None:
        with self._lock:
            op = self._ops.get(op_id)
            if op is not None and op["ended"]:
                del self._ops[op_id]

    def fail_all(self, error: BaseException) -> None:
        with self._lock:
            self._failure = self._failure or error
            for op in self._ops.values():
                for w in op["events"].values():
                    if not w.done:
                        w.set(error=self._failure)
            self._ops.clear()
            self._detached.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._ops)


class Client:
    """A connection to the OrbitKV Manager listening at ``socket_path``."""

    def __init__(self, socket_path: Union[str, os.PathLike], timeout: float = DEFAULT_TIMEOUT_S):
        self.timeout = timeout
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(os.fspath(socket_path))
        except OSError:
            self._sock.close()
            raise
        self._write_lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self._pending: Dict[int, _Waiter] = {}
        self._next_id = 1
        self._failure: Optional[BaseException] = None
        self._operations = _Operations(self._read_until)
        self._arenas: List[mmap.mmap] = []
        #: per arena, one bit per slot this client has written (its page-table entries are in place)
        self._written: List[bytearray] = []
        self._populate = _MADV_POPULATE_WRITE is not None
        self._regions: List[mmap.mmap] = []
        self.registered: Optional[p.Registered] = None
        #: held by whoever reads the socket and decodes; guards _decoder, _inbound and _read_poll
        self._read_lock = threading.Lock()
        self._decoder = p.FrameDecoder(p.DEFAULT_LIMITS, p.Direction.TO_CLIENT)
        self._inbound = bytearray()
        self._read_poll = select.poll()
        self._read_poll.register(self._sock, select.POLLIN)
        #: waiters of threads sleeping while another holds the read lock (insertion-ordered set),
        #: at most one per calling thread; guarded by _followers_lock
        self._followers: Dict[_Waiter, None] = {}
        self._followers_lock = threading.Lock()
        self._closed = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, name="orbitkv-client-reader", daemon=True)
        self._reader.start()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests ------------------------------------------------------------------------------

    def send(self, request) -> _Waiter:
        """Writes ``request`` without waiting; ``.wait(timeout, what)`` on the result gives the reply frame."""
        return self.send_many([request])[0]

    def send_many(self, requests: Sequence) -> List[_Waiter]:
        """Writes ``requests`` in order with one write, without waiting: one wake-up of the
        Manager for the batch instead of one per frame. One waiter per request, as :meth:`send`."""
        waiters = [_Waiter(self._read_until) for _ in requests]
        with self._pending_lock:
            if self._failure is not None:
                for waiter in waiters:
                    waiter.set(error=self._failure)
                return waiters
            ids = []
            for waiter in waiters:
                request_id = self._next_id
                self._next_id = self._next_id + 1 if self._next_id < p.U63_MAX else 1
                self._pending[request_id] = waiter
                ids.append(request_id)
        try:
            data = b"".join(p.encode(request_id, request) for request_id, request in zip(ids, requests))
        except BaseException:
            with self._pending_lock:  # nothing was written: no reply will come for these ids
                for request_id in ids:
                    self._pending.pop(request_id, None)
            raise
        try:
            with self._write_lock:
                self._sock.sendall(data)
        except OSError as e:
            self._fail(ConnectionError(f"writing {requests[0].TYPE.name} failed: {e}"))
        return waiters

    def call(self, request, reply_type):
        """Sends ``request`` and returns its typed reply; raises OrbitKvError on ERROR."""
        reply = self.send(request).wait(self.timeout, request.TYPE.name)
        if isinstance(reply, p.Error):
            raise OrbitKvError(reply.code, reply.message)
        if not isinstance(reply, reply_type):
            raise p.ProtocolError(p.ErrorCode.MALFORMED, f"{request.TYPE.name} answered by {reply.TYPE.name}")
        return reply

    def call_all(self, requests: Sequence, reply_type) -> List[Union[object, OrbitKvError]]:
        """Pipelines ``requests``: writes every one before reading the first reply, so n requests
        cost one round trip (and one write); waits at most ``timeout`` for all of them together.
        Returns, in order, each typed reply or the OrbitKvError its ERROR carried (the others'
        effects stand)."""
        waiters = self.send_many(requests)
        deadline = time.monotonic() + self.timeout
        out: List[Union[object, OrbitKvError]] = []
        for request, waiter in zip(requests, waiters):
            reply = waiter.wait(max(0.0, deadline - time.monotonic()), request.TYPE.name)
            if isinstance(reply, p.Error):
                out.append(OrbitKvError(reply.code, reply.message))
            elif not isinstance(reply, reply_type):
                raise p.ProtocolError(p.ErrorCode.MALFORMED, f"{request.TYPE.name} answered by {reply.TYPE.name}")
            else:
                out.append(reply)
        return out

    def release_all(self, operation_ids: Sequence[int]) -> None:
        """RELEASE of several operations, pipelined (:meth:`call_all`); returns once each is
        released, after its DRAINED where its reply said drained = 0. Raises the first refusal."""
        replies = self.call_all([p.Release(op) for op in operation_ids], p.Released)
        errors = [r for r in replies if isinstance(r, OrbitKvError)]
        deadline = time.monotonic() + self.timeout
        for op, reply in zip(operation_ids, replies):
            if isinstance(reply, p.Released) and not reply.drained:
                try:
                    self._operations.waiter(op, p.CompletionEvent.DRAINED).wait(
                        max(0.0, deadline - time.monotonic()), "DRAINED")
                finally:
                    self._operations.forget_if_ended(op)
        if errors:
            raise errors[0]

    def register(self, instance_id: str, epoch: int, namespace: Namespace, contract: RecoveryContract) -> p.Registered:
        """Registers this connection's engine instance and maps every arena file read-write.

        Raises OrbitKvError: STALE_EPOCH (a higher, or a live equal, epoch is registered; the
        connection is closed), MALFORMED, OUT_OF_ORDER (already registered), BUSY (too many
        connections, or the previous incarnation did not drain in time: register again)."""
        reply = self.call(p.Register(instance_id, epoch, namespace, contract), p.Registered)
        fds = fetch_arenas(reply.descriptor_socket, reply.ticket, len(reply.arenas), self.timeout)
        try:
            for arena, fd in zip(reply.arenas, fds):
                self._arenas.append(mmap.mmap(fd, arena.size_bytes, mmap.MAP_SHARED,
                                              mmap.PROT_READ | mmap.PROT_WRITE))
                self._written.append(bytearray(arena.size_bytes // arena.slot_bytes // 8 + 1))
        finally:
            for fd in fds:
                os.close(fd)
        self.registered = reply
        return reply

    def query(self, operation_id: int, groups: Union[Dict[int, Sequence[bytes]], Sequence[p.QueryGroup]],
              prompt_tokens: int, origin_tokens: int = 0, revision: int = 0,
              target: p.CompletionTarget = p.CompletionTarget.HOST_READY,
              key_form: p.KeyForm = p.KeyForm.BLOCK_HASH,
              prefill_tokens_per_second: int = 0, peer_wait_millis: int = 0) -> p.QueryResult:
        """Sends a QUERY; ``groups`` maps group id to its page names (page 0 first) in ``key_form``,
        or is a list of QueryGroup. ``prefill_tokens_per_second`` is the engine's measured prefill
        rate (0 = unknown: the Manager answers the longest legal prefix). ``peer_wait_millis`` lets
        a clustered Manager answer PENDING while it finds and fetches pages only peers hold (0 =
        never wait; see ``peer_wait_for``). Returns the first answer, PENDING or FINAL."""
        if isinstance(groups, dict):
            groups = [p.QueryGroup(gid, key_form, list(hashes)) for gid, hashes in groups.items()]
        request = p.Query(operation_id, revision, target, prompt_tokens, origin_tokens, groups,
                          prefill_tokens_per_second, peer_wait_millis)
        return self.call(request, p.QueryResult)

    def prepare(self, operation_id: int, groups: Union[Dict[int, Sequence[bytes]], Sequence[p.QueryGroup]],
                prompt_tokens: int, first_use_millis: int, priority: int = 0, origin_tokens: int = 0,
                key_form: p.KeyForm = p.KeyForm.BLOCK_HASH) -> p.Prepared:
        """Sends a PREPARE (protocol 5.11): the Manager stages the missing pages of this demand
        (``groups`` as for :meth:`query`) into DRAM ahead of its expected first use, in
        ``first_use_millis`` ms, without leasing anything. The answer is never a hit: the later
        :meth:`query` of the same demand (it may reuse ``operation_id``) finds the pages resident.
        End it early with :meth:`cancel`."""
        if isinstance(groups, dict):
            groups = [p.QueryGroup(gid, key_form, list(hashes)) for gid, hashes in groups.items()]
        request = p.Prepare(operation_id, first_use_millis, priority, prompt_tokens, origin_tokens, groups)
        return self.call(request, p.Prepared)

    def poll(self, operation_id: int, revision: int) -> p.QueryResult:
        return self.call(p.QueryPoll(operation_id, revision), p.QueryResult)

    def wait_settled(self, result: p.QueryResult) -> p.QueryResult:
        """The FINAL result: ``result`` if FINAL, else after COMPLETION QUERY_SETTLED, one poll."""
        if result.status == p.QueryStatus.FINAL:
            return result
        self._operations.waiter(result.operation_id, p.CompletionEvent.QUERY_SETTLED).wait(
            self.timeout, "QUERY_SETTLED")
        settled = self.poll(result.operation_id, result.revision)
        if settled.status != p.QueryStatus.FINAL:
            raise p.ProtocolError(p.ErrorCode.MALFORMED, "still PENDING after QUERY_SETTLED")
        return settled

    def publish(self, pages: Sequence[PageToPublish], tenant: Optional[str] = None) -> List[PublishOutcome]:
        """PUBLISH_RESERVE, write each image into its granted slot through the mapping,
        PUBLISH_COMMIT; one outcome per page, in order. ``tenant``: the tenant label (a
        ``cache_salt``, 1..64 UTF-8 bytes) the pages are charged to; ``None``: the namespace's
        default tenant (protocol 5.6)."""
        limits = self._registration().limits
        batch = min(limits.max_pages_per_publish, limits.max_ids_per_settle)
        out: List[PublishOutcome] = []
        for start in range(0, len(pages), batch):
            out += self._publish_batch(pages[start:start + batch], tenant)
        return out

    def _publish_batch(self, pages: Sequence[PageToPublish], tenant: Optional[str] = None) -> List[PublishOutcome]:
        reserved = self.call(p.PublishReserve([pg.entry() for pg in pages], tenant), p.Reserved)
        out: List[Optional[PublishOutcome]] = [None] * len(pages)
        granted: List[Tuple[int, int]] = []
        try:
            for i, (page, outcome) in enumerate(zip(pages, reserved.outcomes)):
                if isinstance(outcome, p.Granted):
                    granted.append((outcome.reservation_id, i))
                    if self._failure is not None:  # protocol.md 9.6: closed or fenced, the slot is not ours
                        raise self._failure
                    arena = self._arenas[outcome.arena_index]
                    end = outcome.offset_bytes + len(page.data)
                    if end > len(arena):
                        raise p.ProtocolError(p.ErrorCode.MALFORMED, "granted slot lies outside its arena")
                    self._first_write(outcome.arena_index, outcome.offset_bytes, len(page.data))
                    if isinstance(page.data, PageParts):
                        page.data.write_into(arena, outcome.offset_bytes)
                    else:
                        arena[outcome.offset_bytes:end] = page.data
                else:
                    out[i] = _REFUSED[outcome.reason]
        except Exception:
            if granted:
                self.send(p.PublishAbort([rid for rid, _ in granted]))
            raise
        if granted:
            committed = self.call(p.PublishCommit([rid for rid, _ in granted]), p.Committed)
            for (_, i), settled in zip(granted, committed.outcomes):
                out[i] = _SETTLED[settled]
        return out  # type: ignore[return-value]

    def _first_write(self, arena_index: int, offset: int, length: int) -> None:
        """Before this client's first write into a slot: maps the slot's pages writable in one
        call (``MADV_POPULATE_WRITE``, allocating those the namespace has not written yet) instead
        of one page fault per 4 KiB page during the copy; a slot written before is left alone
        (its entries are in place unless the Manager gave the slot to another namespace since,
        and then the copy faults as without this). Measured here: 0.203 ms for a 256 KiB copy
        into fresh pages through faults, 0.156 ms populated first (docs/performance.md)."""
        if not self._populate:
            return
        slot = offset // self.registered.arenas[arena_index].slot_bytes
        written = self._written[arena_index]
        byte, bit = slot >> 3, 1 << (slot & 7)
        if written[byte] & bit:
            return
        written[byte] |= bit
        try:
            self._arenas[arena_index].madvise(_MADV_POPULATE_WRITE, offset, length)
        except OSError:  # a kernel without it (before 5.14): the copy faults the pages in
            self._populate = False

    def register_region(self, path: Union[str, os.PathLike], page_bytes: int, page_count: int) -> Region:
        """Creates (or grows) ``path`` to ``page_bytes * page_count``, maps it and registers it
        as an ENGINE_RESTORE destination; keep the file until the client is closed."""
        path = os.path.abspath(os.fspath(path))
        size = page_bytes * page_count
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            mapping = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._regions.append(mapping)
        reply = self.call(p.RegisterRegion(path, size, page_bytes, page_count), p.RegionRegistered)
        return Region(reply.region_id, path, page_bytes, page_count, mapping)

    def register_private_region(self, page_bytes: int, page_count: int) -> Region:
        """Creates a region of ``page_bytes * page_count`` in anonymous shared memory (a memfd: on
        no file system, no ``regionDir`` involved), hands its descriptor to the Manager over the
        descriptor socket and registers it (protocol 5.2, 6.11). Needs ``register`` first."""
        registered = self._registration()
        size = page_bytes * page_count
        fd = os.memfd_create("orbitkv-region", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            mapping = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self._regions.append(mapping)
            handle = hand_over_region(registered.descriptor_socket, fd, self.timeout)
        finally:
            os.close(fd)
        reply = self.call(p.RegisterRegion(None, size, page_bytes, page_count, handle), p.RegionRegistered)
        return Region(reply.region_id, "memfd:orbitkv-region", page_bytes, page_count, mapping)

    def restore(self, operation_id: int, region: Region,
                mapping: Iterable[Union[p.RestorePage, Tuple[int, int, int]]]) -> p.Completion:
        """RESTORE leased RESIDENT pages into ``region`` (``(group_id, source_page,
        destination_page)`` each) and wait for COMPLETION RESTORE_DONE."""
        pages = [m if isinstance(m, p.RestorePage) else p.RestorePage(*m) for m in mapping]
        self.call(p.Restore(operation_id, region.region_id, pages), p.RestoreAccepted)
        return self._operations.waiter(operation_id, p.CompletionEvent.RESTORE_DONE).wait(
            self.timeout, "RESTORE_DONE")

    def release_nowait(self, operation_ids: Sequence[int]) -> None:
        """RELEASE of several operations, written with one write, without waiting for RELEASED
        or DRAINED: for a caller that has finished with the pages (copied what it needed) and
        must not spend a round trip on giving them back. The Manager applies each RELEASE
        before any later request of this connection (it reads a connection's frames in order),
        so a later QUERY or STATS sees them; a refusal (an unknown operation) is dropped, and a
        lost connection releases everything anyway (protocol 9.6)."""
        if not operation_ids:
            return
        self._operations.detach(operation_ids)
        self.send_many([p.Release(op) for op in operation_ids])

    def release(self, operation_id: int) -> p.Released:
        """RELEASE; returns once everything the operation held is released (after DRAINED if needed)."""
        return self._end(p.Release(operation_id), p.Released)

    def cancel(self, operation_id: int) -> p.Cancelled:
        """CANCEL; returns once its submitted I/O has drained and everything is released."""
        return self._end(p.Cancel(operation_id), p.Cancelled)

    def cancel_nowait(self, operation_id: int) -> None:
        """CANCEL written without waiting for its reply (a scheduler thread ending a PREPARE it no
        longer needs); what the Manager answers, and its DRAINED, are routed and forgotten. A lost
        connection ends the operation anyway (protocol 9.6)."""
        self._operations.detach([operation_id])
        self.send(p.Cancel(operation_id))

    def _end(self, request, reply_type):
        reply = self.call(request, reply_type)
        if not reply.drained:
            try:
                self._operations.waiter(request.operation_id, p.CompletionEvent.DRAINED).wait(self.timeout, "DRAINED")
            finally:
                self._operations.forget_if_ended(request.operation_id)
        return reply

    def stats(self) -> Dict[str, int]:
        return self.call(p.Stats(), p.StatsReply).as_dict()

    def hint(self, kind: p.HintKind, groups: Sequence[p.QueryGroup], duration_millis: int = 0) -> p.Hinted:
        """HINT (protocol 5.12) for pages of this client's namespace: PIN keeps them in DRAM for
        ``duration_millis`` (at most the Manager's ``hintPinMaxMillis``, within its per-namespace
        pinned-byte budget), UNPIN ends that, RETAIN and DEMOTE reorder them for eviction, DROP
        removes them from DRAM and SSD. Returns the per-page counts; a page another namespace holds
        counts as not resident. Raises OrbitKvError (NAMESPACE_MISMATCH for a group the contract lacks)."""
        return self.call(p.Hint(kind, tuple(groups), duration_millis), p.Hinted)

    def contains(self, groups: Sequence[p.QueryGroup]) -> p.Contained:
        """CONTAINS (protocol 5.13): where each named page of this client's namespace is held on
        the Manager now (DRAM, SSD or ABSENT), in the order named, in one round trip; no lease, no
        staging, no peer fetch: a page reported here may be gone when queried. ``peers`` in the
        reply: an ABSENT page may be at a peer. Raises OrbitKvError (NAMESPACE_MISMATCH for a group
        the contract lacks; UNKNOWN_OPERATION from a Manager that predates CONTAINS)."""
        return self.call(p.Contains(tuple(groups)), p.Contained)

    @property
    def failed(self) -> bool:
        """True once the connection is lost (the Manager closed it, died, or a write failed): the
        Manager has released, or will release, every lease of this session (protocol 9.6)."""
        return self._failure is not None

    def read_lease(self, lease: p.Lease) -> memoryview:
        """A read-only view of a leased RESIDENT page in the shared arena, valid until the
        operation is released; release the view before :meth:`close`. Raises ValueError once the
        connection is lost: its leases are void, and the slot may already hold another page."""
        if self._failure is not None:
            raise ValueError(f"the connection is lost ({self._failure}): its leases are void")
        arena = self._arenas[lease.arena_index]
        end = lease.offset_bytes + lease.length_bytes
        if end > len(arena):
            raise IndexError(f"lease {lease} lies outside arena {lease.arena_index}")
        return memoryview(arena)[lease.offset_bytes:end].toreadonly()

    @staticmethod
    def resident_pages(result: p.QueryResult, first_destination_page: int = 0) -> List[p.RestorePage]:
        """A restore mapping for every RESIDENT page of ``result`` onto consecutive destination pages."""
        out, dest = [], first_destination_page
        for g in result.groups:
            for index, page in g.pages():
                if page.state == p.PageState.RESIDENT:
                    out.append(p.RestorePage(g.group_id, index, dest))
                    dest += 1
        return out

    def close(self) -> None:
        """Closes the socket (the Manager then releases this session after drain), then unmaps."""
        self._fail(ConnectionError("the client closed the connection"))
        if threading.current_thread() is not self._reader:
            self._reader.join(self.timeout)
        for m in self._arenas + self._regions:
            try:
                m.close()
            except BufferError:
                pass  # a view is still exported; the mapping goes when it is dropped
        self._arenas, self._written, self._regions = [], [], []

    # -- reader thread -------------------------------------------------------------------------

    def _registration(self) -> p.Registered:
        if self.registered is None:
            raise RuntimeError("not registered")
        return self.registered

    def _read_until(self, waiter: _Waiter, timeout: float) -> None:
        """Returns once ``waiter`` is done or ``timeout`` s have passed: reads the socket itself
        while the read lock is free, else sleeps as a follower until the holder dispatches its
        answer or hands it the read role. A thread that finds the lock held registers as a
        follower and tries once more before it sleeps, and a holder releases the lock before it
        looks for a follower, so the role is never dropped while someone waits; a caller alone
        on the connection takes the lock at the first try and never registers."""
        deadline = time.monotonic() + timeout
        while not waiter.done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            leader = self._read_lock.acquire(blocking=False)
            if not leader:
                with self._followers_lock:
                    self._followers[waiter] = None
                leader = self._read_lock.acquire(blocking=False)
                if leader:
                    with self._followers_lock:
                        self._followers.pop(waiter, None)
            if leader:
                try:
                    while not waiter.done and self._failure is None:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0 or not self._read_poll.poll(max(1, int(remaining * 1000))):
                            break
                        self._read_available()
                finally:
                    self._read_lock.release()
                    if self._followers:
                        self._hand_over()
                continue
            waiter.sleep(remaining)  # until answered, or handed the read role: then try the lock again
            with self._followers_lock:
                self._followers.pop(waiter, None)
        if self._followers and not self._read_lock.locked():
            self._hand_over()  # the role may have been handed to this waiter as it was answered

    def _hand_over(self) -> None:
        """Wakes the longest-waiting follower to take the read role (the lock is free)."""
        with self._followers_lock:
            for follower in self._followers:
                del self._followers[follower]
                follower.wake()
                return

    def _read_loop(self) -> None:
        """The idle reader: every ``_IDLE_READ_S`` reads what arrived while no caller was reading
        (see the module header); ends with the connection."""
        while not self._closed.wait(_IDLE_READ_S):
            if self._read_lock.acquire(blocking=False):
                try:
                    if self._failure is None and self._read_poll.poll(0):
                        self._read_available()
                finally:
                    self._read_lock.release()
                    if self._followers:
                        self._hand_over()

    def _read_available(self) -> None:
        """Reads what the socket holds now without blocking and dispatches every whole frame, in
        order; a lost connection or a bad frame fails the client. Caller holds ``_read_lock``."""
        try:
            chunk = self._sock.recv(_RECV_BYTES, socket.MSG_DONTWAIT)
            if not chunk:
                raise ConnectionError("the Manager closed the connection")
            buf = self._inbound
            buf += chunk
            while True:
                result = self._decoder.decode(buf)
                if isinstance(result, p.NeedBytes):
                    break
                del buf[:result.consumed]
                self._dispatch(result.request_id, result.frame)
        except (BlockingIOError, InterruptedError):
            return
        except p.MalformedFrame as e:
            self._fail(ConnectionError(f"the Manager sent a bad frame: {e}"))
        except OSError as e:
            self._fail(e if isinstance(e, ConnectionError) else ConnectionError(str(e)))

    def _dispatch(self, request_id: int, frame) -> None:
        if request_id == p.NO_REQUEST:
            if isinstance(frame, p.Error):
                self._fail(OrbitKvError(frame.code, frame.message))
                return
            self._operations.on_frame(frame)
            return
        with self._pending_lock:
            waiter = self._pending.pop(request_id, None)
        self._operations.on_frame(frame)
        if waiter is not None:
            waiter.set(frame)

    def _fail(self, error: BaseException) -> None:
        self._closed.set()
        with self._pending_lock:
            if self._failure is None:
                self._failure = error
            pending, self._pending = self._pending, {}
        for w in pending.values():
            w.set(error=self._failure)
        self._operations.fail_all(self._failure)
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


def _exchange(socket_path: str, request: bytes, send_fds: Sequence[int], max_fds: int,
              timeout: float) -> Tuple[p.ExchangeReply, List[int]]:
    """One descriptor socket exchange (protocol 6.11): returns the reply and the descriptors it
    carried (the caller's to close). Raises OrbitKvError for a refusal the Manager answered,
    ConnectionError for a transport failure; no descriptor leaks either way."""
    received: List[int] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(socket_path)
            if send_fds:
                socket.send_fds(s, [request], list(send_fds))
            else:
                s.sendall(request)
            reply = b""
            while len(reply) < p.EXCHANGE_BYTES:
                data, fds, flags, _ = socket.recv_fds(s, p.EXCHANGE_BYTES - len(reply), max(1, max_fds))
                received.extend(fds)
                if flags & socket.MSG_CTRUNC:
                    raise ConnectionError("the descriptor socket sent more descriptors than announced")
                if not data:
                    raise ConnectionError(f"the descriptor socket closed after {len(reply)} bytes of its reply")
                reply += data
            decoded = p.decode_exchange_reply(reply)
            if decoded.error_code != 0:
                try:
                    code = p.ErrorCode(decoded.error_code)
                except ValueError:
                    code = p.ErrorCode.INTERNAL
                raise OrbitKvError(code, f"the descriptor socket refused the request (error code {decoded.error_code})")
            return decoded, received
        except BaseException:
            for fd in received:
                os.close(fd)
            raise


def fetch_arenas(socket_path: str, ticket: bytes, expected: int, timeout: float) -> List[int]:
    """Redeems REGISTERED's ``ticket``: exactly ``expected`` arena descriptors, in arena order."""
    reply, fds = _exchange(socket_path, p.arenas_request(ticket), (), expected, timeout)
    if reply.fd_count != expected or len(fds) != expected:
        for fd in fds:
            os.close(fd)
        raise ConnectionError(f"the descriptor socket sent {len(fds)} descriptors (fd_count {reply.fd_count}), "
                              f"REGISTERED announced {expected} arenas")
    return fds


def hand_over_region(socket_path: str, fd: int, timeout: float) -> bytes:
    """Hands the region descriptor ``fd`` (still the caller's) to the Manager; the 16-byte handle."""
    reply, fds = _exchange(socket_path, p.region_request(), (fd,), 0, timeout)
    for extra in fds:
        os.close(extra)
    if reply.handle is None:
        raise ConnectionError("the descriptor socket answered a region with no handle")
    return reply.handle
