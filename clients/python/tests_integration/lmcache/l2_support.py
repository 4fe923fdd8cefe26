"""Helpers for driving an LMCache L2 adapter the way LMCache's controllers do: build the adapter
from its ``--l2-adapter`` JSON with LMCache's own parser and factory, submit tasks, wait on the
adapter's eventfds with a deadline, and build ``ObjectKey``s and ``TensorMemoryObj``s; count the
round trips a connector's Manager client makes and read a Manager's Prometheus counters."""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import socket
import tempfile
import threading
import time
from typing import Dict, List, Optional

import torch
from lmcache.v1.distributed.api import ObjectKey
from lmcache.v1.distributed.l2_adapters import create_l2_adapter
from lmcache.v1.distributed.l2_adapters.config import parse_args_to_l2_adapters_config
from lmcache.v1.memory_management import MemoryFormat, MemoryObjMetadata, TensorMemoryObj
from lmcache.v1.platform import consume_fd

from orbitkv.lmcache import l2_adapter_spec


def build_adapter(spec: dict):
    """LMCache's path from a user's JSON to an adapter: parse, then the factory registry."""
    config = parse_args_to_l2_adapters_config(argparse.Namespace(l2_adapter=[json.dumps(spec)]))
    return create_l2_adapter(config.adapters[0])


def orbitkv_adapter(socket_path: str, **params):
    params.setdefault("timeout_s", 2.0)
    params.setdefault("retry_after_s", 0.5)
    return build_adapter(l2_adapter_spec(socket_path, "bfloat16", 256, **params))


def keys(n: int, model: str = "org/model-a", first: int = 0, kv_rank: int = 0, group: int = 0,
         salt: str = "") -> List[ObjectKey]:
    return [ObjectKey(chunk_hash=(first + i).to_bytes(16, "big"), model_name=model, kv_rank=kv_rank,
                      object_group_id=group, cache_salt=salt) for i in range(n)]


def objects(n: int, size: int, seed: Optional[int] = None) -> List[TensorMemoryObj]:
    """``n`` memory objects of ``size`` bytes: random bytes from ``seed``, or zeros."""
    out = []
    for _ in range(n):
        if seed is None:
            raw = torch.zeros(size, dtype=torch.uint8)
        else:
            raw = torch.randint(0, 256, (size,), dtype=torch.uint8,
                                generator=torch.Generator().manual_seed(seed + len(out)))
        meta = MemoryObjMetadata(shape=torch.Size([size]), dtype=torch.uint8, address=0, phy_size=size,
                                 fmt=MemoryFormat.KV_2LTD, ref_count=1)
        out.append(TensorMemoryObj(raw_data=raw, metadata=meta, parent_allocator=None))
    return out


def _wait_fd(fd: int, deadline: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    left = deadline - time.monotonic()
    if left <= 0 or not poller.poll(left * 1000):
        return False
    consume_fd(fd)
    return True


def store(adapter, ks, objs, timeout_s: float = 10.0) -> bool:
    """Submits one store task and waits for its result; raises AssertionError past the deadline."""
    task = adapter.submit_store_task(ks, objs)
    deadline = time.monotonic() + timeout_s
    done: Dict[int, object] = {}
    while task not in done:
        done.update(adapter.pop_completed_store_tasks())
        if task in done:
            break
        if not _wait_fd(adapter.get_store_event_fd(), deadline):
            raise AssertionError(f"store task {task} did not complete in {timeout_s} s")
    return done[task].is_successful()


def _bits(bitmap) -> List[bool]:
    return [bitmap.test(i) for i in range(len(bitmap))]


def _wait_result(query, fd: int, task: int, timeout_s: float, what: str) -> List[bool]:
    deadline = time.monotonic() + timeout_s
    while True:
        result = query(task)
        if result is not None:
            return _bits(result)
        if not _wait_fd(fd, deadline):
            raise AssertionError(f"{what} task {task} did not complete in {timeout_s} s")


def lookup(adapter, ks, timeout_s: float = 10.0) -> List[bool]:
    task = adapter.submit_lookup_and_lock_task(ks, {})
    found = lookup_result(adapter, task, timeout_s)
    adapter.submit_unlock([k for k, hit in zip(ks, found) if hit])
    return found


def lookup_result(adapter, task: int, timeout_s: float = 10.0) -> List[bool]:
    """The per-key answer of lookup task ``task`` (its keys stay locked; unlock them)."""
    return _wait_result(adapter.query_lookup_and_lock_result, adapter.get_lookup_and_lock_event_fd(), task,
                        timeout_s, "lookup")


def load(adapter, ks, objs, timeout_s: float = 10.0) -> List[bool]:
    task = adapter.submit_load_task(ks, objs)
    return _wait_result(adapter.query_load_result, adapter.get_load_event_fd(), task, timeout_s, "load")


class SilentManager:
    """A Unix socket that accepts connections and never answers: a Manager that hangs."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="okv-silent-")
        self.path = os.path.join(self.dir, "silent.sock")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(16)
        self._accepted: List[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self._accepted.append(conn)

    def close(self) -> None:
        self._server.close()
        for conn in self._accepted:
            conn.close()
        try:
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` in a Prometheus text page whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        match = re.match(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match.group(3))
    return total


class RoundTrips:
    """Counts the waits for Manager replies on one :class:`orbitkv.client.Client` while in a
    ``with`` block: each ``call`` (one request, one reply) and each ``call_all`` (requests
    pipelined, then their replies) is one round trip. Wraps the instance's own methods; restores
    them on exit."""

    def __init__(self, client) -> None:
        self.client = client
        self.calls = self.pipelined = self.requests = 0
        self.requests_per_round: List[int] = []

    def __enter__(self) -> "RoundTrips":
        call, call_all = self.client.call, self.client.call_all

        def counted_call(request, reply_type):
            self.calls += 1
            self.requests += 1
            self.requests_per_round.append(1)
            return call(request, reply_type)

        def counted_call_all(requests, reply_type):
            self.pipelined += 1
            self.requests += len(requests)
            self.requests_per_round.append(len(requests))
            return call_all(requests, reply_type)

        self.client.call, self.client.call_all = counted_call, counted_call_all
        return self

    def __exit__(self, *exc) -> None:
        del self.client.call, self.client.call_all

    @property
    def round_trips(self) -> int:
        return self.calls + self.pipelined
