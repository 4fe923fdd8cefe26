"""A vLLM engine without a model, for driving OrbitKvConnector through vLLM's own classes.

:class:`CpuEngine` does what vLLM's ``EngineCore`` does before it serves, with the installed
vLLM 0.33.0 functions, on the CPU platform (``VLLM_TARGET_DEVICE=cpu``, set here before vLLM
chooses its platform):

- a ``VllmConfig`` for a tiny Llama whose ``config.json`` is written to a temp dir (no weights,
  no tokenizer, ``HF_HUB_OFFLINE=1``), with the connector in ``kv_transfer_config``;
- real ``Attention`` layers (the platform picks ``CPUAttentionBackend``), their ``KVCacheSpec``s,
  ``resolve_kv_cache_layout``, ``get_global_kv_cache_groups``, ``get_kv_cache_configs`` and
  ``allocate_kv_cache`` — the per-layer tensors the CPU model runner registers;
- the worker connector from ``KVConnectorFactory`` (role WORKER) with ``register_kv_caches``,
  and the real ``Scheduler`` (which builds the scheduler connector itself); the handshake the
  engine core passes from workers to the scheduler (``set_xfer_handshake_metadata_pp_aware``);
- :meth:`step`: ``Scheduler.schedule()`` (timed: where the scheduler connector's lookups run),
  then the worker hooks in the model runner's order
  (``KVConnectorModelRunnerMixin._get_kv_connector_output``), with the forward replaced by a
  callback that writes KV bytes into the blocks being computed, then
  ``Scheduler.update_from_output`` with one sampled token per request that finished its prompt.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from vllm.config import (  # noqa: E402
    CacheConfig, DeviceConfig, KVTransferConfig, ModelConfig, SchedulerConfig, VllmConfig, set_current_vllm_config)
from vllm.distributed.kv_transfer import kv_transfer_state  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402
from vllm.forward_context import set_forward_context  # noqa: E402
from vllm.model_executor.layers.attention import Attention  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import get_hash_fn_by_name  # noqa: E402
from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout  # noqa: E402
from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs  # noqa: E402
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.outputs import ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402
from vllm.v1.worker.kv_connector_model_runner_mixin import KVConnectorModelRunnerMixin  # noqa: E402
from vllm.v1.worker.utils import allocate_kv_cache, select_common_block_size  # noqa: E402

LAYERS, HEADS, KV_HEADS, HEAD_SIZE, BLOCK = 2, 4, 2, 32, 32


def tiny_llama_dir(parent: str, dtype: str = "bfloat16") -> str:
    """A model dir holding only a Llama ``config.json`` (vLLM reads no weights to plan a cache)."""
    path = tempfile.mkdtemp(prefix="tiny-llama-", dir=parent)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HEADS * HEAD_SIZE,
                   "intermediate_size": 256, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
                   "head_dim": HEAD_SIZE, "num_hidden_layers": LAYERS, "vocab_size": 1000,
                   "max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "torch_dtype": dtype}, f)
    return path


def connector_config(socket_path: str, timeout_s: float = 2.0, **extra) -> KVTransferConfig:
    return KVTransferConfig(kv_connector="OrbitKvConnector", kv_connector_module_path="orbitkv.vllm.connector",
                            kv_role="kv_both", kv_load_failure_policy="recompute",
                            kv_connector_extra_config={"socket_path": socket_path, "timeout_s": timeout_s, **extra})


@dataclass
class Step:
    """What one engine step did."""
    output: object                       # SchedulerOutput
    kv_output: object                    # KVConnectorOutput
    computed: Dict[str, range] = field(default_factory=dict)  # req id -> token positions computed
    schedule_s: float = 0.0              # wall time of Scheduler.schedule() (the connector's lookups)


class CpuEngine:
    """One engine: config, KV cache tensors, worker connector, scheduler. See the module header."""

    def __init__(self, model_dir: str, socket_path: str, *, dtype: str = "bfloat16", num_blocks: int = 64,
                 timeout_s: float = 2.0, max_num_batched_tokens: int = 512, **extra):
        self.vllm_config = VllmConfig(
            model_config=ModelConfig(model=model_dir, tokenizer=model_dir, skip_tokenizer_init=True, dtype=dtype,
                                     max_model_len=512),
            cache_config=CacheConfig(block_size=BLOCK, enable_prefix_caching=False,
                                     num_gpu_blocks_override=num_blocks),
            device_config=DeviceConfig("cpu"),
            scheduler_config=SchedulerConfig(max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=8,
                                             max_model_len=512, is_encoder_decoder=False),
            kv_transfer_config=connector_config(socket_path, timeout_s, **extra))
        cfg = self.vllm_config
        with set_current_vllm_config(cfg):
            self.layers = [Attention(num_heads=HEADS, head_size=HEAD_SIZE, scale=HEAD_SIZE ** -0.5,
                                     num_kv_heads=KV_HEADS, prefix=f"model.layers.{i}.self_attn.attn")
                           for i in range(LAYERS)]
        specs = {layer.layer_name: layer.get_kv_cache_spec(cfg) for layer in self.layers}
        self.backend = self.layers[0].get_attn_backend()
        layouts = [[layout.name for layout in get_supported_kv_cache_layouts([self.backend])]]
        self.layout = resolve_kv_cache_layout(cfg, layouts, list(specs.values()))
        groups = get_global_kv_cache_groups(cfg, [specs])
        page = next(iter(specs.values())).page_size_bytes
        self.kv_cache_config = get_kv_cache_configs(cfg, [specs], [num_blocks * page * LAYERS], groups)[0]
        self.kv_cache_config.kv_cache_layout = cfg.cache_config.kv_cache_layout
        cfg.cache_config.num_gpu_blocks = self.kv_cache_config.num_blocks
        spec = self.kv_cache_config.kv_cache_groups[0].kv_cache_spec
        kernel = select_common_block_size(spec.block_size, [self.backend], [spec])
        self.kv_caches = allocate_kv_cache(self.kv_cache_config, torch.device("cpu"), self.layout, [kernel])
        self.layer_names = list(self.kv_cache_config.kv_cache_groups[0].layer_names)

        self.worker = KVConnectorFactory.create_connector(cfg, KVConnectorRole.WORKER, self.kv_cache_config)
        self.worker.register_kv_caches(self.kv_caches)
        self.scheduler = Scheduler(vllm_config=cfg, kv_cache_config=self.kv_cache_config,
                                   structured_output_manager=StructuredOutputManager(cfg), block_size=BLOCK,
                                   hash_block_size=BLOCK)
        self.connector = self.scheduler.connector
        handshake = self.worker.get_handshake_metadata()
        self.connector.set_xfer_handshake_metadata_pp_aware({(0, 0): handshake})
        hash_fn = get_hash_fn_by_name(cfg.cache_config.prefix_caching_hash_algo)
        init_none_hash(hash_fn)
        self.block_hasher = get_request_block_hasher(BLOCK, hash_fn)

    # -- requests --------------------------------------------------------------------------------

    def request(self, request_id: str, tokens: List[int], *, cache_salt: Optional[str] = None,
                max_tokens: int = 4) -> Request:
        request = Request(request_id, list(tokens), SamplingParams(max_tokens=max_tokens, ignore_eos=True), None,
                          cache_salt=cache_salt, block_hasher=self.block_hasher)
        self.scheduler.add_request(request)
        return request

    def step(self, forward: Optional[Callable[[str, List[int], range], None]] = None,
             before_worker: Optional[Callable[[object], None]] = None) -> Step:
        """One engine step; ``forward(req_id, block_ids, positions)`` stands in for the model
        writing the KV of ``positions`` into the request's blocks; ``before_worker(output)`` runs
        between scheduling and the worker hooks (where a Manager may die)."""
        started = time.monotonic()
        output = self.scheduler.schedule()
        schedule_s = time.monotonic() - started
        if before_worker is not None:
            before_worker(output)
        computed: Dict[str, range] = {}
        previous = kv_transfer_state._KV_CONNECTOR_AGENT
        kv_transfer_state._KV_CONNECTOR_AGENT = self.worker  # what ensure_kv_transfer_initialized sets
        try:
            with set_forward_context(None, self.vllm_config), \
                    KVConnectorModelRunnerMixin._get_kv_connector_output(output) as kv_output:
                for req_id, count in output.num_scheduled_tokens.items():
                    start = self._computed_before(output, req_id)
                    computed[req_id] = range(start, start + count)
                    if forward is not None:
                        forward(req_id, self.block_ids(req_id), computed[req_id])
        finally:
            kv_transfer_state._KV_CONNECTOR_AGENT = previous
        req_ids = list(output.num_scheduled_tokens)
        sampled = []
        for req_id in req_ids:
            request = self.scheduler.requests[req_id]
            done = computed[req_id].stop >= request.num_tokens
            sampled.append([7] if done else [])
        runner_output = ModelRunnerOutput(req_ids=req_ids, req_id_to_index={r: i for i, r in enumerate(req_ids)},
                                          sampled_token_ids=sampled, kv_connector_output=kv_output)
        self.scheduler.update_from_output(output, runner_output)
        return Step(output, kv_output, computed, schedule_s)

    @staticmethod
    def _computed_before(output, req_id: str) -> int:
        for new in output.scheduled_new_reqs:
            if new.req_id == req_id:
                return new.num_computed_tokens
        cached = output.scheduled_cached_reqs
        return cached.num_computed_tokens[cached.req_ids.index(req_id)]

    def block_ids(self, req_id: str) -> List[int]:
        return list(self.scheduler.kv_cache_manager.get_block_ids(req_id)[0])

    # -- KV bytes --------------------------------------------------------------------------------

    def block_bytes(self, block_id: int) -> bytes:
        """Block ``block_id`` of every layer, as the connector's page image orders it."""
        return b"".join(bytes(self.kv_caches[name][block_id].contiguous().view(torch.uint8).flatten().numpy())
                        for name in self.layer_names)

    def fill_blocks(self, block_ids: List[int], generator: torch.Generator) -> None:
        """Writes random bytes into whole blocks of every layer (the model's KV writes)."""
        for name in self.layer_names:
            view = self.kv_caches[name].view(torch.uint8)
            for block_id in block_ids:
                view[block_id].copy_(torch.randint(0, 256, view[block_id].shape, dtype=torch.uint8,
                                                   generator=generator))

    def close(self) -> None:
        self.worker.shutdown()
        self.connector.shutdown()


def cleanup_dir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
