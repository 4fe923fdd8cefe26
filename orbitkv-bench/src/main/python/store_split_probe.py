"""A Python store split into its steps: PUBLISH_RESERVE's round trip, the copy into the granted
slots (and the same copy again, into the same slots), PUBLISH_COMMIT's round trip, next to
``ManagerPages.write`` whole and a memcpy into one touched destination.

What runs: one Manager (``--dram-bytes 1g``, ``ssdPolicy`` from ``--ssd-policy``, default on-evict
as ``bin/bench-tier``), one ``ManagerPages`` store. Per (page size, pages per write): a warm-up
writes twice the slots of the class (every slot touched once, stores evict as in a full cache),
then ``--rounds`` rounds of: memcpy of the pages into one touched mapping; PUBLISH_RESERVE,
copy into the granted slots, the same copy again, PUBLISH_COMMIT, each timed (the client's own
calls, as ``ManagerPages.write`` makes them); then one ``ManagerPages.write`` of fresh names.
Page faults during the copies (``ru_minflt + ru_majflt``) are counted. Prints medians in ms.

usage: store_split_probe.py [--rounds 60] [--sizes-kib 256,2048] [--jobs 1,8] [--ssd-policy P]
needs: ORBITKV_JAR (the Manager jar), PYTHONPATH with clients/python. About 30 s.
"""

from __future__ import annotations

import argparse
import mmap
import os
import resource
import statistics
import sys
import time

from bench_manager import ManagerProcess
from orbitkv import protocol as p
from orbitkv.client import PageToPublish
from orbitkv.pages import ManagerPages
from orbitkv.state import Namespace


def faults() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt


def copy_into(client, pages, reserved) -> None:
    for page, outcome in zip(pages, reserved.outcomes):
        if not isinstance(outcome, p.Granted):
            raise RuntimeError(f"a reserve was refused: {outcome}")
        client._arenas[outcome.arena_index][outcome.offset_bytes:outcome.offset_bytes + len(page.data)] = page.data


def probe(store: ManagerPages, size: int, jobs: int, rounds: int, next_name) -> str:
    src = mmap.mmap(-1, size * jobs, mmap.MAP_SHARED)
    src[:] = os.urandom(size * jobs)
    dst = mmap.mmap(-1, size * jobs, mmap.MAP_SHARED)
    dst[:] = b"\x01" * (size * jobs)
    sv, dv = memoryview(src), memoryview(dst)
    views = [sv[i * size:(i + 1) * size] for i in range(jobs)]
    for _ in range(2 * (1 << 30) // size // jobs + 2):
        if not all(store.write([(next_name(), v) for v in views])):
            raise RuntimeError("a warm-up write was refused")
    client = store._connected()
    steps = {k: [] for k in ("memcpy", "reserve", "copy", "copy_again", "commit", "write")}
    copy_faults = []
    for _ in range(rounds):
        start = time.perf_counter()
        for i, v in enumerate(views):
            dv[i * size:(i + 1) * size] = v
        steps["memcpy"].append(time.perf_counter() - start)
        pages = [PageToPublish(0, next_name(), v) for v in views]
        t0 = time.perf_counter()
        reserved = client.call(p.PublishReserve([pg.entry() for pg in pages], None), p.Reserved)
        t1, f0 = time.perf_counter(), faults()
        copy_into(client, pages, reserved)
        t2, f1 = time.perf_counter(), faults()
        copy_into(client, pages, reserved)
        t3 = time.perf_counter()
        client.call(p.PublishCommit([o.reservation_id for o in reserved.outcomes]), p.Committed)
        t4 = time.perf_counter()
        for key, value in (("reserve", t1 - t0), ("copy", t2 - t1), ("copy_again", t3 - t2), ("commit", t4 - t3)):
            steps[key].append(value)
        copy_faults.append(f1 - f0)
        start = time.perf_counter()
        if not all(store.write([(next_name(), v) for v in views])):
            raise RuntimeError("a write was refused")
        steps["write"].append(time.perf_counter() - start)
    for v in views:
        v.release()
    sv.release()
    dv.release()
    src.close()
    dst.close()
    med = {k: statistics.median(v) * 1e3 for k, v in steps.items()}
    label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
    return (f"| {label} | {jobs} | {med['memcpy']:.3f} | {med['reserve']:.3f} | {med['copy']:.3f} "
            f"({statistics.median(copy_faults):.0f}) | {med['copy_again']:.3f} | {med['commit']:.3f} | {med['write']:.3f} |")


def main(argv) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--sizes-kib", default="256,2048")
    ap.add_argument("--jobs", default="1,8")
    ap.add_argument("--ssd-policy", default="on-evict")
    args = ap.parse_args(argv)
    manager = ManagerProcess(["--dram-bytes", "1g", "--ssd-bytes", "256m", "--ssd-policy", args.ssd_policy],
                             prefix="store-split.")
    counter = iter(range(1, 1 << 62))
    store = ManagerPages(manager.socket, Namespace("probe", "r", "sha256:w", "sha256:t", "", "bf16", "nhd", 16,
                                                   1, 0, 1, 0, 1))
    lines = ["| page | pages per write | memcpy | reserve round trip | copy into the slots (faults) "
             "| same copy again | commit round trip | ManagerPages.write |", "|---|---|---|---|---|---|---|---|"]
    try:
        for kib in (int(s) for s in args.sizes_kib.split(",")):
            for jobs in (int(j) for j in args.jobs.split(",")):
                lines.append(probe(store, kib << 10, jobs, args.rounds,
                                   lambda: next(counter).to_bytes(8, "little") * 4))
    finally:
        store.close()
        manager.stop()
    print("\n".join(lines))
    print(f"medians of {args.rounds} rounds, ms; ssdPolicy {args.ssd_policy}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
