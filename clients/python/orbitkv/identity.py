"""Namespace identity for engine adapters (stdlib only).

An engine adapter never invents a namespace: it fills an :class:`EngineIdentity` from the
engine's own configuration and takes :meth:`EngineIdentity.namespace`. Every field that changes
the bytes of a KV page, or which pages may be exchanged, is a field here, and every field enters
the namespace digest (docs/state-contract.md 1.1), so two configurations that differ in any of
them never share a page:

- model id and revision, the weights digest (content of the weight files, :func:`weights_digest`),
  the tokenizer digest and the LoRA adapter;
- the model dtype and the KV-cache dtype (``dtype`` field: ``"<dtype>;kv=<kv_dtype>"``);
- the page size in tokens (``page_tokens``);
- the engine's page layout (``kv_layout``: the engine's own layout descriptor, then ``;dp=r/n``),
  TP and PP rank and size (their own fields), DP rank and size (in ``kv_layout``).

The canonical namespace encoding has seven strings and six integers; the KV dtype and the DP axis
ride in the ``dtype`` and ``kv_layout`` strings instead of new fields so that the wire format and
every existing Manager stay as they are (protocol.md 3.1).

A request's ``cache_salt`` is per request, not per engine: it enters the page *name*
(:func:`salted_name`), so pages of two salts never share a StateKey inside one namespace.

Nothing here depends on a per-process value: Python's ``hash()`` is salted per process and never
used; digests are SHA-256 of bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from .state import Namespace

#: Version of the page images an adapter writes; part of the namespace (``format_version``).
ADAPTER_FORMAT_VERSION = 1

_SALT_DOMAIN = b"orbitkv/cache-salt/v1\0"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json", "merges.txt",
                    "special_tokens_map.json")


@dataclass(frozen=True)
class EngineIdentity:
    """What makes an engine's KV pages interchangeable; see the module header for each field."""
    model_id: str
    dtype: str
    kv_dtype: str
    page_tokens: int
    kv_layout: str
    revision: str = "unspecified"
    weights_digest: str = ""
    tokenizer_digest: str = ""
    adapter_id: str = ""
    tp_size: int = 1
    tp_rank: int = 0
    pp_size: int = 1
    pp_rank: int = 0
    dp_size: int = 1
    dp_rank: int = 0

    def __post_init__(self) -> None:
        for name in ("model_id", "dtype", "kv_dtype", "kv_layout"):
            if not getattr(self, name):
                raise ValueError(f"EngineIdentity.{name} must not be empty")
        if self.dp_size < 1 or not 0 <= self.dp_rank < self.dp_size:
            raise ValueError(f"dp_rank must be in [0, dp_size): {self.dp_rank} of {self.dp_size}")

    def namespace(self) -> Namespace:
        """The namespace this identity registers (raises StateError for an invalid field)."""
        weights = self.weights_digest or f"unknown:{self.model_id}@{self.revision}"
        tokenizer = self.tokenizer_digest or f"unknown:{self.model_id}@{self.revision}"
        return Namespace(model_id=self.model_id, revision=self.revision or "unspecified",
                         weights_digest=weights, tokenizer_digest=tokenizer, adapter_id=self.adapter_id,
                         dtype=f"{self.dtype};kv={self.kv_dtype}",
                         kv_layout=f"{self.kv_layout};dp={self.dp_rank}/{self.dp_size}",
                         page_tokens=self.page_tokens, tp_size=self.tp_size, tp_rank=self.tp_rank,
                         pp_size=self.pp_size, pp_rank=self.pp_rank, format_version=ADAPTER_FORMAT_VERSION)


def salted_name(name: bytes, cache_salt: Optional[str]) -> bytes:
    """A page name with the request's ``cache_salt`` folded in: ``name`` itself without a salt,
    else SHA-256(domain | u32 salt length | salt UTF-8 | name). Deterministic across processes."""
    if not cache_salt:
        return bytes(name)
    salt = cache_salt.encode("utf-8")
    return hashlib.sha256(_SALT_DOMAIN + struct.pack("<I", len(salt)) + salt + bytes(name)).digest()


def _digest_files(paths: Sequence[str], chunk_bytes: int = 1 << 22) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(struct.pack("<I", len(os.path.basename(path).encode())) + os.path.basename(path).encode())
        h.update(struct.pack("<Q", os.path.getsize(path)))
        with open(path, "rb") as f:
            while True:
                chunk = f.read(chunk_bytes)
                if not chunk:
                    break
                h.update(chunk)
    return "sha256:" + h.hexdigest()


def _files(directory: str, accept) -> list:
    return sorted(os.path.join(directory, n) for n in os.listdir(directory)
                  if accept(n) and os.path.isfile(os.path.join(directory, n)))


def weights_digest(model_path: str, cache_path: Optional[str] = None) -> str:
    """SHA-256 over the weight files of a local model directory (name, size and content of every
    ``*.safetensors``/``*.bin``/``*.pt``/``*.gguf``, in name order), or "" when ``model_path`` is not
    a local directory (the caller then names the digest, or the namespace says ``unknown:``).

    Hashing reads every byte once (about 1 GB/s here); the result is kept in ``cache_path`` (a
    JSON file; default ``$XDG_CACHE_HOME/orbitkv/weights-digests.json``) keyed by each file's
    real path, size and modification time, so a restart does not read the weights again."""
    if not os.path.isdir(model_path):
        return ""
    files = _files(model_path, lambda n: n.endswith(_WEIGHT_SUFFIXES))
    if not files:
        return ""
    stamp = json.dumps([[os.path.realpath(f), os.stat(f).st_size, os.stat(f).st_mtime_ns] for f in files])
    cache_path = cache_path or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                            "orbitkv", "weights-digests.json")
    cache = _read_json(cache_path)
    if stamp in cache:
        return cache[stamp]
    digest = _digest_files(files)
    cache[stamp] = digest
    try:
        os.makedirs(os.path.dirname(cache_path), exist_ok=True)
        tmp = f"{cache_path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(dict(list(cache.items())[-256:]), f)  # bounded: the 256 newest models
        os.replace(tmp, cache_path)
    except OSError:
        pass  # an unwritable cache costs the next start one more read of the weights
    return digest


def tokenizer_digest(model_path: str) -> str:
    """SHA-256 over the tokenizer files of a local model directory, or "" when there are none."""
    if not os.path.isdir(model_path):
        return ""
    files = _files(model_path, lambda n: n in _TOKENIZER_FILES)
    return _digest_files(files) if files else ""


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def dtype_name(dtype: object) -> str:
    """A torch dtype (or a string) as a stable name: ``torch.bfloat16`` -> ``bfloat16``."""
    text = str(dtype)
    return text[len("torch."):] if text.startswith("torch.") else text


def join_layout(parts: Iterable[object]) -> str:
    """A layout descriptor from its parts, e.g. ``join_layout(["vllm", "chunk", (2, 16, 4, 64)])``."""
    return ":".join(str(p).replace(" ", "") for p in parts)
