"""Preparation on and off under a queue of requests whose prefixes are on SSD only (bin/bench-prepare).

Run with a python that imports ``orbitkv`` (``PYTHONPATH=clients/python``), ``ORBITKV_JAR`` and
``JAVA_HOME`` set:

    python prepare_bench.py OUT_DIR [--requests 160] [--pages 16] [--rate 25] [--compute-ms 20]
                                    [--abandon 0.1] [--arms off,on,deadline] [--rounds 2] [--seed N]

Setup, once: a Manager (write-through SSD, 64 KiB slots) gets ``requests`` distinct prefixes of
``pages`` pages of 64 KiB published, waits until every page is on SSD, and stops. Each arm then
starts a fresh Manager over that SSD store (so every prefix is on SSD only, none in DRAM) and
serves the same seeded open-loop workload:

- **arrivals**: Poisson at ``rate`` per second, request ``i`` asking for prefix ``i``; a fraction
  ``abandon`` of them leave the queue before they are served (a client that gave up);
- **engine**: one thread serving the queue first come first served; per request a QUERY
  (HOST_READY) over its prefix, waiting for COMPLETION QUERY_SETTLED when PENDING (staged from
  SSD), a copy of every leased page out of the arena, RELEASE, then ``compute-ms`` standing in for
  the prefill of the prompt's suffix and the first token. TTFT is from the request's arrival to
  the end of that (arrival-timed: queueing included, never reset at admission).

Arms: ``off`` sends no PREPARE; ``on`` sends PREPARE at arrival with first use 0 (stage at once),
written without waiting, and the QUERY reuses its operation id (it takes the prepare over, protocol
9.4); ``deadline`` is ``on`` with first use estimated at arrival as (requests queued ahead + 1) ×
the measured mean service time, so the Manager starts the reads that long ahead minus its own read
estimate. An abandoned request's prepare is cancelled when it is dequeued. Arms run interleaved,
``rounds`` times, each on a fresh Manager over the same SSD store.

Per arm (rounds pooled): TTFT p50 / p99 of the served requests, the fraction whose QUERY was FINAL
at once, prepared pages and how they ended (consumed, unused = cancelled, expired: the Manager's
``orbitkv_prepare_pages_*``), the prepared-but-unused fraction ((unused + expired) / prepared), and
SSD bytes read (``orbitkv_ssd_read_bytes_total``) against the off arm's. Writes ``prepare.md``
(the table), ``prepare-requests.csv`` and the Managers' logs into OUT_DIR; prints the table.
"""

import argparse
import csv
import hashlib
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from collections import deque

from bench_manager import ManagerProcess
from orbitkv import protocol as p
from orbitkv.client import Client
from orbitkv.identity import EngineIdentity
from orbitkv.pages import ManagerPages
from orbitkv.state import FullGroup, RecoveryContract

PAGE_BYTES = 64 * 1024
PAGE_TOKENS = 16
MANAGER_ARGS = ["--dram-bytes", "128m", "--ssd-bytes", "512m", "--set", "dramSlotBytes=64k"]


class Manager(ManagerProcess):
    """A Manager process over ``ssd_dir`` (kept), with its own DRAM dir and socket (removed)."""

    def __init__(self, ssd_dir, log_path, *extra):
        region_dir = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        super().__init__([*MANAGER_ARGS, "--set", "regionDir=" + region_dir, *extra], log_path=log_path,
                         ssd_dir=ssd_dir, prefix="okv-prep-")

    def metric(self, name, label=""):
        with urllib.request.urlopen(f"http://{self.http}/metrics", timeout=10) as r:
            text = r.read().decode()
        return sum(float(m.group(2)) for m in re.finditer(r"^" + re.escape(name) + r"(\{[^}]*\})?\s+(\S+)",
                                                          text, re.MULTILINE) if label in (m.group(1) or ""))


def namespace():
    return EngineIdentity(model_id="bench/prepare", dtype="bfloat16", kv_dtype="auto", page_tokens=PAGE_TOKENS,
                          kv_layout="bench:flat").namespace()


def page_names(prefix, pages):
    return [hashlib.sha256(f"prefix {prefix} page {i}".encode()).digest() for i in range(pages)]


def page_image(prefix, i):
    return bytes([(prefix * 31 + i) % 251]) * PAGE_BYTES


def publish(ssd_dir, out_dir, requests, pages):
    """Publishes every prefix through a write-through Manager and waits until all are on SSD."""
    m = Manager(ssd_dir, os.path.join(out_dir, "manager-setup.log"), "--ssd-policy", "write-through")
    store = ManagerPages(m.socket, namespace(), timeout_s=20)
    try:
        batch, published = [], 0
        for prefix in range(requests):
            batch += [(n, page_image(prefix, i)) for i, n in enumerate(page_names(prefix, pages))]
            while len(batch) >= 32 or (prefix == requests - 1 and batch):
                chunk, deadline = batch[:32], time.monotonic() + 60
                while not all(store.write(chunk)):  # NO_SPACE while the SSD writer catches up
                    if time.monotonic() > deadline:
                        raise RuntimeError("publishing stalled")
                    time.sleep(0.05)
                batch = batch[32:]
                published += len(chunk)
                # one batch's SSD copies at a time: a full write-through queue skips pages
                wait_until(lambda: m.metric("orbitkv_ssd_writes_total") >= published, "write-through copies")
        if m.metric("orbitkv_publish_ssd_skipped_total") > 0:
            raise RuntimeError("some pages were not written to SSD")
    finally:
        store.close()
        m.stop()


def wait_until(condition, what, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Arm:
    """One arm's run on its own Manager: arrivals thread, engine thread, counters."""

    def __init__(self, name, manager, args, schedule, abandoned):
        self.name, self.m, self.args = name, manager, args
        self.schedule, self.abandoned = schedule, abandoned
        self.client = Client(manager.socket, timeout=20)
        ns = namespace()
        self.client.register(f"bench-{name}", time.time_ns() // 1000, ns, RecoveryContract(PAGE_TOKENS, [FullGroup(0)]))
        self.queue = deque()
        self.cond = threading.Condition()
        self.done_arriving = False
        self.mean_service_s = args.compute_ms / 1000 + 0.01  # an initial guess, then measured
        self.rows = []

    def prepare(self, i, queued_ahead):
        if self.name == "off":
            return 0
        first_use_ms = 0
        if self.name == "deadline":
            first_use_ms = int((queued_ahead + 1) * self.mean_service_s * 1000)
        names = page_names(i, self.args.pages)
        self.client.send(p.Prepare(i + 1, first_use_ms, 0, len(names) * PAGE_TOKENS + 1, 0,
                                   [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, names)]))
        return i + 1

    def arrivals(self, start):
        for i, at in enumerate(self.schedule):
            delay = start + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            arrived = time.monotonic()
            with self.cond:
                ahead = len(self.queue)
            op = self.prepare(i, ahead)
            with self.cond:
                self.queue.append((i, arrived, op))
                self.cond.notify()
        with self.cond:
            self.done_arriving = True
            self.cond.notify()

    def engine(self):
        served = 0
        while True:
            with self.cond:
                while not self.queue and not self.done_arriving:
                    self.cond.wait()
                if not self.queue:
                    return
                i, arrived, op = self.queue.popleft()
            if i in self.abandoned:
                if op:
                    self.client.cancel_nowait(op)
                continue
            began = time.monotonic()
            names = page_names(i, self.args.pages)
            query_op = op or (1_000_000 + i)
            result = self.client.query(query_op, {0: names}, prompt_tokens=len(names) * PAGE_TOKENS + 1)
            pending = result.status == p.QueryStatus.PENDING
            result = self.client.wait_settled(result)
            got = 0
            if result.hit:
                for _, page in result.group(0).pages():
                    view = self.client.read_lease(page.lease)
                    got += len(bytes(view))
                    view.release()
            self.client.release(query_op)
            time.sleep(self.args.compute_ms / 1000)  # the suffix's prefill and the first token
            ended = time.monotonic()
            served += 1
            service = ended - began
            self.mean_service_s += (service - self.mean_service_s) / min(served, 20)
            self.rows.append({"arm": self.name, "request": i, "ttft_ms": (ended - arrived) * 1000,
                              "wait_ms": (began - arrived) * 1000, "service_ms": service * 1000,
                              "pending": int(pending), "hit_pages": got // PAGE_BYTES})

    def run(self):
        ssd0 = self.m.metric("orbitkv_ssd_read_bytes_total")
        start = time.monotonic() + 0.2
        threads = [threading.Thread(target=self.arrivals, args=(start,)), threading.Thread(target=self.engine)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:  # every prepare ends (consumed, cancelled, expired)
            wait_until(lambda: self.m.metric("orbitkv_manager_prepares") == 0
                       and self.m.metric("orbitkv_manager_speculation_held_bytes") == 0, "prepares to end", 30)
        except RuntimeError:
            pass  # reported as held_after
        out = {"ssd_read_bytes": self.m.metric("orbitkv_ssd_read_bytes_total") - ssd0,
               "held_after": self.m.metric("orbitkv_manager_speculation_held_bytes"),
               "leases_after": self.m.metric("orbitkv_manager_leases")}
        out["prepared"] = self.m.metric("orbitkv_prepare_pages_prepared_total")
        for outcome in ("consumed", "unused", "expired"):
            out[outcome] = self.m.metric("orbitkv_prepare_pages_released_total", f'outcome="{outcome}"')
        self.client.close()
        return out


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--requests", type=int, default=160)
    ap.add_argument("--pages", type=int, default=16)
    ap.add_argument("--rate", type=float, default=25.0)
    ap.add_argument("--compute-ms", type=float, default=20.0)
    ap.add_argument("--abandon", type=float, default=0.1)
    ap.add_argument("--arms", default="off,on,deadline")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20261206)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    arms = args.arms.split(",")
    rng = random.Random(args.seed)
    schedule, at = [], 0.0
    for _ in range(args.requests):
        at += rng.expovariate(args.rate)
        schedule.append(at)
    abandoned = {i for i in range(args.requests) if rng.random() < args.abandon}

    load0 = os.getloadavg()
    started = time.monotonic()
    ssd_dir = tempfile.mkdtemp(prefix="okv-prep-ssd-", dir=os.environ.get("ORBITKV_BENCH_SSD_PARENT"))
    try:
        publish(ssd_dir, args.out_dir, args.requests, args.pages)
        setup_s = time.monotonic() - started
        totals = {a: {"rows": [], "runs": []} for a in arms}
        for r in range(args.rounds):
            for a in arms:
                m = Manager(ssd_dir, os.path.join(args.out_dir, f"manager-{a}-{r}.log"))
                try:
                    arm = Arm(a, m, args, schedule, abandoned)
                    totals[a]["runs"].append(arm.run())
                    totals[a]["rows"] += arm.rows
                finally:
                    m.stop()
    finally:
        shutil.rmtree(ssd_dir, ignore_errors=True)
    load1 = os.getloadavg()
    elapsed = time.monotonic() - started

    with open(os.path.join(args.out_dir, "prepare-requests.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["arm", "request", "ttft_ms", "wait_ms", "service_ms", "pending", "hit_pages"])
        w.writeheader()
        for a in arms:
            w.writerows(totals[a]["rows"])

    def total(a, key):
        return sum(run[key] for run in totals[a]["runs"])

    base_ssd = total("off", "ssd_read_bytes") if "off" in arms else None
    lines = ["| arm | served | TTFT p50 | TTFT p99 | FINAL at once | service p50 | prepared pages | consumed "
             "| unused | expired | prepared-but-unused | SSD MiB read | extra SSD MiB vs off |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for a in arms:
        rows = totals[a]["rows"]
        ttft = [x["ttft_ms"] for x in rows]
        prepared = total(a, "prepared")
        unused = total(a, "unused") + total(a, "expired")
        ssd = total(a, "ssd_read_bytes")
        lines.append("| {} | {} | {:.1f} ms | {:.1f} ms | {:.0%} | {:.1f} ms | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {} | {:.1f} "
                     "| {} |".format(
                         a, len(rows), pct(ttft, 0.5), pct(ttft, 0.99),
                         sum(1 for x in rows if not x["pending"]) / max(1, len(rows)),
                         pct([x["service_ms"] for x in rows], 0.5), prepared, total(a, "consumed"),
                         total(a, "unused"), total(a, "expired"),
                         f"{unused / prepared:.1%}" if prepared else "-", ssd / 2 ** 20,
                         f"{(ssd - base_ssd) / 2 ** 20:+.1f}" if base_ssd is not None else "-"))
    leftover = [(a, run["held_after"], run["leases_after"]) for a in arms for run in totals[a]["runs"]
                if run["held_after"] or run["leases_after"]]
    lines.append("")
    lines.append(f"{args.requests} requests ({len(abandoned)} abandoned while queued) × {args.rounds} rounds per arm, "
                 f"{args.pages} pages of 64 KiB each, Poisson {args.rate:g}/s, compute {args.compute_ms:g} ms; "
                 f"setup {setup_s:.0f} s, total {elapsed:.0f} s; load average {load0[0]:.1f} before, {load1[0]:.1f} after; "
                 f"speculation bytes or leases left after a run: {leftover or 'none'}.")
    table = "\n".join(lines)
    with open(os.path.join(args.out_dir, "prepare.md"), "w") as f:
        f.write(table + "\n")
    print(table)
    return 1 if leftover else 0


if __name__ == "__main__":
    sys.exit(main())
