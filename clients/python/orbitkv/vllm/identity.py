"""OrbitKV namespace identity of a vLLM engine (targets vLLM 0.33 ``VllmConfig``).

Owns :func:`vllm_identity`, which fills an :class:`orbitkv.identity.EngineIdentity` from the
engine's own ``VllmConfig`` so that two engines share pages only when their KV bytes are
interchangeable, and :func:`offload_identity`, the same from the ``OffloadingConfig`` that vLLM's
native offloading hands a secondary tier (a tier never sees the ``VllmConfig``). Attribute names
read from ``VllmConfig`` (vLLM 0.33.0):

- ``model_config.model`` (HF id or local dir), ``.revision``, ``.tokenizer``, ``.tokenizer_revision``,
  ``.dtype`` (a ``torch.dtype`` once the config is built);
- ``cache_config.cache_dtype`` (``"auto"`` = the model dtype, resolved here so that ``auto`` and the
  explicit model dtype name the same pages), ``cache_config.block_size`` (only a default for
  ``page_tokens``: the caller passes the size of *its* page, e.g. an offloading chunk);
- ``parallel_config.tensor_parallel_size``, ``.pipeline_parallel_size``, ``.data_parallel_size``,
  ``.data_parallel_rank``, ``.decode_context_parallel_size``, ``.prefill_context_parallel_size``
  (the context-parallel sizes change how a page is sharded, so they enter the layout descriptor).
  vLLM runs each DP replica of a dense model as an independent engine with
  ``data_parallel_size = 1`` and ``data_parallel_rank = 0``
  (``ParallelConfig.reconfigure_for_independent_dp_rank``), so those replicas share pages.

Not part of the namespace on purpose: the request's ``cache_salt`` and LoRA adapter. vLLM folds both
into the block hash (``generate_block_hash_extra_keys``: ``("lora", name, path)`` on every block,
``("cache_salt", salt)`` on the first block, chained through the parent hash), so they are already
in every page name the engine hands out; the identity records ``adapter_id = ""`` unless the caller
names one.

Thread model: pure functions, callable from any thread. It imports vLLM's parallel state lazily
and only when a rank is not given, so importing this module imports neither torch nor vLLM.
Invariant: the result depends only on the configuration and the bytes of a local model directory,
never on a per-process value; the weights digest of a local directory is cached by
:func:`orbitkv.identity.weights_digest`, so only the first start reads the weights.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional

from ..identity import EngineIdentity, dtype_name, join_layout, tokenizer_digest, weights_digest


def vllm_identity(vllm_config: Any, *, page_tokens: Optional[int] = None, kv_layout: str,
                  tp_rank: Optional[int] = None, pp_rank: Optional[int] = None,
                  dp_rank: Optional[int] = None, weights: Optional[str] = None,
                  adapter_id: str = "") -> EngineIdentity:
    """The :class:`EngineIdentity` of the engine described by ``vllm_config``.

    ``page_tokens`` is the number of tokens in one OrbitKV page (default: the engine's block size);
    ``kv_layout`` is the caller's own layout descriptor of a page (e.g. from
    :func:`orbitkv.identity.join_layout`). Ranks come from the arguments, else from vLLM's
    initialised parallel state, else 0 (the DP rank from ``parallel_config.data_parallel_rank``).
    ``weights`` overrides the weights digest (e.g. for a hub model whose files are not local);
    without it a local model directory is hashed, and a hub id leaves the digest unknown (the
    namespace then names ``model@revision``)."""
    model = vllm_config.model_config
    cache = vllm_config.cache_config
    parallel = vllm_config.parallel_config
    if page_tokens is None:
        page_tokens = int(cache.block_size)
    dtype = dtype_name(model.dtype)
    kv_dtype = str(cache.cache_dtype)
    if kv_dtype == "auto":
        kv_dtype = dtype
    model_dir = model.model
    tokenizer_dir = getattr(model, "tokenizer", None) or model_dir
    revision = model.revision or "unspecified"
    tok_digest = tokenizer_digest(tokenizer_dir)
    if not tok_digest and tokenizer_dir != model_dir:
        tok_digest = f"unknown:{tokenizer_dir}@{getattr(model, 'tokenizer_revision', None) or revision}"
    layout = kv_layout
    dcp = int(getattr(parallel, "decode_context_parallel_size", 1) or 1)
    pcp = int(getattr(parallel, "prefill_context_parallel_size", 1) or 1)
    if dcp > 1 or pcp > 1:
        layout = f"{layout};dcp={dcp};pcp={pcp}"
    state_tp, state_pp = _parallel_state_ranks() if tp_rank is None or pp_rank is None else (None, None)
    return EngineIdentity(
        model_id=str(model.model), revision=revision,
        weights_digest=weights if weights is not None else weights_digest(model_dir),
        tokenizer_digest=tok_digest, adapter_id=adapter_id,
        dtype=dtype, kv_dtype=kv_dtype, page_tokens=int(page_tokens), kv_layout=layout,
        tp_size=int(parallel.tensor_parallel_size),
        tp_rank=int(tp_rank if tp_rank is not None else (state_tp or 0)),
        pp_size=int(parallel.pipeline_parallel_size),
        pp_rank=int(pp_rank if pp_rank is not None else (state_pp or 0)),
        dp_size=int(parallel.data_parallel_size),
        dp_rank=int(dp_rank if dp_rank is not None else (parallel.data_parallel_rank or 0)))


def _parallel_state_ranks() -> tuple:
    """(tp_rank, pp_rank) from vLLM's parallel state when it is initialised, else (None, None)."""
    try:
        from vllm.distributed import parallel_state as ps
        if not ps.model_parallel_is_initialized():
            return None, None
        return ps.get_tensor_model_parallel_rank(), ps.get_pipeline_model_parallel_rank()
    except Exception:  # vLLM absent or its state half-built: the caller's default rank 0 holds
        return None, None


def offload_identity(offloading_config: Any, *, row_bytes: int, model_dtype: Optional[str] = None,
                     revision: Optional[str] = None, weights: Optional[str] = None,
                     tokenizer: Optional[str] = None) -> EngineIdentity:
    """The :class:`EngineIdentity` of the pages a native-offloading tier stores: one page is one
    offloaded chunk row of the primary host region (``row_bytes``, every worker's bytes of the
    chunk side by side, ``W0 | W1 | ... | pad``), so the namespace has TP/PP rank 0 and the sizes
    of the whole engine.

    Read from ``offloading_config`` (``vllm.v1.kv_offload.config.OffloadingConfig``): ``model.name``,
    ``model.dtype`` (the KV dtype: the cache dtype, or the model dtype when it is ``auto``),
    ``cache.tokens_per_hash`` and ``.blocks_per_chunk``, every group's ``group_id``,
    ``tokens_per_block``, ``sliding_window_size_in_chunks`` and layer names (as a digest),
    ``worker_kv_bytes_per_block``, ``parallel`` (``world_size``, ``tp_size``, ``pp_size``,
    ``pcp_size``, ``dcp_size``, ``data_parallel_index``, ``data_parallel_size``: 1 with any index for
    the independent replicas of a dense model, which share pages),
    ``replicated_layout``, ``canonical_layout`` and ``kv_cache_layout``.

    Not in an ``OffloadingConfig``, so given by the tier's configuration: ``model_dtype`` (default:
    the KV dtype, exact whenever the cache dtype is ``auto``), ``revision``, ``weights`` (default:
    the digest of ``model.name`` when it is a local directory) and ``tokenizer`` (a directory)."""
    cfg = offloading_config
    parallel = cfg.parallel
    groups = ",".join(
        f"g{g.group_id}/{g.tokens_per_block}/{g.sliding_window_size_in_chunks}/"
        + hashlib.sha256("\0".join(g.layer_names).encode()).hexdigest()[:16]
        for g in cfg.groups)
    layout = join_layout([
        "vllm-offload", f"row={int(row_bytes)}", f"wkvb={cfg.worker_kv_bytes_per_block}",
        f"bpc={cfg.cache.blocks_per_chunk}", f"tph={cfg.cache.tokens_per_hash}", f"groups={groups}",
        f"world={parallel.world_size}", f"pcp={parallel.pcp_size}", f"dcp={parallel.dcp_size}",
        f"layout={cfg.kv_cache_layout}", f"replicated={int(bool(cfg.replicated_layout))}",
        f"canonical={int(bool(cfg.canonical_layout))}"])
    model_dir = cfg.model.name
    tokenizer_dir = tokenizer or model_dir
    kv_dtype = dtype_name(cfg.model.dtype)
    dp_size = int(parallel.data_parallel_size)
    # A dense model's DP replicas run as independent engines (data_parallel_size 1) whose
    # data_parallel_index still counts replicas: their pages are interchangeable, rank 0.
    dp_rank = int(parallel.data_parallel_index) if int(parallel.data_parallel_index) < dp_size else 0
    return EngineIdentity(
        model_id=str(model_dir), revision=revision or "unspecified",
        weights_digest=weights if weights is not None else weights_digest(model_dir),
        tokenizer_digest=tokenizer_digest(tokenizer_dir),
        dtype=dtype_name(model_dtype) if model_dtype else kv_dtype, kv_dtype=kv_dtype,
        page_tokens=int(cfg.groups[0].tokens_per_block) * int(cfg.cache.blocks_per_chunk),
        kv_layout=layout, tp_size=int(parallel.tp_size), tp_rank=0, pp_size=int(parallel.pp_size),
        pp_rank=0, dp_size=dp_size, dp_rank=dp_rank)
