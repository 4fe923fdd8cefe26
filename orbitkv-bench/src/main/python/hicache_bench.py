"""SGLang's HiCache L3 storage through OrbitKV, against SGLang's own file backend on /dev/shm and a
memcpy of the same bytes, in one run.

What runs: one Manager process (started here, ``ssdPolicy=on-evict``: DRAM first), and, per page
size, two real ``HiCacheController`` s of the installed SGLang (0.5.23), each over its own CPU
device pool, page allocator and host pool (``MHATokenToKVPoolHost``, ``page_first``; 8 layers, 8
KV heads of 64, bfloat16: 16 KiB of KV per token, so a 16-token page is 256 KiB and a 128-token
page 2 MiB), one with ``OrbitKvHiCacheStorage`` attached (``dynamic``, ``interface_v1``: SGLang's
zero-copy calls ``batch_set_v1`` / ``batch_get_v1``), one with SGLang's ``HiCacheFile`` on a
directory in /dev/shm (SGLang's generic calls: ``batch_set`` of each page's data, ``batch_get``
into flat pages, then ``set_from_flat_data_page``). Each arm is timed through the controller's own
functions, the ones its backup and prefetch threads call for that backend: ``page_set_func`` (a
backup batch), ``storage_backend.batch_exists`` (the prefetch thread's hit query) and
``page_get_func`` (a prefetch batch into host slots). What does not run on a CPU is the
device<->host copy, common to both arms.

Per (page size, pages per batch), interleaved round by round so load on the shared machine hits
the arms alike:

- **memcpy**: the batch's pages (their K and V runs in the host pool) copied into a touched buffer
  of the same size (``memoryview`` slice assignment: one ``memmove`` per run);
- per backend, **store** of fresh keys, **exists** of the stored keys (must answer all of them),
  **load** into zeroed host slots; every loaded page is compared with what was stored (a wrong
  byte ends the run with status 1).

Before the rounds, the OrbitKV arm stores, asks for and loads twice the Manager's DRAM of that slot
class, so its stores run in steady state (a full cache recycles slots its namespace wrote before); the file arm
writes a new file per page as it always does. Missing lookups: ``batch_exists`` of one
never-stored key on each backend, median of ``--miss-lookups`` after ``--miss-warm-up`` more
(the Manager's QUERY path compiled).

Prints one Markdown table (medians and p90 per batch, GB/s, each backend's ratio to the memcpy:
time of the memcpy over time of the operation, 1.0 = as fast as the copy, the target >= 0.8; and
OrbitKV's speed-up over the file backend), then the missing-lookup line (target <= 50 us).

usage: hicache_bench.py OUT_DIR [--rounds 30] [--sizes-kib 256,2048] [--pages 1,8]
                        [--miss-lookups 400] [--miss-warm-up 12000] [--dram 1g] [--file-root /dev/shm]
needs: ORBITKV_JAR (the Manager jar), the SGLang venv (sglang 0.5.23), PYTHONPATH with clients/python.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid

from bench_manager import ManagerProcess, pct, slots_of_class

LAYERS, HEADS, HEAD_DIM = 8, 8, 64
TOKEN_BYTES = 2 * LAYERS * HEADS * HEAD_DIM * 2  # K and V, bfloat16


class Arm:
    """One HiCacheController with one L3 backend attached, over its own CPU pools."""

    def __init__(self, backend: str, extra: dict, model: str, page_tokens: int, max_pages: int):
        import torch
        from sglang.srt.managers.cache_controller import HiCacheController
        from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool
        from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
        from tests_integration.sglang import hicache_support as hs

        from orbitkv.sglang.backend import HostPagePlan

        hs.stamp_single_rank()
        device_tokens = page_tokens * (max_pages + 2)
        device = MHATokenToKVPool(size=device_tokens, page_size=page_tokens, dtype=torch.bfloat16, head_num=HEADS,
                                  head_dim=HEAD_DIM, layer_num=LAYERS, device="cpu", enable_memory_saver=False,
                                  enable_alt_stream=False)
        allocator = PagedTokenToKVPoolAllocator(device_tokens, page_tokens, torch.bfloat16, "cpu", device, False)
        self.host = MHATokenToKVPoolHost(device.get_device_pool_infos()[0].buffer_info, host_to_device_ratio=2.0,
                                         host_size=0, page_size=page_tokens, layout="page_first", pin_memory=False,
                                         device="cpu", device_capacity_tokens=device_tokens, start_layer=0,
                                         end_layer=LAYERS)
        self.controller = HiCacheController(allocator, self.host, page_tokens, None, threading.Event(),
                                            io_backend="direct", storage_backend=backend, model_name=model,
                                            storage_backend_extra_config=dict(extra), enable_storage_metrics=False)
        self.plan = HostPagePlan(self.host, hs.storage_config("mha", {}, model=model))
        self.page_tokens = page_tokens
        self.src = self.host.alloc(max_pages * page_tokens)
        self.dst = self.host.alloc(max_pages * page_tokens)
        self._request = 0

    @property
    def backend(self):
        return self.controller.storage_backend

    def starts(self, indices, pages: int):
        return indices[:pages * self.page_tokens][::self.page_tokens].tolist()

    def runs(self, start: int):
        """The page's runs (K, then V) as writable memoryviews of the host pool."""
        return [memoryview(part.numpy()) for part in self.plan.parts(start)]

    def store(self, keys, pages: int) -> float:
        from sglang.srt.mem_cache.hicache_storage import HiCacheStorageExtraInfo
        indices = self.src[:pages * self.page_tokens]
        began = time.perf_counter()
        ok = self.controller.page_set_func(keys, indices, HiCacheStorageExtraInfo())
        took = time.perf_counter() - began
        if not ok:
            raise RuntimeError(f"{type(self.backend).__name__}: a backup batch of {pages} pages failed")
        return took

    def exists(self, keys) -> float:
        from sglang.srt.mem_cache.hicache_storage import HiCacheStorageExtraInfo
        began = time.perf_counter()
        found = self.backend.batch_exists(keys, HiCacheStorageExtraInfo())
        took = time.perf_counter() - began
        if found != len(keys):
            raise RuntimeError(f"{type(self.backend).__name__}: exists found {found} of {len(keys)} stored pages")
        return took

    def load(self, keys, pages: int) -> float:
        from sglang.srt.managers.cache_controller import PrefetchOperation
        self._request += 1
        operation = PrefetchOperation(f"bench-{self._request}", [])
        indices = self.dst[:pages * self.page_tokens]
        began = time.perf_counter()
        loaded = self.controller.page_get_func(operation, keys, indices)
        took = time.perf_counter() - began
        if loaded != len(keys):
            raise RuntimeError(f"{type(self.backend).__name__}: a prefetch batch loaded {loaded} of {len(keys)} pages")
        return took

    def close(self) -> None:
        self.controller.detach_storage_backend()



def fresh_key(counter) -> str:
    """A key shaped like SGLang's (hex SHA-256), never used before in this run."""
    return hashlib.sha256(next(counter).to_bytes(8, "little") + RUN_SALT).hexdigest()


RUN_SALT = uuid.uuid4().bytes


def fill(arm: Arm, pages: int, payload: bytes, stamp: int) -> None:
    for p, start in enumerate(arm.starts(arm.src, pages)):
        for r, run in enumerate(arm.runs(start)):
            run[:] = payload[:len(run)]
            run[:8] = (stamp * 1024 + p * 2 + r).to_bytes(8, "little")


def zero(arm: Arm, pages: int) -> None:
    for start in arm.starts(arm.dst, pages):
        for run in arm.runs(start):
            run[:] = bytes(len(run))


def same(arm: Arm, pages: int) -> bool:
    return all(a == b for s, d in zip(arm.starts(arm.src, pages), arm.starts(arm.dst, pages))
               for a, b in zip(arm.runs(s), arm.runs(d)))


def run_row(arms: dict, pages: int, rounds: int, counter, failures) -> dict:
    any_arm = next(iter(arms.values()))
    size = any_arm.plan.page_bytes * pages
    dst = bytearray(b"\x01" * size)  # touched
    dview = memoryview(dst)
    payload = os.urandom(max(len(r) for r in any_arm.runs(any_arm.starts(any_arm.src, 1)[0])))
    times = {"memcpy": []}
    for name in arms:
        for op in ("store", "exists", "load"):
            times[f"{name}.{op}"] = []
    for r in range(rounds):
        for name, arm in arms.items():
            fill(arm, pages, payload, r)
        arm = any_arm
        began = time.perf_counter()
        offset = 0
        for start in arm.starts(arm.src, pages):
            for run in arm.runs(start):
                dview[offset:offset + len(run)] = run
                offset += len(run)
        times["memcpy"].append(time.perf_counter() - began)
        for name, arm in arms.items():
            keys = [fresh_key(counter) for _ in range(pages)]
            times[f"{name}.store"].append(arm.store(keys, pages))
            times[f"{name}.exists"].append(arm.exists(keys))
            zero(arm, pages)
            times[f"{name}.load"].append(arm.load(keys, pages))
            if not same(arm, pages):
                failures.append(f"{name}: {arm.plan.page_bytes} B x {pages}: round {r}: loaded bytes differ")
    dview.release()
    return {"bytes": size, "median": {k: statistics.median(v) for k, v in times.items()},
            "p90": {k: pct(v, 0.9) for k, v in times.items()}}


def warm_up(arm: Arm, slots: int, pages: int, counter) -> None:
    """Writes twice the slot class (each batch also asked for and loaded once: the Manager's QUERY
    and RESTORE paths compiled too)."""
    for _ in range(max(2, (2 * slots + pages - 1) // pages)):
        keys = [fresh_key(counter) for _ in range(pages)]
        arm.store(keys, pages)
        arm.exists(keys)
        arm.load(keys, pages)



def miss_lookups(arm: Arm, n: int, counter):
    out = []
    for _ in range(n):
        key = fresh_key(counter)
        began = time.perf_counter()
        found = arm.backend.batch_exists([key])
        out.append(time.perf_counter() - began)
        if found:
            raise RuntimeError("a never-stored key was found")
    return out


def main(argv) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--sizes-kib", default="256,2048")
    ap.add_argument("--pages", default="1,8")
    ap.add_argument("--miss-lookups", type=int, default=400)
    ap.add_argument("--miss-warm-up", type=int, default=12000)
    ap.add_argument("--dram", default="1g")
    ap.add_argument("--file-root", default="/dev/shm")
    args = ap.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    import logging
    logging.basicConfig(level=logging.WARNING)
    os.environ.pop("SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR", None)  # HiCacheFile must use our directory
    import orbitkv.sglang.backend  # noqa: F401 - fails early without PYTHONPATH or SGLang
    from tests_integration.sglang import hicache_support as hs
    manager = ManagerProcess(["--dram-bytes", args.dram, "--ssd-bytes", "256m", "--ssd-policy", "on-evict"],
                             log_path=os.path.join(args.out_dir, "manager.log"), prefix="bench-hicache.",
                             java_options=["--sun-misc-unsafe-memory-access=allow"])
    file_dir = tempfile.mkdtemp(prefix="bench-hicache-file.", dir=args.file_root)
    failures, rows, misses = [], [], {}
    counter = iter(range(1, 1 << 62))
    page_list = [int(p) for p in args.pages.split(",")]
    try:
        for kib in (int(s) for s in args.sizes_kib.split(",")):
            page_tokens = kib * 1024 // TOKEN_BYTES
            model = f"bench/hicache-{uuid.uuid4().hex[:8]}-{kib}k"
            arms = {}
            try:
                arms["orbitkv"] = Arm("dynamic", hs.orbitkv_extra(manager.socket, 1), model, page_tokens,
                                      max(page_list))
                arms["file"] = Arm("file", {"file_storage_path": file_dir}, model, page_tokens, max(page_list))
                slots = slots_of_class(arms["orbitkv"].backend._pages, kib * 1024)
                for pages in page_list:
                    warm_up(arms["orbitkv"], slots, pages, counter)
                    rows.append((kib, pages, run_row(arms, pages, args.rounds, counter, failures)))
                if not misses:
                    for name, arm in arms.items():
                        miss_lookups(arm, args.miss_warm_up, counter)
                        misses[name] = miss_lookups(arm, args.miss_lookups, counter)
            finally:
                for arm in arms.values():
                    arm.close()
                for entry in os.listdir(file_dir):
                    os.unlink(os.path.join(file_dir, entry))
    finally:
        manager.stop()
        shutil.rmtree(file_dir, ignore_errors=True)
    print(table(rows, misses, args))
    for f in failures:
        print(f"WRONG BYTES: {f}")
    return 1 if failures else 0


def table(rows, misses, args) -> str:
    def ms(s):
        return f"{s * 1e3:.3f}"

    def gbs(b, s):
        return f"{b / s / 1e9:.2f}"
    out = ["| page | pages per batch | memcpy ms (GB/s) | operation | OrbitKV ms p50 / p90 (GB/s) "
           "| file ms p50 / p90 (GB/s) | OrbitKV / memcpy | file / memcpy | OrbitKV speed-up over file |",
           "|---|---|---|---|---|---|---|---|---|"]
    for kib, pages, r in rows:
        m, p, b = r["median"], r["p90"], r["bytes"]
        label = f"{kib // 1024} MiB" if kib >= 1024 else f"{kib} KiB"
        for op in ("store", "exists", "load"):
            o, f = m[f"orbitkv.{op}"], m[f"file.{op}"]
            po, pf = p[f"orbitkv.{op}"], p[f"file.{op}"]
            if op == "exists":  # moves no bytes
                ours, theirs, ratio_ours, ratio_theirs = f"{ms(o)} / {ms(po)}", f"{ms(f)} / {ms(pf)}", "—", "—"
            else:
                ours, theirs = f"{ms(o)} / {ms(po)} ({gbs(b, o)})", f"{ms(f)} / {ms(pf)} ({gbs(b, f)})"
                ratio_ours, ratio_theirs = f"{m['memcpy'] / o:.2f}", f"{m['memcpy'] / f:.2f}"
            out.append(f"| {label} | {pages} | {ms(m['memcpy'])} ({gbs(b, m['memcpy'])}) | {op} | {ours} | {theirs} "
                       f"| {ratio_ours} | {ratio_theirs} | {f / o:.2f} |")
    out.append("")
    for name, values in misses.items():
        out.append(f"missing lookup ({name}: batch_exists of one never-stored key, {len(values)} after "
                   f"{args.miss_warm_up} more): p50 {statistics.median(values) * 1e6:.0f} us, "
                   f"p90 {pct(values, 0.9) * 1e6:.0f} us")
    out.append(f"{args.rounds} rounds per row, arms interleaved; times are the controller's page_set_func, "
               "batch_exists and page_get_func per batch; ratios to memcpy are memcpy time over the operation's "
               "time (target >= 0.8); speed-up = file time over OrbitKV time; missing lookup target <= 50 us.")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
