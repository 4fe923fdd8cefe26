"""OrbitKV for LMCache: the L2 connector (:mod:`orbitkv.lmcache.adapter`) and its config spec.

Importing this package imports nothing of LMCache's or of the connector; :func:`l2_adapter_spec`
builds the ``--l2-adapter`` JSON object that makes an LMCache MP server (``lmcache server``) or
``lmcache bench l2`` load the connector through LMCache's own ``native_plugin`` adapter type.
"""

from __future__ import annotations

from typing import Any, Dict

MODULE_PATH = "orbitkv.lmcache.adapter"
CLASS_NAME = "OrbitKvConnector"


def l2_adapter_spec(socket_path: str, dtype: str, chunk_size: int, **params: Any) -> Dict[str, Any]:
    """The ``--l2-adapter`` object (serialise it with ``json.dumps``); ``params`` are the
    connector's optional keyword arguments (see :class:`orbitkv.lmcache.adapter.OrbitKvConnector`)."""
    adapter_params = {"socket_path": socket_path, "dtype": dtype, "chunk_size": chunk_size, **params}
    return {"type": "native_plugin", "module_path": MODULE_PATH, "class_name": CLASS_NAME,
            "adapter_params": adapter_params}
