"""Real SGLang HiCache objects on a CPU, for the OrbitKV L3 backend tests.

Builds, from the installed SGLang: a device KV pool (``MHATokenToKVPool`` / ``MLATokenToKVPool``
on ``device="cpu"``), its page allocator, the host pool SGLang's assembler would build from the
device pool's own ``get_device_pool_infos()`` (``MHATokenToKVPoolHost`` / ``MLATokenToKVPoolHost``),
storage backends through ``StorageBackendFactory.create_backend`` (then ``register_mem_pool_host``,
as ``HiCacheController.attach_storage_backend`` does), and a whole ``HiCacheController`` with a
storage backend attached at start-up.

What does not run on a CPU: the device<->host copies (``backup_from_device_all_layer`` and
``load_to_device_per_layer`` call CUDA kernels from ``sgl_kernel.kvcacheio``; with io backend
"direct" the page-first layouts are refused by SGLang itself). Tests therefore put the bytes a
device->host backup would have produced into the host pool with the pool's own
``set_from_flat_data_page``, and read restored pages back with ``get_data_page``; everything from
the host pool to L3 and back is SGLang's code.

Thread model: one test thread; a ``ControllerHarness`` also runs the controller's four storage
threads, which it stops in ``close``. The scheduler's part of a prefetch (allocate host slots for
the hit, hand the operation to the I/O thread, wait for the acknowledgements) is done by
``ControllerHarness.prefetch`` with the controller's own methods and queues.
"""

from __future__ import annotations

import threading
from typing import List, Optional, Sequence, Tuple

import torch

from sglang.srt.managers.cache_controller import HiCacheController
from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
from sglang.srt.mem_cache.hicache_storage import HiCacheStorageConfig
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, MLATokenToKVPool
from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost
from sglang.srt.mem_cache.storage import StorageBackendFactory
from sglang.srt.mem_cache.utils import get_storage_hash_str
from sglang.srt.runtime_context import get_parallel

PAGE_TOKENS = 4
LAYERS = 3
DEVICE_TOKENS = 64
MHA_HEADS, MHA_HEAD_DIM = 2, 8
MLA_LORA_RANK, MLA_ROPE_DIM = 16, 8
#: Seconds any wait on a controller queue may take before the test fails (never reached when it works).
QUEUE_DEADLINE_S = 30

ORBITKV_CLASS = {"backend_name": "orbitkv", "module_path": "orbitkv.sglang.backend",
                 "class_name": "OrbitKvHiCacheStorage"}


def stamp_single_rank() -> None:
    """The parallel layout of a one-GPU engine, as the scheduler's process-group setup writes it."""
    get_parallel().override_permanently(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_dcp_size=1,
                                        attn_dcp_rank=0)


def device_pool(kind: str, layers: int = LAYERS):
    if kind == "mha":
        return MHATokenToKVPool(size=DEVICE_TOKENS, page_size=PAGE_TOKENS, dtype=torch.bfloat16, head_num=MHA_HEADS,
                                head_dim=MHA_HEAD_DIM, layer_num=layers, device="cpu", enable_memory_saver=False,
                                enable_alt_stream=False)
    return MLATokenToKVPool(size=DEVICE_TOKENS, page_size=PAGE_TOKENS, dtype=torch.bfloat16,
                            kv_lora_rank=MLA_LORA_RANK, qk_rope_head_dim=MLA_ROPE_DIM, layer_num=layers,
                            device="cpu", enable_memory_saver=False)


def host_pool(kind: str, layout: str = "page_first", device=None):
    """The host pool SGLang builds for ``device`` (a fresh device pool if None)."""
    device = device if device is not None else device_pool(kind)
    info = device.get_device_pool_infos()[0].buffer_info
    common = dict(host_to_device_ratio=2.0, host_size=0, page_size=PAGE_TOKENS, layout=layout, pin_memory=False,
                  device="cpu", device_capacity_tokens=DEVICE_TOKENS, start_layer=0, end_layer=device.layer_num)
    if kind == "mha":
        return MHATokenToKVPoolHost(info, **common)
    return MLATokenToKVPoolHost(info, target_layer_num=device.layer_num, **common)


def storage_config(kind: str, extra: dict, model: str = "test/model", tp_rank: int = 0, tp_size: int = 1,
                   pp_rank: int = 0, pp_size: int = 1, **more) -> HiCacheStorageConfig:
    return HiCacheStorageConfig(tp_rank=tp_rank, tp_size=tp_size, pp_rank=pp_rank, pp_size=pp_size, attn_cp_rank=0,
                                attn_cp_size=1, is_mla_model=kind == "mla", enable_storage_metrics=True,
                                is_page_first_layout=True, model_name=model, extra_config=dict(extra), **more)


def orbitkv_extra(socket_path: str, interface_v1: int = 1, **more) -> dict:
    return {**ORBITKV_CLASS, "interface_v1": interface_v1, "socket_path": socket_path, **more}


def create_backend(name: str, config: HiCacheStorageConfig, pool):
    """A backend as ``attach_storage_backend`` makes one: the factory, then the host pool."""
    backend = StorageBackendFactory.create_backend(name, config, pool)
    backend.register_mem_pool_host(pool)
    return backend


def storage_keys(tokens, page_tokens: int = PAGE_TOKENS) -> List[str]:
    """SGLang's storage keys of ``tokens`` (a token list or a RadixKey with extra key / salt)."""
    return get_storage_hash_str(tokens, None, page_size=page_tokens)


def random_page(pool, generator: torch.Generator) -> torch.Tensor:
    """A flat data page of random bytes in the pool's dtype."""
    page = pool.get_dummy_flat_data_page()
    raw = page.view(torch.uint8)
    raw.copy_(torch.randint(0, 256, raw.shape, dtype=torch.uint8, generator=generator))
    return page


def fill_pages(pool, pages: int, seed: int) -> Tuple[torch.Tensor, List[bytes]]:
    """Allocates ``pages`` host pages and writes random bytes into them, as a device->host backup
    would; returns their host slots and each page's flat image."""
    generator = torch.Generator().manual_seed(seed)
    indices = pool.alloc(pages * PAGE_TOKENS)
    images = []
    for i in range(pages):
        page = random_page(pool, generator)
        pool.set_from_flat_data_page(int(indices[i * PAGE_TOKENS]), page)
        images.append(page_image(pool, int(indices[i * PAGE_TOKENS])))
    return indices, images


def page_image(pool, start: int) -> bytes:
    """The flat data page at host slot ``start``, as bytes."""
    return pool.get_data_page(start, flat=True).contiguous().view(torch.uint8).numpy().tobytes()


def tensor_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes()


def page_starts(indices: torch.Tensor) -> List[int]:
    return indices[::PAGE_TOKENS].tolist()


def slots_of(pool, pages: int) -> torch.Tensor:
    """Fresh (zeroed) host slots for ``pages`` pages."""
    indices = pool.alloc(pages * PAGE_TOKENS)
    for start in page_starts(indices):
        pool.set_from_flat_data_page(start, pool.get_dummy_flat_data_page())
    return indices


class ControllerHarness:
    """A ``HiCacheController`` with an L3 backend attached at start-up, over CPU pools."""

    def __init__(self, kind: str, layout: str, backend: str, extra: dict, model: str):
        stamp_single_rank()
        self.device = device_pool(kind)
        allocator = PagedTokenToKVPoolAllocator(DEVICE_TOKENS, PAGE_TOKENS, torch.bfloat16, "cpu", self.device, False)
        self.host = host_pool(kind, layout, self.device)
        self.controller = HiCacheController(
            allocator, self.host, PAGE_TOKENS, None, threading.Event(), io_backend="direct",
            storage_backend=backend, model_name=model, storage_backend_extra_config=dict(extra),
            enable_storage_metrics=True)

    @property
    def backend(self):
        return self.controller.storage_backend

    def backup(self, host_indices: torch.Tensor, tokens: Sequence[int], hashes: List[str]) -> int:
        """``write_storage`` and its acknowledgement: the tokens the backup thread stored."""
        operation_id = self.controller.write_storage(host_indices, list(tokens), hash_value=hashes)
        ack = self.controller.ack_backup_queue.get(timeout=QUEUE_DEADLINE_S)
        assert ack.id == operation_id, (ack.id, operation_id)
        return ack.completed_tokens

    def prefetch(self, request_id: str, tokens) -> Tuple[Optional[torch.Tensor], int, int]:
        """One request's prefetch: (host slots, tokens the storage query found, tokens loaded).
        The scheduler's steps (host allocation, hand-off, acknowledgements) use the controller's
        own methods and queues."""
        self.controller.prefetch(request_id, tokens)
        operation = self.controller.prefetch_hit_queue.get(timeout=QUEUE_DEADLINE_S)
        found = operation.storage_hit_count
        if found == 0:
            return None, 0, 0
        host_indices = self.controller.alloc_prefetch_host_buffers(operation, found)
        assert host_indices is not None, "host pool full"
        operation.host_indices = host_indices
        self.controller.prefetch_buffer.put(operation)
        loaded = 0
        while True:
            ack = self.controller.ack_prefetch_queue.get(timeout=QUEUE_DEADLINE_S)
            if ack.completed_req:
                return host_indices, found, loaded
            if ack.completed_tokens is not None:
                loaded = ack.completed_tokens

    def close(self) -> None:
        self.controller.detach_storage_backend()
