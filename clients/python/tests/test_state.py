"""orbitkv.state against the shared vectors (docs/vectors/state-vectors.json) and worked cases
that the Java tests also check (RecoveryContractTest, NamespaceTest)."""

import json
import os
import random
import struct
import unittest

from orbitkv import state
from orbitkv.state import (CheckpointCoverage, FullGroup, Namespace, PageCoverage, RecoveryContract,
                           RecurrentGroup, SlidingWindowGroup, StateError)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
with open(os.path.join(ROOT, "docs", "vectors", "state-vectors.json"), encoding="utf-8") as f:
    VECTORS = json.load(f)

SAMPLE_CONTRACT = {"page_tokens": 16, "groups": [{"id": 0, "kind": "full"},
                                                 {"id": 1, "kind": "sliding_window", "window": 4096, "sink": 4},
                                                 {"id": 2, "kind": "recurrent"}]}
SAMPLE_COVERAGE = {"0": {"pages": [[0, 40]]}, "1": {"pages": [[30, 64]]}, "2": {"checkpoints": [256, 512]}}


def namespaces():
    return {n["name"]: Namespace.from_json(n["fields"]) for n in VECTORS["namespaces"]}


class NamespaceVectors(unittest.TestCase):
    def test_canonical_bytes_and_digest(self):
        for n in VECTORS["namespaces"]:
            ns = Namespace.from_json(n["fields"])
            with self.subTest(n["name"]):
                self.assertEqual(ns.canonical_bytes().hex(), n["canonical_hex"])
                self.assertEqual(ns.digest_hex(), n["digest"])
                self.assertEqual(Namespace.decode(bytes.fromhex(n["canonical_hex"])), ns)

    def test_every_field_changes_the_digest(self):
        base = namespaces()["sample"]
        changes = {"model_id": "m2", "revision": "r2", "weights_digest": "w", "tokenizer_digest": "t",
                   "adapter_id": "a", "dtype": "fp16", "kv_layout": "hnd", "page_tokens": 32, "tp_size": 2,
                   "pp_size": 2, "format_version": 2}
        for name, value in changes.items():
            fields = base.to_json()
            fields[name] = value
            with self.subTest(name):
                self.assertNotEqual(Namespace.from_json(fields).digest(), base.digest())
        ranks = base.to_json()
        ranks.update(tp_size=2, tp_rank=1)
        other = base.to_json()
        other.update(tp_size=2, tp_rank=0)
        self.assertNotEqual(Namespace.from_json(ranks).digest(), Namespace.from_json(other).digest())

    def test_malformed_encodings_are_rejected_with_a_reason(self):
        good = namespaces()["sample"].canonical_bytes()
        cases = {
            b"": "truncated header",
            b"X" + good[1:]: "bad magic",
            good[:4] + b"\x02" + good[5:]: "unsupported encoding version 2",
            good[:-1]: "expected 24 bytes",
            good + b"\x00": "expected 24 bytes",
            good[:15]: "truncated length of revision at offset 13",
            good[:12] + b"\xff" + good[13:]: "not valid UTF-8",
            good[:8] + struct.pack("<I", 0x7FFFFFFF) + good[12:]: "exceeds 1024",
        }
        for data, reason in cases.items():
            with self.subTest(reason):
                with self.assertRaises(StateError) as ctx:
                    Namespace.decode(data)
                self.assertIn(reason, str(ctx.exception))

    def test_invalid_fields_and_json(self):
        fields = namespaces()["sample"].to_json()
        for name, value, reason in [("model_id", "", "model_id"), ("page_tokens", 0, "page_tokens"),
                                    ("tp_rank", 1, "tp_rank"), ("format_version", 0, "format_version"),
                                    ("page_tokens", "16", "integer"), ("model_id", "\ud800", "Unicode")]:
            bad = dict(fields, **{name: value})
            with self.subTest(name=name, value=value):
                with self.assertRaises(StateError) as ctx:
                    Namespace.from_json(bad)
                self.assertIn(reason, str(ctx.exception))
        with self.assertRaises(StateError):
            Namespace.from_json(dict(fields, extra=1))
        missing = dict(fields)
        del missing["dtype"]
        with self.assertRaises(StateError):
            Namespace.from_json(missing)


class KeyVectors(unittest.TestCase):
    def test_block_hash_keys(self):
        ns = namespaces()
        for v in VECTORS["block_hash_keys"]:
            digest = ns[v["namespace"]].digest()
            with self.subTest(v):
                if "block_hash_int" in v:
                    self.assertEqual(state.block_hash_bytes(v["block_hash_int"]).hex(), v["block_hash_hex"])
                    self.assertEqual(state.state_key(digest, v["group"], v["block_hash_int"]).hex(), v["key"])
                self.assertEqual(state.state_key(digest, v["group"], bytes.fromhex(v["block_hash_hex"])).hex(), v["key"])

    def test_token_chains_and_keys(self):
        ns = namespaces()
        for v in VECTORS["token_chains"]:
            digest = ns[v["namespace"]].digest()
            extra = bytes.fromhex(v["extra_hex"])
            with self.subTest(v["namespace"], extra=v["extra_hex"]):
                self.assertEqual(state.token_chain_root(digest).hex(), v["root"])
                hashes = state.page_hashes(digest, v["tokens"], v["page_tokens"], extra)
                self.assertEqual([h.hex() for h in hashes], v["page_hashes"])
                keys = state.keys_for_tokens(digest, v["group"], v["tokens"], v["page_tokens"], extra)
                self.assertEqual([k.hex() for k in keys], v["keys"])

    def test_keys_of_a_prefix_are_a_prefix_of_the_keys(self):
        seed = random.randrange(1 << 30)
        rng = random.Random(seed)
        digest = namespaces()["sample"].digest()
        for _ in range(50):
            tokens = [rng.randrange(1 << 17) for _ in range(rng.randrange(0, 100))]
            p = rng.randrange(1, 9)
            cut = rng.randrange(0, len(tokens) + 1)
            full = state.keys_for_tokens(digest, 1, tokens, p)
            self.assertEqual(len(full), len(tokens) // p, f"seed={seed}")
            self.assertEqual(state.keys_for_tokens(digest, 1, tokens[:cut], p), full[:cut // p], f"seed={seed}")

    def test_bad_arguments(self):
        digest = namespaces()["sample"].digest()
        for args in [(b"\x00" * 31, 0, b"x"), (digest, -1, b"x"), (digest, 0, b""), (digest, 0, b"\x00" * 65)]:
            with self.assertRaises(StateError):
                state.state_key(*args)


class BoundaryVectors(unittest.TestCase):
    def test_shared_boundary_vectors(self):
        for v in VECTORS["boundaries"]:
            contract = state.contract_from_json(v["contract"])
            coverage = state.coverage_from_json(v["coverage"], contract)
            with self.subTest(v["name"]):
                self.assertEqual(contract.select(coverage, v["prompt_tokens"], v["origin"]).to_json(), v["result"])


class BoundaryCases(unittest.TestCase):
    """The same worked cases as orbitkv-state's RecoveryContractTest."""

    def setUp(self):
        self.contract = state.contract_from_json(SAMPLE_CONTRACT)
        self.coverage = state.coverage_from_json(SAMPLE_COVERAGE, self.contract)

    def test_sample_from_zero_has_no_hit(self):
        s = self.contract.select(self.coverage, 1000, 0)
        self.assertFalse(s.hit)
        self.assertEqual(s.boundary, 0)
        self.assertEqual(len(s.rejected), 62)
        self.assertEqual(s.rejected[0], state.Rejection(992, 0, "prefix page 40 not available"))
        self.assertEqual(s.rejected[22], state.Rejection(640, 1, "sink page 0 not available"))

    def test_sample_from_480_selects_the_checkpoint(self):
        s = self.contract.select(self.coverage, 1000, 480)
        self.assertEqual((s.boundary, s.hit), (512, True))
        self.assertEqual(s.required, {0: [(30, 32)], 1: [(30, 32)], 2: [(512, 512)]})
        self.assertEqual(len(s.rejected), 30)
        self.assertEqual(s.rejected[21], state.Rejection(656, 0, "prefix page 40 not available"))
        self.assertEqual(s.rejected[22], state.Rejection(640, 2, "no checkpoint at token 640"))

    def test_at_least_one_prompt_token_is_computed(self):
        full = RecoveryContract(16, [FullGroup(0)])
        cov = {0: PageCoverage([(0, 100)])}
        self.assertEqual([full.cap(n) for n in (64, 65, 1)], [48, 64, 0])
        self.assertEqual(full.select(cov, 64).boundary, 48)
        self.assertEqual(full.select(cov, 65).boundary, 64)
        self.assertFalse(full.select(cov, 16).hit)
        with self.assertRaises(StateError):
            full.select(cov, 0)

    def test_sliding_window_reads_only_window_and_sinks(self):
        swa = RecoveryContract(16, [SlidingWindowGroup(4, 100, 20)])
        self.assertEqual(swa.required_ranges(320, 0), {4: [(0, 2), (13, 20)]})
        self.assertEqual(swa.required_ranges(320, 16), {4: [(1, 2), (13, 20)]})
        self.assertEqual(swa.required_ranges(64, 32), {4: [(2, 4)]})
        self.assertEqual(swa.select({4: PageCoverage([(0, 2), (13, 20)])}, 1000).boundary, 320)

    def test_invalid_coverage_and_contracts(self):
        c = self.contract
        for cov, reason in [({"2": {"pages": [[0, 1]]}}, "recurrent"), ({"7": {"checkpoints": [16]}}, "group 7"),
                            ({"2": {"checkpoints": [17]}}, "not a multiple"), ({"0": {"ranges": [[0, 1]]}}, "exactly one")]:
            with self.subTest(reason):
                with self.assertRaises(StateError) as ctx:
                    state.coverage_from_json(cov, c)
                self.assertIn(reason, str(ctx.exception))
        for bad, reason in [({"page_tokens": 16, "groups": [{"id": 0, "kind": "mamba"}]}, "unknown group kind"),
                            ({"page_tokens": 16, "groups": []}, "non-empty"),
                            ({"page_tokens": 16, "groups": [{"id": 0, "kind": "full"}, {"id": 0, "kind": "recurrent"}]}, "duplicate"),
                            ({"page_tokens": 16, "groups": [{"id": 0, "kind": "sliding_window"}]}, "window")]:
            with self.subTest(reason):
                with self.assertRaises(StateError) as ctx:
                    state.contract_from_json(bad)
                self.assertIn(reason, str(ctx.exception))
        with self.assertRaises(StateError):
            c.select(self.coverage, 100, 8)

    def test_selection_matches_brute_force(self):
        seed = random.randrange(1 << 30)
        rng = random.Random(seed)
        for _ in range(150):
            p = rng.choice([1, 2, 4, 16])
            n_pages = rng.randrange(4, 20)
            groups, cov, avail = [], {}, {}
            for i in range(rng.randrange(1, 4)):
                kind = rng.randrange(3)
                g = [FullGroup(i), SlidingWindowGroup(i, rng.randrange(1, 8 * p + 1), rng.choice([0, rng.randrange(0, 4 * p + 1)])),
                     RecurrentGroup(i)][kind]
                groups.append(g)
                if kind == 2:
                    cps = {k * p for k in range(1, n_pages + 1) if rng.random() < 0.5}
                    cov[i], avail[i] = CheckpointCoverage(cps), cps
                else:
                    pages = {k for k in range(n_pages) if rng.random() < 0.8}
                    cov[i], avail[i] = PageCoverage([(k, k + 1) for k in pages]), pages
            contract = RecoveryContract(p, groups)
            prompt = rng.randrange(1, n_pages * p + p)
            origin = rng.randrange(0, n_pages // 2 + 1) * p

            def legal(t):
                if t % p or t <= origin or t > (prompt - 1) // p * p:
                    return False
                for g in groups:
                    if isinstance(g, RecurrentGroup):
                        if t not in avail[g.id]:
                            return False
                        continue
                    need = set(range(origin // p, t // p))
                    if isinstance(g, SlidingWindowGroup):
                        need = set(range(max(origin, t - g.window) // p, t // p))
                        need |= {s // p for s in range(g.sink) if origin // p <= s // p < t // p}
                    if not need <= avail[g.id]:
                        return False
                return True

            best = max([t for t in range(prompt) if legal(t)], default=None)
            s = contract.select(cov, prompt, origin)
            msg = f"seed={seed} groups={groups} prompt={prompt} origin={origin}"
            if best is None:
                self.assertFalse(s.hit, msg)
                self.assertEqual(s.boundary, origin, msg)
            else:
                self.assertTrue(s.hit, msg)
                self.assertEqual(s.boundary, best, msg)


if __name__ == "__main__":
    unittest.main()
