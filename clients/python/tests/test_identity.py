"""Engine identity: every field that changes page bytes changes the namespace; nothing depends on a
per-process value (a second interpreter with another hash seed derives the same digest); the
request's cache salt changes page names; the weights digest follows the weights' content."""

import dataclasses
import os
import subprocess
import sys
import tempfile
import unittest

from orbitkv.identity import EngineIdentity, salted_name, tokenizer_digest, weights_digest

BASE = EngineIdentity(model_id="org/tiny-llama", revision="abc123", weights_digest="sha256:11",
                      tokenizer_digest="sha256:22", adapter_id="", dtype="bfloat16", kv_dtype="auto",
                      page_tokens=16, kv_layout="vllm:chunk:(2,16,2,64)", tp_size=2, tp_rank=0, pp_size=1,
                      pp_rank=0, dp_size=2, dp_rank=1)
HERE = os.path.dirname(os.path.abspath(__file__))


class EngineIdentityTest(unittest.TestCase):

    def test_every_field_changes_the_namespace(self):
        changes = {"model_id": "org/other", "revision": "def456", "weights_digest": "sha256:12",
                   "tokenizer_digest": "sha256:23", "adapter_id": "lora-1", "dtype": "float16",
                   "kv_dtype": "fp8_e4m3", "page_tokens": 32, "kv_layout": "sglang:page_first:(16,2,64)",
                   "tp_rank": 1, "tp_size": 4, "pp_size": 2, "dp_rank": 0, "dp_size": 4}
        base = BASE.namespace().digest()
        digests = {base}
        for name, value in changes.items():
            with self.subTest(field=name):
                changed = dataclasses.replace(BASE, **{name: value}).namespace().digest()
                self.assertNotEqual(base, changed, f"{name} did not change the namespace")
                digests.add(changed)
        self.assertEqual(len(digests), len(changes) + 1, "two different changes gave one namespace")

    def test_the_digest_is_the_same_in_another_interpreter_with_another_hash_seed(self):
        code = ("from orbitkv.identity import EngineIdentity as E;"
                f"print(E(**{dataclasses.asdict(BASE)!r}).namespace().digest_hex())")
        out = set()
        for seed in ("1", "2"):
            env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=os.path.dirname(HERE))
            out.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                   check=True).stdout.strip())
        self.assertEqual(out, {BASE.namespace().digest_hex()})

    def test_unknown_weights_are_named_by_model_and_revision(self):
        ns = dataclasses.replace(BASE, weights_digest="", tokenizer_digest="").namespace()
        self.assertEqual(ns.weights_digest, "unknown:org/tiny-llama@abc123")
        self.assertNotEqual(ns.digest(), dataclasses.replace(BASE, weights_digest="", revision="r2").namespace().digest())

    def test_invalid_fields_are_refused(self):
        with self.assertRaises(ValueError):
            dataclasses.replace(BASE, dp_rank=2)
        with self.assertRaises(ValueError):
            dataclasses.replace(BASE, kv_dtype="")


class SaltTest(unittest.TestCase):

    def test_no_salt_keeps_the_name_and_salts_separate_names(self):
        name = bytes(range(32))
        self.assertEqual(salted_name(name, None), name)
        self.assertEqual(salted_name(name, ""), name)
        a, b = salted_name(name, "tenant-a"), salted_name(name, "tenant-b")
        self.assertEqual(len({name, a, b}), 3)
        self.assertEqual(a, salted_name(name, "tenant-a"))
        # the salt's length is encoded: moving a byte between salt and name gives another key
        self.assertNotEqual(salted_name(b"xy", "a"), salted_name(b"y", "ax"))


class WeightsDigestTest(unittest.TestCase):

    def test_the_digest_follows_the_content_and_is_cached_by_size_and_time(self):
        with tempfile.TemporaryDirectory() as d:
            model, cache = os.path.join(d, "model"), os.path.join(d, "cache.json")
            os.mkdir(model)
            path = os.path.join(model, "model.safetensors")
            with open(path, "wb") as f:
                f.write(b"\x00" * 4096)
            with open(os.path.join(model, "config.json"), "w") as f:
                f.write("{}")
            first = weights_digest(model, cache)
            self.assertTrue(first.startswith("sha256:"))
            self.assertTrue(os.path.exists(cache))
            self.assertEqual(weights_digest(model, cache), first)
            with open(path, "r+b") as f:  # same size, one byte flipped: a new mtime, a new digest
                f.seek(100)
                f.write(b"\x01")
            os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))
            self.assertNotEqual(weights_digest(model, cache), first)
            self.assertEqual(weights_digest(os.path.join(d, "missing"), cache), "")
            self.assertEqual(tokenizer_digest(model), "")


if __name__ == "__main__":
    unittest.main()
