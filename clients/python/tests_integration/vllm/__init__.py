"""Tests of the vLLM integrations against the installed vllm package (environment ``vllm``).

The PyPI vllm wheel is the CUDA build; on a machine without a GPU it detects no platform, so the
CPU attention backend (whose KV-cache layout the connector tests use) needs
``VLLM_TARGET_DEVICE=cpu`` before vLLM is first imported: set here, ahead of every test module.
"""

import os

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
