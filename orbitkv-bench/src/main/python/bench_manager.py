"""One Manager process for the Python benches and probes (stdlib only).

:class:`ManagerProcess` starts ``java -jar $ORBITKV_JAR manager`` with directories of its own (the
socket and, unless one is given, the SSD store in a temporary directory; DRAM arenas in one under
``/dev/shm`` where there is one), ``--http 0`` and the caller's arguments; waits at most 90 s for
its ready line (lines the JVM prints before it are skipped); stops it with SIGTERM and removes the directories it made. The JDK is ``$JAVA``,
else ``$JAVA_HOME/bin/java``, else ``java`` (it must be a JDK 25). Usable as a context manager.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Optional, Sequence

READY = re.compile(r"orbitkv manager ready socket=(\S+) http=(\S+)")


def java_command() -> str:
    """``$JAVA``, else ``$JAVA_HOME/bin/java``, else ``java``."""
    if os.environ.get("JAVA"):
        return os.environ["JAVA"]
    if os.environ.get("JAVA_HOME"):
        return os.path.join(os.environ["JAVA_HOME"], "bin", "java")
    return "java"


class ManagerProcess:
    """A running Manager: ``socket`` (its engine channel), ``http`` (host:port), ``proc``."""

    def __init__(self, args: Sequence[str] = (), *, log_path: Optional[str] = None, ssd_dir: Optional[str] = None,
                 java_options: Sequence[str] = (), prefix: str = "bench-manager."):
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.shm = tempfile.mkdtemp(prefix=prefix, dir=shm)
        self.log = open(log_path, "w") if log_path else None
        self.proc = subprocess.Popen(
            [java_command(), "--enable-native-access=ALL-UNNAMED", *java_options, "-jar",
             os.path.abspath(os.environ["ORBITKV_JAR"]), "manager", "--http", "0",
             "--dram-dir", os.path.join(self.shm, "dram"), "--ssd-dir", ssd_dir or os.path.join(self.tmp, "ssd"),
             "--socket", os.path.join(self.tmp, "m.sock"), *args],
            stdout=subprocess.PIPE, stderr=self.log or subprocess.DEVNULL, text=True, cwd=self.tmp)
        match, line, deadline = None, "", time.monotonic() + 90
        while match is None and time.monotonic() < deadline:  # the JVM may print first (e.g. JFR's start)
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = self.proc.stdout.readline() if ready else ""
            if not line:
                break
            match = READY.search(line)
        if not match:
            self.proc.kill()
            self.proc.wait(30)
            self._clean_up()
            raise RuntimeError(f"the Manager did not start ({line!r}); see {log_path or 'its stderr (not kept)'}")
        self.socket, self.http = match.group(1), match.group(2)

    def stop(self) -> None:
        """SIGTERM, then waits for it (60 s) and removes what it made."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        finally:
            self._clean_up()

    def _clean_up(self) -> None:
        self.proc.stdout.close()
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.shm, ignore_errors=True)

    def __enter__(self) -> "ManagerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def slots_of_class(pages, page_bytes: int) -> int:
    """Slots of the Manager's smallest DRAM class that holds a page of ``page_bytes``, from the
    REGISTERED of ``pages`` (an ``orbitkv.pages.ManagerPages``); 0 when no class holds one."""
    fitting = [a for a in pages._connected().registered.arenas if a.slot_bytes >= page_bytes]
    if not fitting:
        return 0
    arena = min(fitting, key=lambda a: a.slot_bytes)
    return arena.size_bytes // arena.slot_bytes


def pct(values, q):
    """The nearest-rank ``q`` quantile of ``values`` (0 < q <= 1)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]
