"""The worker half of :class:`~orbitkv.vllm.connector.OrbitKvConnector`: restores pages into
vLLM's KV-cache tensors before a step's forward and publishes finished blocks after it.

Owns the worker's :class:`~orbitkv.pages.ManagerPages` (its own connection and registration in
the engine's namespace) and what it must report back to the scheduler: which loads finished or
failed (:meth:`take_report`) and which block ids hold no valid KV (:meth:`take_invalid_block_ids`).

- :meth:`load` runs in ``start_load_kv``, before the forward (vLLM starts synchronous loads
  there). For each load it reads the pages by name over its own lease (one QUERY, then copies
  out of the shared arena) while the scheduler still holds its lease on the same pages, so they
  cannot leave DRAM in between. A page that is missing, of the wrong size, or unreadable ends
  the load there: its block and every later one of that load are reported invalid and vLLM
  recomputes them (``get_block_ids_with_load_errors``); a restored block is never a guess.
- :meth:`save` runs in ``wait_for_save``, after the forward: one PUBLISH of every block to
  publish this step (reserve, copy into the granted arena slots, commit); the copy takes each
  layer's block straight from a CPU cache whose blocks are one run per layer, else from one
  gather of the blocks. A request
  whose load failed this step publishes nothing this step (its later blocks were computed over
  the unloaded ones).

Copies use torch (``index_select``/``index_copy_`` on the cache, a CPU staging tensor, pinned
when the cache is on CUDA), never ``.numpy()`` of a device tensor; a load into a CPU cache copies
each leased page straight into its block (``KvPageBinding.write_page``, numpy views of the
cache's own memory), with no staging tensor. The CPU path is tested; the
CUDA path is the same code with a device index tensor and a host<->device copy, and is qualified
only where a GPU runs it.

Thread model: vLLM calls these from the one thread that runs the model. Reports are plain sets,
bounded by the requests of one step; they are emptied every step by the connector.
"""

from __future__ import annotations

import logging
from typing import Dict, Iterable, List, Optional, Set, Tuple

import numpy as np
import torch

from ..pages import ManagerPages
from .connector_layout import KvPageBinding
from .connector_scheduler import LoadPlan, SavePlan

log = logging.getLogger("orbitkv.vllm.connector")

COUNTERS = ("loads", "pages_loaded", "pages_load_failed", "pages_saved", "pages_save_refused", "errors")


class ConnectorWorker:
    """See the module header."""

    def __init__(self, binding: KvPageBinding, store: ManagerPages, wait_s: float):
        self.binding = binding
        self.store = store
        self.wait_s = wait_s
        self._loaded: Set[str] = set()
        self._failed: Set[str] = set()
        self._invalid: Set[int] = set()
        self.stats: Dict[str, int] = dict.fromkeys(COUNTERS, 0)

    def load(self, plans: Iterable[LoadPlan]) -> None:
        for plan in plans:
            self.stats["loads"] += 1
            try:
                restored = self._load_one(plan)
            except Exception as e:  # noqa: BLE001 - a failed load is recomputed, never raised
                self._error("load", e)
                restored = 0
            if restored == len(plan.block_ids):
                self._loaded.add(plan.req_id)
            else:
                self._failed.add(plan.req_id)
                self._invalid.update(plan.block_ids[restored:])
            self.stats["pages_loaded"] += restored
            self.stats["pages_load_failed"] += len(plan.block_ids) - restored

    def save(self, plans: Iterable[SavePlan]) -> None:
        # one publish per tenant label (a request's cache_salt) of the step
        by_tenant: Dict[Optional[str], Tuple[List[bytes], List[int]]] = {}
        seen = set()
        for plan in plans:
            if plan.req_id in self._failed:
                continue
            names, block_ids = by_tenant.setdefault(plan.tenant, ([], []))
            for name, block_id in zip(plan.names, plan.block_ids):
                if name not in seen:  # two requests of one step computing one prefix publish it once
                    seen.add(name)
                    names.append(name)
                    block_ids.append(block_id)
        for tenant, (names, block_ids) in by_tenant.items():
            if names:
                self._save(names, block_ids, tenant)

    def _save(self, names: List[bytes], block_ids: List[int], tenant: Optional[str]) -> None:
        try:
            if self.binding.publishes_from_cache:  # each page written into its slot from the cache's runs
                pages = [(name, self.binding.page_parts(block_id)) for name, block_id in zip(names, block_ids)]
            else:
                images = self.binding.gather(block_ids).numpy()
                pages = [(name, images[i]) for i, name in enumerate(names)]
            stored = self.store.write(pages, tenant)
        except Exception as e:  # noqa: BLE001 - an unpublished page is a later miss
            self._error("save", e)
            stored = [False] * len(names)
        done = sum(stored)
        self.stats["pages_saved"] += done
        self.stats["pages_save_refused"] += len(names) - done

    def take_report(self) -> Tuple[Set[str], Set[str]]:
        loaded, failed = self._loaded, self._failed
        self._loaded, self._failed = set(), set()
        return loaded, failed

    def take_invalid_block_ids(self) -> Set[int]:
        invalid, self._invalid = self._invalid, set()
        return invalid

    def snapshot(self) -> Dict[str, int]:
        out = dict(self.stats)
        out.update({f"store_{k}": v for k, v in self.store.snapshot().items()})
        return out

    def close(self) -> None:
        self.store.close()

    def _load_one(self, plan: LoadPlan) -> int:
        count = min(len(plan.names), len(plan.block_ids))  # fewer names than ids: the rest is recomputed
        if count == 0:
            return 0
        page_bytes = self.binding.page_bytes
        if self.binding.writes_pages_directly:
            return self._load_directly(plan, count)
        pinned = self.binding.device is not None and self.binding.device.type == "cuda"
        images = torch.empty((count, page_bytes), dtype=torch.uint8, pin_memory=pinned)
        rows = images.numpy()  # a CPU tensor's own memory: the sink fills the staging rows in place
        wrong_size: List[int] = []

        def sink(i: int, page: memoryview) -> None:
            if page.nbytes != page_bytes:
                wrong_size.append(i)
            else:
                rows[i] = np.frombuffer(page, dtype=np.uint8)

        restored = self.store.read_into(plan.names[:count], sink, self.wait_s)
        if wrong_size:
            restored = min(restored, min(wrong_size))
        if restored > 0:
            self.binding.scatter(plan.block_ids[:restored], images[:restored])
        return restored

    def _load_directly(self, plan: LoadPlan, count: int) -> int:
        """A CPU cache: each page copied from its leased arena page straight into its block (no
        staging tensor, whose fresh pages cost a fault per 4 KiB here); the pages before the first
        missing or wrong-sized one count as restored, and a block written after that one is
        reported invalid with it, so vLLM recomputes it."""
        page_bytes = self.binding.page_bytes
        block_ids = plan.block_ids
        wrong_size: List[int] = []

        def sink(i: int, page: memoryview) -> None:
            if page.nbytes != page_bytes:
                wrong_size.append(i)
            else:
                self.binding.write_page(block_ids[i], page)

        restored = self.store.read_into(plan.names[:count], sink, self.wait_s)
        return min(restored, min(wrong_size)) if wrong_size else restored

    def _error(self, where: str, error: BaseException) -> None:
        self.stats["errors"] += 1
        if self.stats["errors"] == 1 or self.stats["errors"] % 1000 == 0:
            log.exception("OrbitKvConnector worker %s failed (%d errors so far)", where, self.stats["errors"],
                          exc_info=error)
