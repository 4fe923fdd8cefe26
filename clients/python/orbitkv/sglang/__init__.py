"""SGLang adapters for OrbitKV (import-light: importing this package imports neither torch nor SGLang).

- :mod:`orbitkv.sglang.backend`: ``OrbitKvHiCacheStorage``, an L3 storage backend for SGLang's
  hierarchical cache (HiCache); importing it imports SGLang. Load it with::

      --hicache-storage-backend dynamic --hicache-storage-backend-extra-config
      '{"backend_name": "orbitkv", "module_path": "orbitkv.sglang.backend",
        "class_name": "OrbitKvHiCacheStorage", "interface_v1": 1,
        "socket_path": "/run/orbitkv/manager.sock", "timeout_s": 2.0}'
"""
