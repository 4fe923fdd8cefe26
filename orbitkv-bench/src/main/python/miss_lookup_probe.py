"""Where a missing lookup's time goes from Python: the pages layer, the bare client, the frame
encoding, and a Unix-socket echo read on the calling thread or through a reader thread.

Starts one Manager (``ORBITKV_JAR``; ``JAVA``, default ``java``, must be a JDK 25), warms it with
12,000 QUERYs, then prints medians of, interleaved round by round: ``ManagerPages.lookup`` of one
never-stored name (QUERY, FINAL miss, its operation ended), the client's bare ``Client.query`` of
one such name, and the same QUERY frame encoded ahead and its reply read inline on a connection of
its own; then ``present_each`` of 8 names of which 4 are stored (LMCache's exists); then encoding
one QUERY frame, and a 200-byte echo over a Unix socket pair of processes,
read directly and through a reader thread that wakes the caller with an ``Event``. Stdlib only;
about 20 s.

usage: ORBITKV_JAR=orbitkv-server/target/orbitkv.jar PYTHONPATH=clients/python python3 miss_lookup_probe.py
"""

from __future__ import annotations

import os
import socket
import statistics
import threading
import time

from bench_manager import ManagerProcess
from orbitkv import protocol as p
from orbitkv.pages import ManagerPages
from orbitkv.state import Namespace

ROUNDS = 2000
WARM_UP = 12000


def median_us(samples) -> float:
    return statistics.median(samples) * 1e6


class RawConnection:
    """A registered connection of its own, frames encoded ahead and replies read on the calling
    thread (no client): the Manager's round trip as Python can see it."""

    def __init__(self, sock_path: str, namespace, contract):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sock_path)
        self.decoder = p.FrameDecoder(p.DEFAULT_LIMITS, p.Direction.TO_CLIENT)
        self.buf = bytearray()
        self.sock.sendall(p.encode(1, p.Register("raw-probe", time.time_ns() // 1000, namespace, contract)))
        self.frames(1)

    def frames(self, wanted: int) -> None:
        got = 0
        while got < wanted:
            result = self.decoder.decode(self.buf)
            if isinstance(result, p.NeedBytes):
                self.buf.extend(self.sock.recv(65536))
                continue
            del self.buf[:result.consumed]
            got += 1

    def query_then_release(self, op: int, name: bytes) -> float:
        """One QUERY of ``name`` timed to its reply, then its RELEASE (waited for, untimed)."""
        query = p.encode(2 * op, p.Query(op, 0, p.CompletionTarget.HOST_READY, 17, 0,
                                         [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [name])]))
        release = p.encode(2 * op + 1, p.Release(op))
        start = time.perf_counter()
        self.sock.sendall(query)
        self.frames(1)
        took = time.perf_counter() - start
        self.sock.sendall(release)
        self.frames(1)
        return took


def manager_split() -> None:
    """Warms the Manager's JIT first (its missing-QUERY round trip falls from ~140 to ~40 us over
    the first ~10,000 QUERYs), then interleaves the three kinds round by round, so each sees the
    same Manager."""
    manager = ManagerProcess(["--dram-bytes", "256m", "--ssd-bytes", "64m"], prefix="miss-probe.")
    try:
        sock = manager.socket
        pages = ManagerPages(sock, Namespace("probe", "r", "sha256:w", "sha256:t", "", "bf16", "nhd", 16,
                                             1, 0, 1, 0, 1))
        pages.lookup([os.urandom(32)])
        client = pages._client
        raw = RawConnection(sock, pages.namespace, pages.contract)
        for op in range(1, WARM_UP + 1):
            raw.query_then_release(op, os.urandom(32))
        stored = [os.urandom(32) for _ in range(4)]
        pages.write([(name, bytes(64 * 1024)) for name in stored])
        lookups, queries, raws, each = [], [], [], []
        for i in range(ROUNDS):
            name = os.urandom(32)
            start = time.perf_counter()
            pages.lookup([name])  # a FINAL miss closes itself
            lookups.append(time.perf_counter() - start)
            op = 1 << 40 | i
            start = time.perf_counter()
            client.query(op, {0: [os.urandom(32)]}, prompt_tokens=17)
            queries.append(time.perf_counter() - start)
            client.release_nowait([op])
            raws.append(raw.query_then_release(WARM_UP + 1 + i, os.urandom(32)))
        for _ in range(ROUNDS):  # after the others: its RELEASEs' replies would be read by their calls
            start = time.perf_counter()
            found = pages.present_each(stored + [os.urandom(32) for _ in range(4)])
            each.append(time.perf_counter() - start)
            if found != [True] * 4 + [False] * 4:
                raise RuntimeError(f"present_each answered {found}")
        start = time.perf_counter()
        for _ in range(ROUNDS):
            p.encode(5, p.Query(1, 0, p.CompletionTarget.HOST_READY, 17, 0,
                                [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [name])]))
        encode = (time.perf_counter() - start) / ROUNDS
        raw.sock.close()
        pages.close()
        print(f"ManagerPages.lookup, one missing name: p50 {median_us(lookups):.1f} us")
        print(f"Client.query, one missing name:        p50 {median_us(queries):.1f} us")
        print(f"raw QUERY frame, reply read inline:     p50 {median_us(raws):.1f} us")
        print(f"present_each, 8 names of which 4 stored: p50 {median_us(each):.1f} us")
        print(f"encoding one QUERY frame:               {encode * 1e6:.1f} us")
    finally:
        manager.stop()


def echo_split() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        ours.close()
        while True:
            data = theirs.recv(65536)
            if not data:
                os._exit(0)
            theirs.sendall(data)
    theirs.close()
    msg = b"x" * 200
    direct = []
    for _ in range(ROUNDS + 500):
        start = time.perf_counter()
        ours.sendall(msg)
        got = 0
        while got < len(msg):
            got += len(ours.recv(65536))
        direct.append(time.perf_counter() - start)
    box = {}

    def reader() -> None:
        while True:
            try:
                data = ours.recv(65536)
            except OSError:  # closed at the end
                return
            if not data:
                return
            box["event"].set()
    threading.Thread(target=reader, daemon=True).start()
    handed = []
    for _ in range(ROUNDS + 500):
        event = threading.Event()
        box["event"] = event
        start = time.perf_counter()
        ours.sendall(msg)
        event.wait()
        handed.append(time.perf_counter() - start)
    ours.shutdown(socket.SHUT_RDWR)
    ours.close()
    os.waitpid(pid, 0)
    print(f"UDS echo, read on the calling thread:   p50 {median_us(direct[500:]):.1f} us")
    print(f"UDS echo, through a reader thread:      p50 {median_us(handed[500:]):.1f} us")


if __name__ == "__main__":
    manager_split()
    echo_split()
