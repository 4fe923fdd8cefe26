"""JFR profile of the Manager under a stream of LMCache-style presence checks.

Starts one Manager (``ORBITKV_JAR``; ``JAVA``, a JDK 25) with a JFR recording (settings
``profile``), publishes 64 pages, then for 20 s calls ``ManagerPages.present_each`` on 8 names,
every other one stored (what the LMCache connector's exists sends: one QUERY per name, pipelined,
RELEASEs not waited for). Prints the p50 of one call and the recording's path (argv[1], default
./lookup.jfr); read it with ``jfr print --events jdk.ExecutionSample``.

usage: ORBITKV_JAR=... PYTHONPATH=clients/python python3 lookup_jfr_probe.py [FILE.jfr]
"""
import os
import statistics
import sys
import time

from bench_manager import ManagerProcess
from orbitkv.pages import ManagerPages
from orbitkv.state import Namespace

JFR = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "lookup.jfr")
with ManagerProcess(["--dram-bytes", "1g", "--ssd-bytes", "128m", "--ssd-policy", "on-evict"],
                    java_options=["-XX:StartFlightRecording=filename=" + JFR + ",settings=profile"],
                    prefix="lookup-jfr.") as manager:
    pages = ManagerPages(manager.socket, Namespace("m", "r", "sha256:w", "sha256:t", "", "bf16", "nhd", 16,
                                                   1, 0, 1, 0, 1))
    payload = os.urandom(64 * 1024)
    stored = [os.urandom(32) for _ in range(64)]
    pages.write([(n, payload) for n in stored])
    end = time.monotonic() + 20
    ts = []
    while time.monotonic() < end:
        names = [os.urandom(32) if i % 2 else stored[i] for i in range(8)]
        t = time.perf_counter()
        pages.present_each(names)
        ts.append(time.perf_counter() - t)
    print("present_each(8) p50 %.3f ms over %d calls; recording %s" % (statistics.median(ts) * 1e3, len(ts), JFR))
    pages.close()
