"""OrbitKV quick start: publish a prompt prefix's KV pages, then restore them into an engine region.

Start a Manager first (`bin/orbitkv manager`), then run, from the repository root:

    PYTHONPATH=clients/python python3 clients/python/examples/quickstart.py [SOCKET]

SOCKET defaults to ./var/orbitkv/manager.sock (the Manager's default). The script registers an
engine instance, publishes the four 16-token pages of a 64-token prefix (fake KV bytes), asks
for the prefix of a 65-token prompt with target ENGINE_RESTORE, has the Manager copy the leased
pages into a shared-memory region, checks the bytes, and releases. Run it twice: the second run
finds the pages already cached (ALREADY_RESIDENT) and still restores them.
"""

import os
import sys
import tempfile

from orbitkv.client import Client, PageToPublish
from orbitkv.protocol import CompletionTarget, Outcome
from orbitkv.state import FullGroup, Namespace, RecoveryContract, page_hashes

PAGE_TOKENS = 16
PAGE_BYTES = 8192  # one page's KV bytes for this toy model


def main(socket_path: str) -> int:
    # [quickstart]
    namespace = Namespace(model_id="quickstart/tiny-llama", revision="r1", weights_digest="sha256:00",
                          tokenizer_digest="sha256:01", adapter_id="", dtype="bf16", kv_layout="nhd",
                          page_tokens=PAGE_TOKENS, tp_size=1, tp_rank=0, pp_size=1, pp_rank=0, format_version=1)
    contract = RecoveryContract(PAGE_TOKENS, [FullGroup(0)])
    prompt = list(range(1000, 1065))                      # 65 tokens: 4 full pages + 1
    hashes = page_hashes(namespace.digest(), prompt, PAGE_TOKENS)  # one chained hash per full page
    images = [bytes([i + 1]) * PAGE_BYTES for i in range(len(hashes))]

    region_dir = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    region_path = os.path.join(region_dir, f"orbitkv-quickstart-{os.getpid()}.region")
    try:  # the region file must outlive the connection (protocol.md 5.2)
        with Client(socket_path) as client:
            client.register("quickstart-engine", epoch=1, namespace=namespace, contract=contract)

            # 1. Publish: reserve slots, write the page bytes into the shared arena, commit.
            outcomes = client.publish([PageToPublish(0, h, img) for h, img in zip(hashes, images)])
            print("published:", [o.value for o in outcomes])

            # 2. Query the prefix for ENGINE_RESTORE; a PENDING answer settles by itself.
            result = client.wait_settled(client.query(1, {0: hashes}, prompt_tokens=len(prompt),
                                                      target=CompletionTarget.ENGINE_RESTORE))
            print(f"hit={result.hit} boundary_tokens={result.boundary_tokens}")
            if not result.hit:
                return 1

            # 3. Restore: the Manager copies the leased pages into our shared-memory region.
            region = client.register_region(region_path, PAGE_BYTES, len(hashes))
            done = client.restore(1, region, Client.resident_pages(result))
            ok = done.outcome == Outcome.OK and all(region.page(i) == images[i] for i in range(len(hashes)))
            print(f"restored {len(hashes)} pages: {'bytes equal' if ok else 'MISMATCH'}")
            client.release(1)
            print("query_hits =", client.stats().get("query_hits"))
            # [/quickstart]
            return 0 if ok else 1
    finally:
        if os.path.exists(region_path):
            os.unlink(region_path)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("var", "orbitkv", "manager.sock")))
