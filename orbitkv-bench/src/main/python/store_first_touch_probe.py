"""A store into slots a namespace has never written, split into its steps: PUBLISH_RESERVE's round
trip, the copy into the granted slots (with the page faults it takes), PUBLISH_COMMIT's round trip.

What runs: one Manager (``--dram-bytes 6g``, ``ssdPolicy`` on-evict, as ``bin/bench-lmcache``), then
``--namespaces`` fresh namespaces one after another, each a new ``ManagerPages`` writing ``--rounds``
stores of ``--pages`` pages of ``--page-kib`` KiB with fresh names. A fresh namespace's arena files
(one memfd per size class) hold no pages yet, so every copy allocates and zeroes the kernel pages it
writes; the 6 GiB tier is never full, so no slot is reused. This is the condition of each
``lmcache bench l2`` run of ``bin/bench-lmcache`` (a fresh namespace per run). Prints medians in ms.

usage: store_first_touch_probe.py [--page-kib 256] [--pages 8] [--rounds 300] [--namespaces 3]
needs: ORBITKV_JAR (the Manager jar), PYTHONPATH with clients/python. About 20 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from bench_manager import ManagerProcess
from orbitkv import protocol as p
from orbitkv.client import PageToPublish
from orbitkv.pages import ManagerPages
from orbitkv.state import Namespace
from store_split_probe import copy_into, faults


def main(argv) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--page-kib", type=int, default=256)
    ap.add_argument("--pages", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--namespaces", type=int, default=3)
    args = ap.parse_args(argv)
    size = args.page_kib << 10
    source = os.urandom(size * args.pages)
    views = [memoryview(source)[i * size:(i + 1) * size] for i in range(args.pages)]
    names = (i.to_bytes(8, "little") * 4 for i in range(1, 1 << 62))
    manager = ManagerProcess(["--dram-bytes", "6g", "--ssd-bytes", "256m", "--ssd-policy", "on-evict"],
                             prefix="first-touch.")
    print(f"| namespace | reserve round trip | copy into fresh slots | page faults per copy | commit round trip |")
    print("|---|---|---|---|---|")
    try:
        for n in range(args.namespaces):
            store = ManagerPages(manager.socket, Namespace(f"first-touch-{n}", "r", "sha256:w", "sha256:t", "", "bf16",
                                                           "nhd", 16, 1, 0, 1, 0, 1))
            try:
                client = store._connected()
                steps = {"reserve": [], "copy": [], "faults": [], "commit": []}
                for _ in range(args.rounds):
                    pages = [PageToPublish(0, next(names), v) for v in views]
                    t0 = time.perf_counter()
                    reserved = client.call(p.PublishReserve([pg.entry() for pg in pages], None), p.Reserved)
                    t1, f0 = time.perf_counter(), faults()
                    copy_into(client, pages, reserved)
                    t2, f1 = time.perf_counter(), faults()
                    client.call(p.PublishCommit([o.reservation_id for o in reserved.outcomes]), p.Committed)
                    t3 = time.perf_counter()
                    for key, value in (("reserve", t1 - t0), ("copy", t2 - t1), ("commit", t3 - t2)):
                        steps[key].append(value * 1e3)
                    steps["faults"].append(f1 - f0)
                med = {k: statistics.median(v) for k, v in steps.items()}
                print(f"| {n} | {med['reserve']:.3f} | {med['copy']:.3f} | {med['faults']:.0f} | {med['commit']:.3f} |")
            finally:
                store.close()
    finally:
        manager.stop()
    print(f"medians of {args.rounds} stores of {args.pages} x {args.page_kib} KiB per namespace, ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
