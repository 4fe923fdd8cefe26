"""What an OrbitKV page is for :class:`~orbitkv.vllm.connector.OrbitKvConnector`, and the copies
between pages and vLLM's KV-cache tensors (vLLM 0.33.0).

Owns two things:

- :func:`supported_spec` — the start-up gate. It accepts exactly one KV layout family and refuses
  every other one with :class:`UnsupportedKvLayout` (a ``ValueError``), so that an engine whose KV
  bytes this module cannot copy whole fails when it starts instead of ever reporting a hit:

  ======================================  ==========================================================
  accepted                                refused
  ======================================  ==========================================================
  one KV-cache group                      hybrid models (several groups: sliding-window groups under
                                          the hybrid allocator, Mamba, cross-attention)
  ``FullAttentionSpec`` itself (also with MLA (``MLAAttentionSpec``), sink, RSWA and every other
  a sliding window or chunked-local       subclass; ``SlidingWindowSpec``, ``MambaSpec``,
  attention recorded on it: the hybrid    ``UniformTypeKVCacheSpecs``; specs without per-layer views
  allocator is off, so every block of
  every token is kept)
  unquantised KV (``kv_quant_mode`` NONE) fp8/int8/int4/nvfp4/TurboQuant KV (scales live outside the
                                          cache tensors), padded or packed pages
  tensor-, pipeline- and context-parallel TP, PP, DCP or PCP > 1 (each rank holds a shard; one
  size 1                                  namespace per rank is not wired yet)
  ======================================  ==========================================================

- :class:`KvPageBinding` — the worker's view of the KV cache it was given in
  ``register_kv_caches``: per layer the 4-D ``[B, H, N, C]`` tensor that vLLM's allocator
  (``vllm.v1.worker.utils.allocate_kv_cache``) carves out of one int8 backing buffer, seen as
  bytes. It checks every tensor against the spec before the first copy and copies whole blocks
  with ``index_select`` / ``index_copy_``, which work on CPU and CUDA tensors alike; into a CPU
  cache a restored page is also copied straight from the Manager's arena (:meth:`write_page`), and
  a CPU cache whose blocks are one run per layer is published from its own memory
  (:meth:`page_parts`).

Page image (one vLLM block of every layer, ``page_bytes = layers * spec.page_size_bytes``)::

    +--------------------- layer 0 ----------------------+- layer 1 -+ ... +- layer L-1 -+
    | kernel block 0 [H][n][C bytes] | kernel block 1 ... |    ...    |     |     ...     |
    +----------------------------------------------------+-----------+-----+-------------+

Layers follow the KV-cache group's ``layer_names`` order; inside a layer the bytes are the
block's logical ``[r, H, n, C]`` elements in row-major order (``r = block_size / n`` kernel
blocks of ``n`` tokens), whatever the physical stride order is. What the C bytes of one token
mean is the attention backend's business (the CPU backend reads ``[H][n][C]`` as ``[H][2n][D]``,
K rows then V rows), so the :attr:`PageFormat.descriptor` names the backend, the resolved
physical layout and the kernel block size, and pages of two engines mix only when all agree.

Thread model: the binding is used by the one thread that runs the model; it holds no lock.
Design note: a page is gathered with one ``index_select`` per layer over all blocks of a step and
one ``torch.cat``, not block by block: for a 20-block prefix of a 32-layer model that is 32 kernel
launches instead of 640 on a GPU, and on CPU one contiguous copy per layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Sequence

import numpy as np
import torch

from ..client import PageParts
from ..identity import dtype_name, join_layout

#: Version of the page image below; it enters the layout descriptor.
PAGE_IMAGE_VERSION = 1


class UnsupportedKvLayout(ValueError):
    """The engine's KV cache is of a kind the connector refuses (see the module header)."""


@dataclass(frozen=True)
class PageFormat:
    """What the worker found: enough for the scheduler to trust a page's name and size."""
    descriptor: str
    page_bytes: int
    block_size: int


def supported_spec(vllm_config: Any, kv_cache_config: Any):
    """The one ``FullAttentionSpec`` this engine's pages are made of; raises UnsupportedKvLayout."""
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVQuantMode

    groups = list(kv_cache_config.kv_cache_groups)
    if len(groups) != 1:
        kinds = ", ".join(type(g.kv_cache_spec).__name__ for g in groups) or "none"
        raise UnsupportedKvLayout(
            f"OrbitKvConnector supports one KV-cache group of full attention; this engine has "
            f"{len(groups)} ({kinds}): hybrid models are not supported")
    group = groups[0]
    spec = group.kv_cache_spec
    if type(spec) is not FullAttentionSpec:
        raise UnsupportedKvLayout(
            f"OrbitKvConnector supports FullAttentionSpec pages only, not {type(spec).__name__} "
            f"(MLA, sliding-window groups, Mamba and packed specs are refused)")
    problems = []
    if spec.kv_quant_mode != KVQuantMode.NONE:
        problems.append(f"quantised KV cache ({spec.kv_quant_mode.name})")
    if spec.page_size_padded is not None or spec.num_head_slots is not None or spec.state_content_bytes is not None:
        problems.append("padded or packed pages")
    if spec.tokens_per_state != 1:
        problems.append(f"tokens_per_state={spec.tokens_per_state}")
    if getattr(group, "host_resident", False) or not getattr(group, "enable_kv_transfer", True):
        problems.append("a host-resident or non-transferable group")
    if not spec.has_layer_views:
        problems.append("no per-layer views")
    parallel = vllm_config.parallel_config
    for axis in ("tensor_parallel_size", "pipeline_parallel_size", "decode_context_parallel_size",
                 "prefill_context_parallel_size"):
        size = int(getattr(parallel, axis, 1) or 1)
        if size != 1:
            problems.append(f"{axis}={size}")
    if vllm_config.model_config is not None and vllm_config.model_config.is_encoder_decoder:
        problems.append("an encoder-decoder model")
    hash_block = kv_cache_config.hash_block_size or spec.block_size
    if spec.block_size % hash_block:
        problems.append(f"hash block size {hash_block} does not divide block size {spec.block_size}")
    if problems:
        raise UnsupportedKvLayout("OrbitKvConnector refuses this KV cache: " + "; ".join(problems))
    return spec


def layer_names(kv_cache_config: Any) -> List[str]:
    return list(kv_cache_config.kv_cache_groups[0].layer_names)


def page_bytes(spec: Any, kv_cache_config: Any) -> int:
    return len(layer_names(kv_cache_config)) * spec.page_size_bytes


class KvPageBinding:
    """Copies whole blocks between one engine's KV-cache tensors and page images."""

    def __init__(self, kv_caches: Dict[str, torch.Tensor], spec: Any, kv_cache_config: Any,
                 backend_name: str, layout_name: str):
        names = layer_names(kv_cache_config)
        missing = [n for n in names if n not in kv_caches]
        if missing:
            raise UnsupportedKvLayout(f"register_kv_caches lacks the layers {missing[:4]}")
        num_blocks = int(kv_cache_config.num_blocks)
        self.layer_bytes = int(spec.page_size_bytes)
        self.page_bytes = self.layer_bytes * len(names)
        self._views: List[torch.Tensor] = []
        kernel_tokens = None
        device = None
        for name in names:
            tensor = kv_caches[name]
            kernel_tokens_here = self._check(name, tensor, spec, num_blocks)
            if kernel_tokens not in (None, kernel_tokens_here) or device not in (None, tensor.device):
                raise UnsupportedKvLayout("the layers of the KV-cache group differ in kernel block size or device")
            kernel_tokens, device = kernel_tokens_here, tensor.device
            # bytes, manager block outermost: [num_blocks, r, H, n, C bytes]
            self._views.append(tensor.view(torch.uint8).unflatten(0, (num_blocks, -1)))
        self.device = device
        self.kernel_tokens = kernel_tokens
        # a CPU cache's layers as numpy arrays over the same memory: a page is copied into its block
        # straight from the Manager's arena (write_page), with no staging tensor
        self._host_views = [view.numpy() for view in self._views] if device.type == "cpu" else None
        # ... and published from the cache's own memory (page_parts) when each layer's block is one
        # run in the page image's order (the physical layout is the logical [r, H, n, C] one)
        self._blocks_are_runs = self._host_views is not None and all(v[0].flags.c_contiguous for v in self._host_views)
        self.format = PageFormat(
            descriptor=join_layout([
                "vllm-connector", f"page{PAGE_IMAGE_VERSION}", f"backend={backend_name}", f"layout={layout_name}",
                f"layers={len(names)}", f"kv_heads={spec.num_kv_heads}", f"head={spec.head_size}+{spec.head_size_v}",
                f"block={spec.block_size}", f"kernel_block={kernel_tokens}", f"kv={dtype_name(spec.dtype)}"]),
            page_bytes=self.page_bytes, block_size=int(spec.block_size))

    @staticmethod
    def _check(name: str, tensor: Any, spec: Any, num_blocks: int) -> int:
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != 4:
            raise UnsupportedKvLayout(f"layer {name}: expected a 4-D [B, H, N, C] KV tensor, got "
                                      f"{getattr(tensor, 'shape', type(tensor).__name__)}")
        blocks, heads, tokens, content = tensor.shape
        if tensor.dtype != spec.dtype:
            raise UnsupportedKvLayout(f"layer {name}: tensor dtype {tensor.dtype} is not the spec's {spec.dtype}")
        if blocks % num_blocks or heads != spec.num_kv_heads or tokens * (blocks // num_blocks) != spec.block_size:
            raise UnsupportedKvLayout(f"layer {name}: shape {tuple(tensor.shape)} does not hold {num_blocks} blocks "
                                      f"of {spec.block_size} tokens x {spec.num_kv_heads} KV heads")
        if content * tensor.element_size() != spec.state_content_size_bytes or tensor.stride(-1) != 1:
            raise UnsupportedKvLayout(f"layer {name}: last axis of {content} x {tensor.element_size()} B "
                                      f"(stride {tensor.stride(-1)}) is not the spec's dense "
                                      f"{spec.state_content_size_bytes} B of K and V")
        return int(tokens)

    def _index(self, block_ids: Sequence[int]) -> torch.Tensor:
        return torch.tensor(list(block_ids), dtype=torch.long, device=self.device)

    def gather(self, block_ids: Sequence[int]) -> torch.Tensor:
        """The page images of ``block_ids``: a contiguous CPU uint8 tensor ``[k, page_bytes]``
        (for a CUDA cache the ``.cpu()`` copy waits for the device)."""
        index = self._index(block_ids)
        parts = [view.index_select(0, index).reshape(len(block_ids), -1) for view in self._views]
        return torch.cat(parts, dim=1).cpu()

    @property
    def writes_pages_directly(self) -> bool:
        """True for a CPU cache: :meth:`write_page` copies a page into its block with no staging."""
        return self._host_views is not None

    @property
    def publishes_from_cache(self) -> bool:
        """True for a CPU cache whose blocks are one run per layer: :meth:`page_parts` hands the
        publish the cache's own memory, with no gathered copy."""
        return self._blocks_are_runs

    def page_parts(self, block_id: int) -> PageParts:
        """The page image of ``block_id`` as its layers' runs in the cache's memory, in image order
        (no copy; the publish copies them into the Manager's slot). Only when
        :attr:`publishes_from_cache`."""
        return PageParts([view[block_id] for view in self._host_views])

    def write_page(self, block_id: int, page: memoryview) -> None:
        """Writes one page image (``page_bytes`` bytes, e.g. a leased arena page) into
        ``block_id`` of every layer, one strided copy per layer; CPU caches only."""
        image = np.frombuffer(page, dtype=np.uint8, count=self.page_bytes)
        for layer, view in enumerate(self._host_views):
            block = view[block_id]
            block[...] = image[layer * self.layer_bytes:(layer + 1) * self.layer_bytes].reshape(block.shape)

    def scatter(self, block_ids: Sequence[int], images: torch.Tensor) -> None:
        """Writes page images (CPU uint8 ``[k, page_bytes]``) into ``block_ids`` of every layer."""
        if images.shape != (len(block_ids), self.page_bytes):
            raise ValueError(f"images {tuple(images.shape)} != ({len(block_ids)}, {self.page_bytes})")
        index = self._index(block_ids)
        source = images.to(self.device)
        for layer, view in enumerate(self._views):
            part = source[:, layer * self.layer_bytes:(layer + 1) * self.layer_bytes]
            view.index_copy_(0, index, part.reshape(len(block_ids), *view.shape[1:]))
