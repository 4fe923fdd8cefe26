"""What a round trip costs by where its two threads run: the missing QUERY of ``bin/bench-manager``
(1,024 never-stored 32-byte names, reply read inline on the caller's thread) and a 32 KiB echo
between two processes, each with the client and the server pinned to the same vCPU, to different
vCPUs, and left to the scheduler.

On a VM whose idle vCPUs halt at once (``cpuidle`` driver ``haltpoll`` with
``haltpoll.guest_halt_poll_ns=0``, as here), a wake-up of a thread on the other, idle vCPU waits
for the host to run that vCPU again; a round trip has two. This probe puts a number on it, so a
latency target can be read against the placement it was measured under.

Starts one Manager (``ORBITKV_JAR``; ``JAVA``, a JDK 25) with ``taskset`` re-pinning every one of
its threads per arm, and forks the echo server. Each arm warms up first (the Manager's JIT: 12,000
QUERYs before the first arm, 3,000 before each), then takes the median of ``ROUNDS`` round trips.
Prints one Markdown table. Needs at least 2 CPUs and ``taskset`` (util-linux). About a minute.

usage: ORBITKV_JAR=orbitkv-server/target/orbitkv.jar PYTHONPATH=clients/python \\
       python3 placement_probe.py [ROUNDS]
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time

from bench_manager import ManagerProcess
from miss_lookup_probe import RawConnection
from orbitkv import protocol as p
from orbitkv.state import FullGroup, Namespace, RecoveryContract

NAMES = 1024
ECHO_REQUEST = 32 * 1024 + 68  # a QUERY frame of 1,024 names
ECHO_REPLY = 61  # a FINAL miss's QUERY_RESULT
ARMS = (("same vCPU", 0, 0), ("different vCPUs", 0, 1), ("left to the scheduler", None, None))


def pin(pid: int, cpu) -> None:
    """Every thread of ``pid`` on ``cpu`` (None: all CPUs)."""
    cpus = f"{cpu}" if cpu is not None else f"0-{os.cpu_count() - 1}"
    subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], stdout=subprocess.DEVNULL, check=True)


def pin_self(cpu) -> None:
    os.sched_setaffinity(0, {cpu} if cpu is not None else set(range(os.cpu_count())))


class MissingQuery:
    """QUERY frames of never-stored names on a registered connection of its own, each followed by
    its RELEASE (waited for, untimed)."""

    def __init__(self, sock_path: str):
        namespace = Namespace("placement", "r", "sha256:w", "sha256:t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1)
        self.raw = RawConnection(sock_path, namespace, RecoveryContract(16, [FullGroup(0)]))
        self.op = 0

    def round_trip(self) -> float:
        self.op += 1
        names = [os.urandom(32) for _ in range(NAMES)]
        query = p.encode(2 * self.op, p.Query(self.op, 0, p.CompletionTarget.HOST_READY, NAMES * 16 + 1, 0,
                                              [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, names)]))
        release = p.encode(2 * self.op + 1, p.Release(self.op))
        start = time.perf_counter()
        self.raw.sock.sendall(query)
        self.raw.frames(1)
        took = time.perf_counter() - start
        self.raw.sock.sendall(release)
        self.raw.frames(1)
        return took


def echo_server(sock: socket.socket) -> None:
    while True:
        head = sock.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            os._exit(0)
        sock.recv(int.from_bytes(head, "little") - 4, socket.MSG_WAITALL)
        sock.sendall(bytes(ECHO_REPLY))


def echo_round_trip(sock: socket.socket, request: bytes) -> float:
    start = time.perf_counter()
    sock.sendall(request)
    got = 0
    while got < ECHO_REPLY:
        got += len(sock.recv(ECHO_REPLY - got))
    return time.perf_counter() - start


def median_us(samples) -> float:
    return statistics.median(samples) * 1e6


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    if (os.cpu_count() or 1) < 2:
        print("placement_probe: needs at least 2 CPUs", file=sys.stderr)
        return 2
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    echo_pid = os.fork()
    if echo_pid == 0:
        ours.close()
        echo_server(theirs)
    theirs.close()
    request = ECHO_REQUEST.to_bytes(4, "little") + bytes(ECHO_REQUEST - 4)
    manager = ManagerProcess(["--dram-bytes", "256m", "--ssd-bytes", "64m"], prefix="placement-probe.")
    rows = []
    try:
        query = MissingQuery(manager.socket)
        for _ in range(12000):
            query.round_trip()
        for name, client_cpu, server_cpu in ARMS:
            pin(manager.proc.pid, server_cpu)
            pin(echo_pid, server_cpu)
            pin_self(client_cpu)
            for _ in range(3000):
                query.round_trip()
                echo_round_trip(ours, request)
            queries, echoes = [], []
            for _ in range(rounds):  # interleaved, so both see the same moment of the machine
                queries.append(query.round_trip())
                echoes.append(echo_round_trip(ours, request))
            rows.append((name, median_us(queries), median_us(echoes)))
        query.raw.sock.close()
    finally:
        pin_self(None)
        manager.stop()
        ours.close()
        os.waitpid(echo_pid, 0)
    print(f"| placement (client, server) | missing QUERY of {NAMES} names p50 µs | echo {ECHO_REQUEST} B → {ECHO_REPLY} B p50 µs |")
    print("|---|---|---|")
    for name, q, e in rows:
        print(f"| {name} | {q:.1f} | {e:.1f} |")
    print(f"({rounds} round trips each, interleaved; load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
