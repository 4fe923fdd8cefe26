"""vLLM adapters for OrbitKV (import-light: importing this package imports neither torch nor vLLM).

- :mod:`orbitkv.vllm.identity`: the namespace identity of a vLLM engine (``vllm_identity``).
- :mod:`orbitkv.vllm.tier`: ``OrbitKvTier``, a secondary tier for vLLM's native KV offloading
  (``TieringOffloadingSpec``); importing it imports vLLM.
"""
