"""Identity probe for the OrbitKV vLLM tests: light helpers, and a ``__main__`` that prints the
namespace digests of the test model's ``VllmConfig`` and ``OffloadingConfig`` as JSON, so a test
can compare them with those of another process (another ``PYTHONHASHSEED``).

Importing this module imports neither vLLM nor torch; ``main`` does.

Usage: ``python -m tests_integration.vllm.tier_probe MODEL_DIR``
"""

from __future__ import annotations

import json
import os
import sys


def make_model_dir(root: str, name: str = "tiny-llama", weights: bytes = b"weights-v1") -> str:
    """A local model directory (config, tokenizer and weight files) for identity digests."""
    path = os.path.join(root, name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                   "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 512,
                   "torch_dtype": "float16", "rms_norm_eps": 1e-5}, f)
    with open(os.path.join(path, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "model": {"type": "WordLevel", "vocab": {"a": 0}}}, f)
    with open(os.path.join(path, "model.safetensors"), "wb") as f:
        f.write(weights)
    return path


def vllm_config(model_dir: str, dtype: str = "float16"):
    """A real ``VllmConfig`` for the local model (CPU device, no tokenizer load)."""
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, ParallelConfig, VllmConfig
    model = ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype=dtype)
    return VllmConfig(model_config=model, cache_config=CacheConfig(block_size=16),
                      parallel_config=ParallelConfig(), device_config=DeviceConfig("cpu"))


def digests(model_dir: str) -> dict:
    """The namespace digests the tests compare across processes."""
    from orbitkv.vllm.identity import offload_identity, vllm_identity
    from tests_integration.vllm.tier_support import ROW_BYTES, offloading_config
    config = vllm_config(model_dir)
    offload = offloading_config(model=model_dir, socket_path="/nonexistent", engine_id="probe")
    return {
        "vllm": vllm_identity(config, page_tokens=16, kv_layout="probe").namespace().digest_hex(),
        "offload": offload_identity(offload, row_bytes=ROW_BYTES).namespace().digest_hex(),
        "hashseed": os.environ.get("PYTHONHASHSEED", ""),
    }


def main(argv) -> int:
    print(json.dumps(digests(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
