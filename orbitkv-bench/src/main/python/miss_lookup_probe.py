"""Where a missing lookup's time goes from Python: the pages layer, the bare client, the frame
encoding, and a Unix-socket echo read on the calling thread or through a reader thread.

Starts one Manager (``ORBITKV_JAR``; ``JAVA``, default ``java``, must be a JDK 25), then prints
medians of: ``ManagerPages.lookup`` of one never-stored name (QUERY, FINAL miss, RELEASE written
without waiting), the client's bare ``Client.query`` of one such name, encoding one QUERY frame,
and a 200-byte echo over a Unix socket pair of processes, read directly and through a reader
thread that wakes the caller with an ``Event`` (the client's pattern). Stdlib only; about 10 s.

usage: ORBITKV_JAR=orbitkv-server/target/orbitkv.jar PYTHONPATH=clients/python python3 miss_lookup_probe.py
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time

from orbitkv import protocol as p
from orbitkv.pages import ManagerPages
from orbitkv.state import Namespace

ROUNDS = 2000


def median_us(samples) -> float:
    return statistics.median(samples) * 1e6


def manager_split() -> None:
    tmp = tempfile.mkdtemp(prefix="miss-probe.")
    shm = tempfile.mkdtemp(prefix="miss-probe.", dir="/dev/shm")
    proc = subprocess.Popen(
        [os.environ.get("JAVA", "java"), "--enable-native-access=ALL-UNNAMED", "-jar", os.environ["ORBITKV_JAR"],
         "manager", "--dram-bytes", "256m", "--ssd-bytes", "64m", "--http", "0", "--dram-dir", shm + "/d",
         "--ssd-dir", tmp + "/s", "--socket", tmp + "/m.sock"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp)
    try:
        sock = re.search(r"socket=(\S+)", proc.stdout.readline()).group(1)
        pages = ManagerPages(sock, Namespace("probe", "r", "sha256:w", "sha256:t", "", "bf16", "nhd", 16,
                                             1, 0, 1, 0, 1))
        names = [os.urandom(32) for _ in range(3 * ROUNDS)]
        for name in names[:ROUNDS]:  # warm-up: the connection, the JIT
            pages.lookup([name]).close()
        lookups = []
        for name in names[ROUNDS:2 * ROUNDS]:
            start = time.perf_counter()
            pages.lookup([name])  # a FINAL miss closes itself
            lookups.append(time.perf_counter() - start)
        client = pages._client
        queries = []
        for i, name in enumerate(names[2 * ROUNDS:]):
            op = 1 << 40 | i
            start = time.perf_counter()
            client.query(op, {0: [name]}, prompt_tokens=17)
            queries.append(time.perf_counter() - start)
            client.release_nowait([op])
        start = time.perf_counter()
        for name in names[:ROUNDS]:
            p.encode(5, p.Query(1, 0, p.CompletionTarget.HOST_READY, 17, 0,
                                [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [name])]))
        encode = (time.perf_counter() - start) / ROUNDS
        pages.close()
        print(f"ManagerPages.lookup, one missing name: p50 {median_us(lookups):.1f} us")
        print(f"Client.query, one missing name:        p50 {median_us(queries):.1f} us")
        print(f"encoding one QUERY frame:               {encode * 1e6:.1f} us")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        proc.stdout.close()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


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
            data = ours.recv(65536)
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
