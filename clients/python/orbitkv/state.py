"""OrbitKV state contract: namespace digest, StateKeys, token chain, recovery boundaries.

Stdlib only. The normative spec is docs/state-contract.md; this module and the Java package
io.orbitkv.state must produce identical bytes (checked against docs/vectors/state-vectors.json).

Namespace canonical encoding (little-endian):
    b"OKNS" | u32 version=1 | 7 strings (u32 byte length + UTF-8): model_id, revision,
    weights_digest, tokenizer_digest, adapter_id, dtype, kv_layout | 6 u32: page_tokens,
    tp_size, tp_rank, pp_size, pp_rank, format_version
    namespace_digest = SHA-256(canonical encoding)

StateKey = SHA-256(namespace_digest | u32 group_id | block_hash)   (block hash 1..64 bytes;
a 64-bit integer engine hash is its 8-byte little-endian two's complement form)

Token chain: h(-1) = SHA-256(b"orbitkv/token-chain/v1" | namespace_digest);
h(i) = SHA-256(h(i-1) | tokens of page i as int32 LE | extra); full pages only.
"""

from __future__ import annotations

import bisect
import hashlib
import struct
from dataclasses import dataclass, field, fields
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

MAGIC = b"OKNS"
ENCODING_VERSION = 1
MAX_STRING_BYTES = 1024
MAX_PAGE_TOKENS = 1 << 16
MAX_BLOCK_HASH_BYTES = 64
DIGEST_BYTES = 32
TOKEN_CHAIN_DOMAIN = b"orbitkv/token-chain/v1"

_STRING_FIELDS = ("model_id", "revision", "weights_digest", "tokenizer_digest", "adapter_id", "dtype", "kv_layout")
_INT_FIELDS = ("page_tokens", "tp_size", "tp_rank", "pp_size", "pp_rank", "format_version")
MAX_ENCODED_BYTES = 8 + len(_STRING_FIELDS) * (4 + MAX_STRING_BYTES) + 4 * len(_INT_FIELDS)


class StateError(ValueError):
    """Invalid input to the state contract (a field, an encoding, a JSON document)."""


# ---------------------------------------------------------------------------------------------
# Namespace


@dataclass(frozen=True)
class Namespace:
    model_id: str
    revision: str
    weights_digest: str
    tokenizer_digest: str
    adapter_id: str
    dtype: str
    kv_layout: str
    page_tokens: int
    tp_size: int
    tp_rank: int
    pp_size: int
    pp_rank: int
    format_version: int

    def __post_init__(self) -> None:
        for name in _STRING_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str):
                raise StateError(f"{name} must be a string")
            if not value and name != "adapter_id":
                raise StateError(f"{name} must not be empty")
            try:
                size = len(value.encode("utf-8"))
            except UnicodeEncodeError:
                raise StateError(f"{name} is not well-formed Unicode") from None
            if size > MAX_STRING_BYTES:
                raise StateError(f"{name} is {size} UTF-8 bytes, more than {MAX_STRING_BYTES}")
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise StateError(f"{name} must be an integer")
        if not 1 <= self.page_tokens <= MAX_PAGE_TOKENS:
            raise StateError(f"page_tokens must be in [1, {MAX_PAGE_TOKENS}]: {self.page_tokens}")
        for axis in ("tp", "pp"):
            size, rank = getattr(self, axis + "_size"), getattr(self, axis + "_rank")
            if size < 1:
                raise StateError(f"{axis}_size must be >= 1: {size}")
            if not 0 <= rank < size:
                raise StateError(f"{axis}_rank must be in [0, {axis}_size): {rank} of {size}")
        if self.format_version < 1:
            raise StateError(f"format_version must be >= 1: {self.format_version}")

    def canonical_bytes(self) -> bytes:
        out = bytearray(MAGIC)
        out += struct.pack("<I", ENCODING_VERSION)
        for name in _STRING_FIELDS:
            raw = getattr(self, name).encode("utf-8")
            out += struct.pack("<I", len(raw)) + raw
        out += struct.pack("<6I", *(getattr(self, n) for n in _INT_FIELDS))
        return bytes(out)

    def digest(self) -> bytes:
        return hashlib.sha256(self.canonical_bytes()).digest()

    def digest_hex(self) -> str:
        return self.digest().hex()

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, obj: object) -> "Namespace":
        if not isinstance(obj, dict):
            raise StateError("namespace must be a JSON object")
        names = set(_STRING_FIELDS + _INT_FIELDS)
        for key in obj:
            if key not in names:
                raise StateError(f'namespace: unknown field "{key}"')
        for key in sorted(names):
            if key not in obj:
                raise StateError(f'namespace: missing field "{key}"')
        return cls(**{k: obj[k] for k in _STRING_FIELDS + _INT_FIELDS})

    @classmethod
    def decode(cls, data: bytes) -> "Namespace":
        """Decodes canonical bytes; raises StateError naming the offset and the problem."""
        if len(data) > MAX_ENCODED_BYTES:
            raise StateError(f"encoding is {len(data)} bytes, more than {MAX_ENCODED_BYTES}")
        if len(data) < 8:
            raise StateError(f"truncated header: {len(data)} bytes, need 8")
        if data[:4] != MAGIC:
            raise StateError('bad magic: not "OKNS"')
        (version,) = struct.unpack_from("<I", data, 4)
        if version != ENCODING_VERSION:
            raise StateError(f"unsupported encoding version {version}")
        pos = 8
        strings = []
        for name in _STRING_FIELDS:
            if len(data) - pos < 4:
                raise StateError(f"truncated length of {name} at offset {pos}")
            (length,) = struct.unpack_from("<I", data, pos)
            if length > MAX_STRING_BYTES:
                raise StateError(f"{name} length {length} at offset {pos} exceeds {MAX_STRING_BYTES}")
            pos += 4
            if len(data) - pos < length:
                raise StateError(f"truncated {name} at offset {pos}")
            try:
                strings.append(data[pos:pos + length].decode("utf-8", errors="strict"))
            except UnicodeDecodeError:
                raise StateError(f"{name} at offset {pos} is not valid UTF-8") from None
            pos += length
        if len(data) - pos != 24:
            raise StateError(f"expected 24 bytes of integers at offset {pos}, found {len(data) - pos}")
        ints = struct.unpack_from("<6i", data, pos)
        try:
            return cls(*strings, *ints)
        except StateError as e:
            raise StateError(f"invalid field: {e}") from None


# ---------------------------------------------------------------------------------------------
# StateKeys and the token chain


def _require_digest(namespace_digest: bytes) -> None:
    if len(namespace_digest) != DIGEST_BYTES:
        raise StateError(f"a namespace digest is 32 bytes, got {len(namespace_digest)}")


def block_hash_bytes(block_hash: Union[bytes, int]) -> bytes:
    """An engine block hash as key input: bytes as given; an int as 8 bytes LE two's complement."""
    if isinstance(block_hash, int) and not isinstance(block_hash, bool):
        if not -(1 << 63) <= block_hash < (1 << 64):
            raise StateError(f"integer block hash out of 64-bit range: {block_hash}")
        return (block_hash & ((1 << 64) - 1)).to_bytes(8, "little")
    return bytes(block_hash)


def state_key(namespace_digest: bytes, group_id: int, block_hash: Union[bytes, int]) -> bytes:
    """SHA-256(namespace digest | u32 LE group id | block hash): 32 bytes."""
    _require_digest(namespace_digest)
    if not 0 <= group_id <= 0x7FFFFFFF:
        raise StateError(f"group id must be in [0, 2^31): {group_id}")
    raw = block_hash_bytes(block_hash)
    if not 1 <= len(raw) <= MAX_BLOCK_HASH_BYTES:
        raise StateError(f"block hash must be 1..{MAX_BLOCK_HASH_BYTES} bytes: {len(raw)}")
    return hashlib.sha256(namespace_digest + struct.pack("<I", group_id) + raw).digest()


def token_chain_root(namespace_digest: bytes) -> bytes:
    _require_digest(namespace_digest)
    return hashlib.sha256(TOKEN_CHAIN_DOMAIN + namespace_digest).digest()


def page_hashes(namespace_digest: bytes, tokens: Sequence[int], page_tokens: int, extra: bytes = b"") -> List[bytes]:
    """One 32-byte chained hash per full page of tokens."""
    if page_tokens <= 0:
        raise StateError(f"page_tokens must be > 0: {page_tokens}")
    previous = token_chain_root(namespace_digest)
    out = []
    for i in range(len(tokens) // page_tokens):
        page = struct.pack(f"<{page_tokens}i", *tokens[i * page_tokens:(i + 1) * page_tokens])
        previous = hashlib.sha256(previous + page + bytes(extra)).digest()
        out.append(previous)
    return out


def keys_for_tokens(namespace_digest: bytes, group_id: int, tokens: Sequence[int], page_tokens: int,
                    extra: bytes = b"") -> List[bytes]:
    return [state_key(namespace_digest, group_id, h) for h in page_hashes(namespace_digest, tokens, page_tokens, extra)]


# ---------------------------------------------------------------------------------------------
# Recovery contract


@dataclass(frozen=True)
class FullGroup:
    id: int
    kind: str = field(default="full", init=False)


@dataclass(frozen=True)
class SlidingWindowGroup:
    id: int
    window: int
    sink: int = 0
    kind: str = field(default="sliding_window", init=False)

    def __post_init__(self) -> None:
        if self.window <= 0:
            raise StateError(f"window must be > 0: {self.window}")
        if self.sink < 0:
            raise StateError(f"sink must be >= 0: {self.sink}")


@dataclass(frozen=True)
class RecurrentGroup:
    id: int
    kind: str = field(default="recurrent", init=False)


StateGroup = Union[FullGroup, SlidingWindowGroup, RecurrentGroup]
Range = Tuple[int, int]


def normalize(ranges: Iterable[Range]) -> List[Range]:
    """Sorted, with overlapping and adjacent half-open ranges merged."""
    out: List[List[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


class PageCoverage:
    """Available page ranges in normal form; first_missing is one binary search."""

    def __init__(self, ranges: Iterable[Range]):
        for a, b in ranges:
            if not 0 <= a < b:
                raise StateError(f"page range must satisfy 0 <= start < end: [{a}, {b})")
        self.ranges = normalize(ranges)
        self._starts = [a for a, _ in self.ranges]

    def first_missing(self, start: int, end: int) -> int:
        """Lowest page in [start, end) not available, or end if all are."""
        if start >= end:
            return end
        i = bisect.bisect_right(self._starts, start) - 1
        if i < 0 or self.ranges[i][1] <= start:
            return start
        return min(self.ranges[i][1], end)


class CheckpointCoverage:
    def __init__(self, positions: Iterable[int]):
        self.positions = sorted(set(positions))
        for t in self.positions:
            if t <= 0:
                raise StateError(f"checkpoint positions must be > 0: {t}")
        self._set = set(self.positions)

    def __contains__(self, t: int) -> bool:
        return t in self._set


Coverage = Dict[int, Union[PageCoverage, CheckpointCoverage]]


@dataclass(frozen=True)
class Rejection:
    t: int
    group: int
    reason: str


@dataclass(frozen=True)
class Selection:
    boundary: int
    hit: bool
    required: Dict[int, List[Range]]  # recurrent groups: [(t, t)], the checkpoint at t
    rejected: List[Rejection]

    def to_json(self) -> dict:
        return {
            "boundary": self.boundary,
            "hit": self.hit,
            "required": {str(g): [[a, b] for a, b in r] for g, r in self.required.items()},
            "rejected": [{"t": r.t, "group": r.group, "reason": r.reason} for r in self.rejected],
        }


class RecoveryContract:
    """Page size plus state groups; same semantics as io.orbitkv.state.RecoveryContract."""

    def __init__(self, page_tokens: int, groups: Sequence[StateGroup]):
        if page_tokens <= 0:
            raise StateError(f"page_tokens must be > 0: {page_tokens}")
        if not groups:
            raise StateError("a contract needs at least one group")
        ids = set()
        for g in groups:
            if g.id < 0:
                raise StateError(f"group id must be >= 0: {g.id}")
            if g.id in ids:
                raise StateError(f"duplicate group id {g.id}")
            ids.add(g.id)
        self.page_tokens = page_tokens
        self.groups = list(groups)

    def group(self, group_id: int) -> Optional[StateGroup]:
        return next((g for g in self.groups if g.id == group_id), None)

    def cap(self, prompt_tokens: int) -> int:
        if prompt_tokens < 1:
            raise StateError(f"prompt must have at least one token: {prompt_tokens}")
        return (prompt_tokens - 1) // self.page_tokens * self.page_tokens

    def _window_start(self, g: SlidingWindowGroup, t: int, origin: int) -> int:
        return max(origin, t - g.window) // self.page_tokens

    def _sink_end(self, g: SlidingWindowGroup, k: int) -> int:
        return min(-(-g.sink // self.page_tokens), k)

    def _check_span(self, t: int, origin: int) -> None:
        p = self.page_tokens
        if origin < 0 or origin % p:
            raise StateError(f"origin must be a non-negative multiple of page_tokens {p}: {origin}")
        if t % p or t <= origin:
            raise StateError(f"boundary must be a multiple of page_tokens {p} above the origin {origin}: {t}")

    def required_ranges(self, t: int, origin: int) -> Dict[int, List[Range]]:
        self._check_span(t, origin)
        o, k = origin // self.page_tokens, t // self.page_tokens
        out: Dict[int, List[Range]] = {}
        for g in self.groups:
            if isinstance(g, FullGroup):
                out[g.id] = [(o, k)]
            elif isinstance(g, SlidingWindowGroup):
                parts = [(self._window_start(g, t, origin), k)]
                sink_end = self._sink_end(g, k)
                if sink_end > o:
                    parts.append((o, sink_end))
                out[g.id] = normalize(parts)
            else:
                out[g.id] = [(t, t)]
        return out

    def validate_coverage(self, coverage: Coverage) -> None:
        for gid, cov in coverage.items():
            g = self.group(gid)
            if g is None:
                raise StateError(f"coverage names group {gid}, which the contract does not have")
            if isinstance(g, RecurrentGroup):
                if not isinstance(cov, CheckpointCoverage):
                    raise StateError(f"group {gid} is recurrent: coverage must list checkpoints, not pages")
                for t in cov.positions:
                    if t % self.page_tokens:
                        raise StateError(f"group {gid} checkpoint {t} is not a multiple of page_tokens {self.page_tokens}")
            elif not isinstance(cov, PageCoverage):
                raise StateError(f"group {gid} is {g.kind}: coverage must list pages, not checkpoints")

    def first_blocker(self, coverage: Coverage, t: int, origin: int) -> Optional[Rejection]:
        self._check_span(t, origin)
        o, k = origin // self.page_tokens, t // self.page_tokens
        for g in self.groups:
            cov = coverage.get(g.id)
            if isinstance(g, RecurrentGroup):
                if cov is None or t not in cov:
                    return Rejection(t, g.id, f"no checkpoint at token {t}")
                continue
            pages = cov if cov is not None else PageCoverage([])
            if isinstance(g, FullGroup):
                checks = [(o, k, "prefix")]
            else:
                checks = [(o, self._sink_end(g, k), "sink"), (self._window_start(g, t, origin), k, "window")]
            for start, end, role in checks:
                missing = pages.first_missing(start, end)
                if missing < end:
                    return Rejection(t, g.id, f"{role} page {missing} not available")
        return None

    def select(self, coverage: Coverage, prompt_tokens: int, origin: int = 0) -> Selection:
        p = self.page_tokens
        if origin < 0 or origin % p:
            raise StateError(f"origin must be a non-negative multiple of page_tokens {p}: {origin}")
        self.validate_coverage(coverage)
        rejected: List[Rejection] = []
        t = self.cap(prompt_tokens)
        while t > origin:
            blocker = self.first_blocker(coverage, t, origin)
            if blocker is None:
                return Selection(t, True, self.required_ranges(t, origin), rejected)
            rejected.append(blocker)
            t -= p
        return Selection(origin, False, {}, rejected)


# ---------------------------------------------------------------------------------------------
# JSON forms (docs/state-contract.md section 4)


def _int(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise StateError(f"{where} must be an integer")
    return value


def _exact(obj: dict, where: str, required: set, allowed: set) -> None:
    for key in obj:
        if key not in allowed:
            raise StateError(f'{where}: unknown field "{key}"')
    for key in sorted(required):
        if key not in obj:
            raise StateError(f'{where}: missing field "{key}"')


def contract_from_json(obj: object) -> RecoveryContract:
    if not isinstance(obj, dict):
        raise StateError("contract must be a JSON object")
    _exact(obj, "contract", {"page_tokens", "groups"}, {"page_tokens", "groups"})
    groups = obj["groups"]
    if not isinstance(groups, list) or not groups:
        raise StateError("contract: groups must be a non-empty array")
    parsed: List[StateGroup] = []
    for i, g in enumerate(groups):
        where = f"contract: groups[{i}]"
        if not isinstance(g, dict) or not isinstance(g.get("kind"), str):
            raise StateError(f"{where}: must be an object with a string kind")
        kind = g["kind"]
        if kind in ("full", "recurrent"):
            _exact(g, where, {"id", "kind"}, {"id", "kind"})
            gid = _int(g["id"], f"{where}: id")
            parsed.append(FullGroup(gid) if kind == "full" else RecurrentGroup(gid))
        elif kind == "sliding_window":
            _exact(g, where, {"id", "kind", "window"}, {"id", "kind", "window", "sink"})
            parsed.append(SlidingWindowGroup(_int(g["id"], f"{where}: id"), _int(g["window"], f"{where}: window"),
                                             _int(g.get("sink", 0), f"{where}: sink")))
        else:
            raise StateError(f'{where}: unknown group kind "{kind}" (expected full, sliding_window or recurrent)')
    return RecoveryContract(_int(obj["page_tokens"], "contract: page_tokens"), parsed)


def coverage_from_json(obj: object, contract: RecoveryContract) -> Coverage:
    if not isinstance(obj, dict):
        raise StateError("coverage must be a JSON object")
    out: Coverage = {}
    for key, entry in obj.items():
        where = f'coverage["{key}"]'
        if not (key == "0" or (key[:1] in "123456789" and key.isdigit() and key.isascii())):
            raise StateError(f"{where}: group id keys must be non-negative decimal integers")
        if not isinstance(entry, dict) or len(entry) != 1 or not ({"pages", "checkpoints"} & entry.keys()):
            raise StateError(f'{where}: must have exactly one field, "pages" or "checkpoints"')
        if "pages" in entry:
            ranges = []
            for pair in entry["pages"]:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise StateError(f"{where}.pages: each entry must be a [start, end) pair")
                ranges.append((_int(pair[0], where), _int(pair[1], where)))
            out[int(key)] = PageCoverage(ranges)
        else:
            out[int(key)] = CheckpointCoverage(_int(t, where) for t in entry["checkpoints"])
    contract.validate_coverage(out)
    return out
