"""Mooncake Store peer-read baseline for bin/bench-peer (PeerReadBench's `mooncake` column).

Run with the python of `bin/python-env mooncake`:

    python mooncake_peer_bench.py OUT.json [--seconds S]

Starts, on free loopback ports, a `mooncake_master` and two store clients in separate processes:
a *source* that mounts a global segment larger than the working set and puts 32 pages of 256 KiB and
32 of 2 MiB into it (`batch_put_from` from a registered buffer, distinct keys, known bytes), and a
*reader* that mounts no data and reads those pages over the TCP transport (`MC_STORE_MEMCPY=0` in both,
so no read is served by an in-process memcpy) with `batch_get_into` into a registered buffer:
for each page size, 1, 4 and 16 threads each reading one page per call, then one thread reading all
32 pages per call. Each cell runs 0.5 s of warm-up, in which every read is checked byte for byte
against the expected page, then SECONDS of counted reads; each thread's last page is checked again
afterwards. Writes a JSON object keyed like PeerReadBench's rows ("256 KiB|1", ..., "2048 KiB|batch 32")
with GB/s (10^9 bytes per second) values, or a string saying why a cell has no figure.
Everything it started is stopped when it exits (normally, on an error, or on SIGTERM/SIGINT).
ORBITKV_MOONCAKE_LOGS=DIR keeps the master's, the source's and the reader's logs in DIR.
"""

import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SIZES = [256 * 1024, 2 * 1024 * 1024]
PAGES = 32
BATCH = 32
CONCURRENCY = [1, 4, 16]
MAX_THREADS = 16
WARMUP_S = 0.5
SEGMENT_BYTES = 256 << 20      # source's global segment: > 32 * (256 KiB + 2 MiB) = 72 MiB
LOCAL_BUFFER_BYTES = 16 << 20


def page_bytes(size, i):
    """The known content of page i of a size class (the reader regenerates it to check reads)."""
    return random.Random(size * 1000 + i).randbytes(size)


def key(size, i):
    return f"orbitkv-bench:{size}:{i}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def store_setup(master):
    """A MooncakeDistributedStore client on loopback (P2P handshake, TCP transport)."""
    from mooncake.store import MooncakeDistributedStore
    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", "P2PHANDSHAKE", SEGMENT_BYTES if ROLE == "source" else 0,
                     LOCAL_BUFFER_BYTES, "tcp", "", master)
    if rc != 0:
        raise RuntimeError(f"{ROLE}: setup returned {rc}")
    return store


def registered(store, nbytes):
    import ctypes
    buf = (ctypes.c_char * nbytes)()
    ptr = ctypes.addressof(buf)
    rc = store.register_buffer(ptr, nbytes)
    if rc != 0:
        raise RuntimeError(f"{ROLE}: register_buffer returned {rc}")
    return buf, ptr


# --- source: holds the segment, puts the pages, stays until its stdin closes -----------------------

def source(master):
    import ctypes
    store = store_setup(master)
    total = PAGES * sum(SIZES)
    buf, ptr = registered(store, total)
    off = 0
    for size in SIZES:
        keys, ptrs = [], []
        for i in range(PAGES):
            ctypes.memmove(ptr + off, page_bytes(size, i), size)
            keys.append(key(size, i))
            ptrs.append(ptr + off)
            off += size
        rcs = store.batch_put_from(keys, ptrs, [size] * PAGES)
        if any(rc != 0 for rc in rcs):
            raise RuntimeError(f"source: batch_put_from returned {rcs}")
    print("ready", flush=True)
    sys.stdin.read()  # until the parent closes the pipe
    store.unregister_buffer(ptr)
    store.close()
    del buf


# --- reader: reads the source's pages over TCP --------------------------------------------------

def reader(master, seconds):
    import ctypes
    store = store_setup(master)
    expected = {size: [page_bytes(size, i) for i in range(PAGES)] for size in SIZES}
    # one region per thread for single-page reads, or the whole buffer for one batch of 32
    nbytes = max(MAX_THREADS, BATCH) * SIZES[-1]
    buf, ptr = registered(store, nbytes)

    def check(at, size, i):
        if ctypes.string_at(at, size) != expected[size][i]:
            raise RuntimeError(f"reader: page {key(size, i)} read wrong bytes")

    def cell(threads, size, batch):
        counting = threading.Event()
        stop = threading.Event()
        moved = [0] * threads
        errors = []

        def work(t):
            last = []
            try:
                i = t
                while not stop.is_set():
                    if batch:
                        idx = list(range(BATCH))
                        ptrs = [ptr + j * size for j in idx]
                    else:
                        idx = [i % PAGES]
                        ptrs = [ptr + t * size]
                    rcs = store.batch_get_into([key(size, j) for j in idx], ptrs, [size] * len(idx))
                    if any(rc != size for rc in rcs):
                        raise RuntimeError(f"reader: batch_get_into returned {rcs[:4]}")
                    if counting.is_set():
                        moved[t] += size * len(idx)
                    elif not stop.is_set():
                        for j, at in zip(idx, ptrs):
                            check(at, size, j)
                    last = list(zip(idx, ptrs))
                    i += threads
                for j, at in last:
                    check(at, size, j)
            except Exception as e:  # reported as the cell's figure
                errors.append(str(e))
                stop.set()

        ts = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(threads)]
        for t in ts:
            t.start()
        time.sleep(WARMUP_S)
        counting.set()
        start = time.perf_counter()
        stop.wait(seconds)
        counting.clear()
        elapsed = time.perf_counter() - start
        stop.set()
        for t in ts:
            t.join()
        if errors:
            return errors[0]
        return sum(moved) / elapsed / 1e9

    out = {}
    for size in SIZES:
        for conc in CONCURRENCY:
            out[f"{size // 1024} KiB|{conc}"] = cell(conc, size, False)
        out[f"{size // 1024} KiB|batch {BATCH}"] = cell(1, size, True)
    print(json.dumps(out), flush=True)
    store.unregister_buffer(ptr)
    store.close()
    del buf


# --- orchestrator: master, source, reader; stops all of them ------------------------------------

def wait_port(port, proc, deadline):
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mooncake_master exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("mooncake_master did not listen within 30 s")


def stop(proc, grace=10):
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def tail(path, n=5):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def orchestrate(out_path, seconds):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    open(out_path, "w").close()  # fail now, not after the run, when OUT cannot be written
    keep = os.environ.get("ORBITKV_MOONCAKE_LOGS")  # a folder to keep the three processes' logs in
    work = os.path.abspath(keep) if keep else tempfile.mkdtemp(prefix="orbitkv-mooncake-bench-")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, MC_STORE_MEMCPY="0")
    master_bin = os.path.join(os.path.dirname(sys.executable), "mooncake_master")
    me = os.path.abspath(__file__)
    master = src = None
    try:
        rpc_port, metrics_port = free_port(), free_port()
        with open(os.path.join(work, "master.log"), "wb") as log:
            master = subprocess.Popen([master_bin, f"--rpc_port={rpc_port}", "--rpc_address=127.0.0.1",
                                       f"--metrics_port={metrics_port}", "--metrics_host=127.0.0.1"],
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        wait_port(rpc_port, master, time.monotonic() + 30)
        addr = f"127.0.0.1:{rpc_port}"

        src_log = os.path.join(work, "source.log")
        with open(src_log, "wb") as log:
            src = subprocess.Popen([sys.executable, me, "--role", "source", "--master", addr],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
        ready, _, _ = select.select([src.stdout], [], [], 120)
        line = src.stdout.readline().decode().strip() if ready else ""
        if line != "ready":
            raise RuntimeError("source did not get ready: " + (tail(src_log, 3).strip() or "no output"))

        rd_log = os.path.join(work, "reader.log")
        timeout = 120 + len(SIZES) * (len(CONCURRENCY) + 1) * (seconds + WARMUP_S + 5)
        with open(rd_log, "wb") as log:
            rd = subprocess.run([sys.executable, me, "--role", "reader", "--master", addr,
                                 "--seconds", str(seconds)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env,
                                timeout=timeout)
        if rd.returncode != 0:
            raise RuntimeError(f"reader exited with {rd.returncode}: " + (tail(rd_log, 3).strip() or "no output"))
        result = json.loads(rd.stdout.decode().strip().splitlines()[-1])
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(result), file=sys.stderr)
    finally:
        if src is not None:
            try:
                src.stdin.close()
                src.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                pass
            stop(src)
        stop(master)
        if not keep:
            for name in ("master.log", "source.log", "reader.log"):
                p = os.path.join(work, name)
                if os.path.exists(p):
                    os.remove(p)
            os.rmdir(work)


def main(argv):
    global ROLE
    args = dict(zip(argv[0::2], argv[1::2])) if argv and argv[0].startswith("--") else {}
    if args.get("--role") in ("source", "reader"):
        ROLE = args["--role"]
        if ROLE == "source":
            source(args["--master"])
        else:
            reader(args["--master"], float(args["--seconds"]))
        return 0
    if not argv or argv[0].startswith("--"):
        print("usage: mooncake_peer_bench.py OUT.json [--seconds S]", file=sys.stderr)
        return 2
    opts = dict(zip(argv[1::2], argv[2::2]))
    ROLE = "orchestrator"
    try:
        orchestrate(argv[0], float(opts.get("--seconds", "3")))
    except Exception as e:
        print("mooncake_peer_bench: " + " / ".join(str(e).split("\n")), file=sys.stderr)
        return 1
    return 0


ROLE = "orchestrator"

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
