"""OrbitKV engine channel, protocol version 1: frame values, encoder and incremental decoder.

Stdlib only. The normative spec is docs/protocol.md; this module is written from it and must
produce the same bytes as the Java codec io.orbitkv.state.protocol (checked against the Java seed
corpus of valid frames and the worked examples of section 10).

Wire form: a 16-byte header ``"<IHHQ"`` (length of the whole frame, version 1, type, request
id), then the body fields of the type in table order, little-endian, no padding but the ``pad``
fields. Payload bytes never travel over the socket: frames carry names, ids, offsets, lengths.

Frame values are frozen dataclasses that validate in ``__post_init__`` (a bad value raises
:class:`ProtocolError` with code MALFORMED or TOO_LARGE), so a frame that exists is internally
consistent. :func:`encode` turns one into bytes; :class:`FrameDecoder` looks at the front of a
receive buffer and returns :class:`Decoded` or :class:`NeedBytes`, or raises
:class:`MalformedFrame` saying whether the stream can continue past the bad frame.

Design note: one dataclass per frame and plain ``bytes`` per page name, rather than a packed
buffer per group, because the Python client's frames are small (an engine asks about at most a
few thousand pages a query, tens of KiB) and clarity beats the ~50 bytes of object header a
name costs; the Java codec packs names because the Manager decodes 65,536-page queries.
"""

from __future__ import annotations

import enum
import re
import struct
from dataclasses import dataclass, fields
from typing import List, Optional, Sequence, Tuple, Union

from .state import FullGroup, Namespace, RecoveryContract, RecurrentGroup, SlidingWindowGroup, StateError

VERSION = 2
#: Bytes of a REGISTERED ticket and of a region handle (protocol 6.1, 6.11).
TICKET_BYTES = 16
#: What ``sun_path`` holds, its terminating zero excluded.
MAX_SOCKET_PATH_BYTES = 107
#: REGISTER_REGION sources (protocol 5.2).
REGION_FROM_PATH = 1
REGION_FROM_DESCRIPTOR = 2
#: The descriptor socket's messages (protocol 6.11): 24 bytes each way, magic "OKFD".
EXCHANGE_BYTES = 24
EXCHANGE_MAGIC = b"OKFD"
OP_ARENAS = 1
OP_REGION = 2
#: Linux SCM_MAX_FD: descriptors one message can carry.
MAX_FDS_PER_MESSAGE = 253
HEADER = struct.Struct("<IHHQ")
HEADER_BYTES = HEADER.size  # 16
#: a CONTAINS frame of one group before its names: the header, the group count and pad (5.13),
#: and the group's header (5.3)
CONTAINS_ONE_GROUP_BYTES = HEADER_BYTES + 4 + 12
NO_REQUEST = 0
U31_MAX = (1 << 31) - 1
U63_MAX = (1 << 63) - 1
U64_MAX = (1 << 64) - 1
MAX_INSTANCE_ID_BYTES = 256
#: Largest UTF-8 length of a PUBLISH_RESERVE tenant label (protocol 5.6).
MAX_TENANT_BYTES = 64
MAX_HASH_BYTES = 64
STATE_KEY_BYTES = 32
MAX_SPANS_PER_GROUP = 16
MAX_COUNTER_NAME = 64
MAX_CONTRACT_GROUPS = 64
CONTRACT_MAGIC = b"OKRC"
CONTRACT_HEADER_BYTES = 16
CONTRACT_GROUP_BYTES = 16
MAX_CONTRACT_BYTES = CONTRACT_HEADER_BYTES + MAX_CONTRACT_GROUPS * CONTRACT_GROUP_BYTES  # 1,040
_COUNTER_NAME = re.compile(r"[a-z0-9_.]{1,64}\Z")


# ---------------------------------------------------------------------------------------------
# Codes (docs/protocol.md sections 3, 4, 6, 7)


class FrameType(enum.IntEnum):
    REGISTER = 0x0001
    REGISTER_REGION = 0x0002
    QUERY = 0x0003
    QUERY_POLL = 0x0004
    CANCEL = 0x0005
    PUBLISH_RESERVE = 0x0006
    PUBLISH_COMMIT = 0x0007
    PUBLISH_ABORT = 0x0008
    RESTORE = 0x0009
    RELEASE = 0x000A
    STATS = 0x000B
    PREPARE = 0x000C
    HINT = 0x000D
    CONTAINS = 0x000E
    REGISTERED = 0x8001
    REGION_REGISTERED = 0x8002
    QUERY_RESULT = 0x8003
    CANCELLED = 0x8005
    RESERVED = 0x8006
    COMMITTED = 0x8007
    ABORTED = 0x8008
    RESTORE_ACCEPTED = 0x8009
    RELEASED = 0x800A
    STATS_REPLY = 0x800B
    PREPARED = 0x800C
    HINTED = 0x800D
    CONTAINED = 0x800E
    COMPLETION = 0x80F0
    ERROR = 0x80FF

    @property
    def to_manager(self) -> bool:
        """True for the frames a client sends (bit 15 clear)."""
        return not self & 0x8000


class Direction(enum.Enum):
    TO_MANAGER = "to manager"
    TO_CLIENT = "to client"


class ErrorCode(enum.IntEnum):
    MALFORMED = 1
    UNSUPPORTED_VERSION = 2
    TOO_LARGE = 3
    OUT_OF_ORDER = 4
    UNKNOWN_OPERATION = 5
    STALE_EPOCH = 6
    NAMESPACE_MISMATCH = 7
    INVALID_DEMAND = 8
    BUSY = 9
    NO_SPACE = 10
    NOT_FOUND = 11
    INTERNAL = 12
    STALE_REVISION = 13
    SHUTTING_DOWN = 14
    REGISTER_TIMEOUT = 15
    TICKET_REFUSED = 16


class KeyForm(enum.IntEnum):
    BLOCK_HASH = 1
    STATE_KEY = 2


class PageLocation(enum.IntEnum):
    """Where CONTAINED says a named page is held on the Manager now (docs/protocol.md 6.14); not a lease."""
    ABSENT = 0
    DRAM = 1
    SSD = 2


class HintKind(enum.IntEnum):
    """What a HINT asks for the pages it names (docs/protocol.md 5.12)."""
    PIN = 1
    UNPIN = 2
    RETAIN = 3
    DEMOTE = 4
    DROP = 5


class CompletionTarget(enum.IntEnum):
    HOST_READY = 1
    ENGINE_RESTORE = 2


class QueryStatus(enum.IntEnum):
    PENDING = 1
    FINAL = 2


class PageState(enum.IntEnum):
    MISS = 0
    CANDIDATE = 1
    RESERVED = 2
    RESIDENT = 3
    READY = 4


class Refusal(enum.IntEnum):
    ALREADY_RESIDENT = 2
    NO_SPACE = 3
    BUSY = 4


GRANTED = 1


class SettleOutcome(enum.IntEnum):
    SEALED = 1
    ABORTED = 2
    NOT_FOUND = 3
    DISCARDED = 4


class PrepareOutcome(enum.IntEnum):
    """How the Manager took a PREPARE (docs/protocol.md 6.12)."""
    ACCEPTED = 1
    TRIMMED = 2
    REFUSED = 3


class CompletionEvent(enum.IntEnum):
    RESTORE_DONE = 1
    QUERY_SETTLED = 2
    DRAINED = 3


class Outcome(enum.IntEnum):
    OK = 1
    CANCELLED = 2
    FAILED = 3


class ProtocolError(ValueError):
    """A value or an encoding that breaks docs/protocol.md; ``code`` is the ErrorCode it earns."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class MalformedFrame(ProtocolError):
    """The bytes at the front of a buffer are not a valid frame (docs/protocol.md 7.2).

    ``request_id`` is the header's (0 when the header itself was refused). ``skip_bytes > 0``:
    the frame's extent is known, drop that many bytes and the stream continues; 0: the stream
    cannot be resynchronised and the connection must be closed."""

    def __init__(self, code: ErrorCode, message: str, request_id: int, skip_bytes: int):
        super().__init__(code, message)
        self.request_id = request_id
        self.skip_bytes = skip_bytes

    @property
    def skippable(self) -> bool:
        return self.skip_bytes > 0


def _bad(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.MALFORMED, message)


def _check_int(name: str, value: int, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise _bad(f"{name} must be an integer in [{lo}, {hi}]: {value!r}")


def _check_text(name: str, value: str, lo: int, hi: int) -> None:
    if not isinstance(value, str):
        raise _bad(f"{name} must be a string")
    try:
        n = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise _bad(f"{name} is not well-formed Unicode") from None
    if not lo <= n <= hi:
        raise _bad(f"{name} must be {lo}..{hi} UTF-8 bytes: {n}")


def _check_hash(name: str, form: KeyForm, value: bytes) -> None:
    if not isinstance(value, bytes) or not 1 <= len(value) <= MAX_HASH_BYTES:
        raise _bad(f"{name} must be 1..{MAX_HASH_BYTES} bytes")
    if form == KeyForm.STATE_KEY and len(value) != STATE_KEY_BYTES:
        raise _bad(f"state keys are {STATE_KEY_BYTES} bytes, not {len(value)}")


def _distinct(name: str, values: Sequence) -> None:
    if len(set(values)) != len(values):
        raise _bad(f"{name} must be distinct")


# ---------------------------------------------------------------------------------------------
# Limits (section 8)


@dataclass(frozen=True)
class Limits:
    max_frame_bytes: int = 4 << 20
    max_groups_per_query: int = 64
    max_pages_per_query: int = 65_536
    max_pages_per_publish: int = 4_096
    max_ids_per_settle: int = 4_096
    max_pages_per_restore: int = 65_536
    max_arena_files: int = 256
    max_stats_counters: int = 256
    max_string_bytes: int = 4_096
    max_connections: int = 256
    max_operations_per_connection: int = 1_024
    max_reservations_per_connection: int = 16_384
    max_regions_per_connection: int = 64

    def __post_init__(self) -> None:
        _check_int("max_frame_bytes", self.max_frame_bytes, HEADER_BYTES, 64 << 20)
        for f in fields(self)[1:]:
            _check_int(f.name, getattr(self, f.name), 1, U31_MAX)
        for name in ("max_string_bytes", "max_groups_per_query", "max_arena_files", "max_stats_counters"):
            _check_int(name, getattr(self, name), 1, 0xFFFF)

    def values(self) -> Tuple[int, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


DEFAULT_LIMITS = Limits()


# ---------------------------------------------------------------------------------------------
# Recovery contract canonical encoding (section 3.2)

_KIND_FULL, _KIND_WINDOW, _KIND_RECURRENT = 1, 2, 3


def contract_bytes(contract: RecoveryContract) -> bytes:
    """The canonical ``OKRC`` encoding of a recovery contract (16 + 16 n bytes)."""
    if len(contract.groups) > MAX_CONTRACT_GROUPS:
        raise _bad(f"a contract on the wire has at most {MAX_CONTRACT_GROUPS} groups")
    out = bytearray(CONTRACT_MAGIC)
    out += struct.pack("<III", 1, contract.page_tokens, len(contract.groups))
    for g in contract.groups:
        if isinstance(g, SlidingWindowGroup):
            out += struct.pack("<IIII", _KIND_WINDOW, g.id, g.window, g.sink)
        elif isinstance(g, FullGroup):
            out += struct.pack("<IIII", _KIND_FULL, g.id, 0, 0)
        elif isinstance(g, RecurrentGroup):
            out += struct.pack("<IIII", _KIND_RECURRENT, g.id, 0, 0)
        else:
            raise _bad(f"unknown group {g!r}")
    return bytes(out)


def decode_contract(data: bytes) -> RecoveryContract:
    """Decodes canonical contract bytes; raises ProtocolError (MALFORMED) naming the problem."""
    if len(data) < CONTRACT_HEADER_BYTES:
        raise _bad(f"contract: truncated header: {len(data)} bytes")
    if len(data) > MAX_CONTRACT_BYTES:
        raise _bad(f"contract: {len(data)} bytes, more than {MAX_CONTRACT_BYTES}")
    if data[:4] != CONTRACT_MAGIC:
        raise _bad('contract: bad magic, not "OKRC"')
    version, page_tokens, count = struct.unpack_from("<III", data, 4)
    if version != 1:
        raise _bad(f"contract: unsupported encoding version {version}")
    if not 1 <= page_tokens <= U31_MAX:
        raise _bad(f"contract: page_tokens out of range: {page_tokens}")
    if not 1 <= count <= MAX_CONTRACT_GROUPS:
        raise _bad(f"contract: group_count must be 1..{MAX_CONTRACT_GROUPS}: {count}")
    if len(data) != CONTRACT_HEADER_BYTES + CONTRACT_GROUP_BYTES * count:
        raise _bad(f"contract: {count} groups need {CONTRACT_GROUP_BYTES * count} bytes after the header")
    groups = []
    for i in range(count):
        at = CONTRACT_HEADER_BYTES + CONTRACT_GROUP_BYTES * i
        kind, gid, window, sink = struct.unpack_from("<IIII", data, at)
        if gid > U31_MAX:
            raise _bad(f"contract: group_id at offset {at + 4} exceeds 2^31-1")
        if kind in (_KIND_FULL, _KIND_RECURRENT):
            if window or sink:
                raise _bad(f"contract: unused words of the group at offset {at} must be zero")
            groups.append(FullGroup(gid) if kind == _KIND_FULL else RecurrentGroup(gid))
        elif kind == _KIND_WINDOW:
            if not 1 <= window <= U31_MAX or sink > U31_MAX:
                raise _bad(f"contract: sliding_window at offset {at} needs window >= 1 and sink >= 0")
            groups.append(SlidingWindowGroup(gid, window, sink))
        else:
            raise _bad(f"contract: unknown group kind {kind} at offset {at}")
    try:
        return RecoveryContract(page_tokens, groups)
    except StateError as e:
        raise _bad(f"contract: {e}") from None


# ---------------------------------------------------------------------------------------------
# Request frames (section 5)


@dataclass(frozen=True)
class Register:
    instance_id: str
    epoch: int
    namespace: Namespace
    contract: RecoveryContract
    TYPE = FrameType.REGISTER

    def __post_init__(self) -> None:
        _check_text("instance_id", self.instance_id, 1, MAX_INSTANCE_ID_BYTES)
        _check_int("epoch", self.epoch, 0, U63_MAX)
        if self.contract.page_tokens != self.namespace.page_tokens:
            raise _bad(f"contract page_tokens {self.contract.page_tokens} differs from the namespace's "
                       f"{self.namespace.page_tokens}")
        if len(self.contract.groups) > MAX_CONTRACT_GROUPS:
            raise _bad(f"a contract on the wire has at most {MAX_CONTRACT_GROUPS} groups")


@dataclass(frozen=True)
class RegisterRegion:
    """A destination region from a file ``path`` (source PATH) or from a descriptor handed over on
    the descriptor socket, named by its 16-byte ``handle`` (source DESCRIPTOR); exactly one of them."""
    path: Optional[str]
    size_bytes: int
    page_bytes: int
    page_count: int
    handle: Optional[bytes] = None
    TYPE = FrameType.REGISTER_REGION

    def __post_init__(self) -> None:
        if (self.path is None) == (self.handle is None):
            raise _bad("a region has a path or a handle, not both or neither")
        if self.path is not None:
            _check_text("path", self.path, 1, 0xFFFF)
        elif len(self.handle) != TICKET_BYTES:
            raise _bad(f"a handle is {TICKET_BYTES} bytes: {len(self.handle)}")
        _check_int("size_bytes", self.size_bytes, 1, U63_MAX)
        _check_int("page_bytes", self.page_bytes, 1, U31_MAX)
        _check_int("page_count", self.page_count, 1, U31_MAX)
        if self.page_bytes * self.page_count > self.size_bytes:
            raise _bad(f"{self.page_count} pages of {self.page_bytes} bytes exceed size_bytes {self.size_bytes}")


@dataclass(frozen=True)
class QueryGroup:
    """One state group's page names, page 0 first, all ``hash_bytes`` wide.

    ``hash_bytes`` is taken from the hashes; give it only for an empty group (default: 32 for
    STATE_KEY, 8 for BLOCK_HASH, the width of a 64-bit engine hash)."""
    group_id: int
    key_form: KeyForm
    hashes: Tuple[bytes, ...]
    hash_bytes: int = 0

    def __post_init__(self) -> None:
        _check_int("group_id", self.group_id, 0, U31_MAX)
        if type(self.key_form) is not KeyForm:
            object.__setattr__(self, "key_form", KeyForm(self.key_form))
        if type(self.hashes) is not tuple:
            object.__setattr__(self, "hashes", tuple(self.hashes))
        width = self.hash_bytes or (len(self.hashes[0]) if self.hashes
                                    else STATE_KEY_BYTES if self.key_form == KeyForm.STATE_KEY else 8)
        _check_hash("hash width", self.key_form, bytes(width))
        # the common case checked in bulk (all bytes of one width); otherwise hash by hash, for the error
        if not all(type(h) is bytes for h in self.hashes) or set(map(len, self.hashes)) - {width}:
            for h in self.hashes:
                _check_hash("hash", self.key_form, h)
                if len(h) != width:
                    raise _bad(f"all hashes of a group are {width} bytes wide, not {len(h)}")
        object.__setattr__(self, "hash_bytes", width)


@dataclass(frozen=True)
class Query:
    operation_id: int
    revision: int
    target: CompletionTarget
    prompt_tokens: int
    origin_tokens: int
    groups: Tuple[QueryGroup, ...]
    # The engine's measured prefill rate (tokens/s), 0 = unknown; on the wire it follows
    # origin_tokens (docs/protocol.md 5.3). Last here so that it can default to 0.
    prefill_tokens_per_second: int = 0
    # How long the Manager may keep the QUERY PENDING to find and fetch pages only peers hold
    # (milliseconds, 0 = never wait); on the wire it follows prefill_tokens_per_second.
    peer_wait_millis: int = 0
    TYPE = FrameType.QUERY

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)
        _check_int("revision", self.revision, 0, U31_MAX)
        if type(self.target) is not CompletionTarget:
            object.__setattr__(self, "target", CompletionTarget(self.target))
        _check_int("prompt_tokens", self.prompt_tokens, 1, U63_MAX)
        _check_int("origin_tokens", self.origin_tokens, 0, self.prompt_tokens - 1)
        _check_int("prefill_tokens_per_second", self.prefill_tokens_per_second, 0, U31_MAX)
        _check_int("peer_wait_millis", self.peer_wait_millis, 0, U31_MAX)
        object.__setattr__(self, "groups", tuple(self.groups))
        _check_int("group count", len(self.groups), 1, 0xFFFF)
        _distinct("group ids", [g.group_id for g in self.groups])


@dataclass(frozen=True)
class QueryPoll:
    operation_id: int
    revision: int
    TYPE = FrameType.QUERY_POLL

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)
        _check_int("revision", self.revision, 0, U31_MAX)


@dataclass(frozen=True)
class Cancel:
    operation_id: int
    TYPE = FrameType.CANCEL

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)


@dataclass(frozen=True)
class PublishPage:
    group_id: int
    key_form: KeyForm
    name: bytes
    length_bytes: int

    def __post_init__(self) -> None:
        _check_int("group_id", self.group_id, 0, U31_MAX)
        object.__setattr__(self, "key_form", KeyForm(self.key_form))
        _check_hash("name", self.key_form, self.name)
        _check_int("length_bytes", self.length_bytes, 1, U31_MAX)


@dataclass(frozen=True)
class PublishReserve:
    """Pages to reserve and, optionally, the tenant label (a ``cache_salt``, 1..64 UTF-8 bytes)
    they are charged to; ``None``: the namespace's default tenant (protocol 5.6)."""
    pages: Tuple[PublishPage, ...]
    tenant: Optional[str] = None
    TYPE = FrameType.PUBLISH_RESERVE

    def __post_init__(self) -> None:
        object.__setattr__(self, "pages", tuple(self.pages))
        if not self.pages:
            raise _bad("a PUBLISH_RESERVE has at least one page")
        if self.tenant is not None:
            _check_text("tenant", self.tenant, 1, MAX_TENANT_BYTES)


def _check_ids(ids: Tuple[int, ...]) -> None:
    if not ids:
        raise _bad("at least one reservation id")
    for i in ids:
        _check_int("reservation_id", i, 1, U63_MAX)
    _distinct("reservation ids", ids)


@dataclass(frozen=True)
class PublishCommit:
    reservation_ids: Tuple[int, ...]
    TYPE = FrameType.PUBLISH_COMMIT

    def __post_init__(self) -> None:
        object.__setattr__(self, "reservation_ids", tuple(self.reservation_ids))
        _check_ids(self.reservation_ids)


@dataclass(frozen=True)
class PublishAbort:
    reservation_ids: Tuple[int, ...]
    TYPE = FrameType.PUBLISH_ABORT

    def __post_init__(self) -> None:
        object.__setattr__(self, "reservation_ids", tuple(self.reservation_ids))
        _check_ids(self.reservation_ids)


@dataclass(frozen=True)
class RestorePage:
    group_id: int
    source_page: int
    destination_page: int

    def __post_init__(self) -> None:
        _check_int("group_id", self.group_id, 0, U31_MAX)
        _check_int("source_page", self.source_page, 0, U63_MAX)
        _check_int("destination_page", self.destination_page, 0, U31_MAX)


@dataclass(frozen=True)
class Restore:
    operation_id: int
    region_id: int
    pages: Tuple[RestorePage, ...]
    TYPE = FrameType.RESTORE

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)
        _check_int("region_id", self.region_id, 0, U31_MAX)
        object.__setattr__(self, "pages", tuple(self.pages))
        if not self.pages:
            raise _bad("a RESTORE has at least one page")
        _distinct("destination pages", [p.destination_page for p in self.pages])
        _distinct("source pages", [(p.group_id, p.source_page) for p in self.pages])


@dataclass(frozen=True)
class Release:
    operation_id: int
    TYPE = FrameType.RELEASE

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)


@dataclass(frozen=True)
class Stats:
    TYPE = FrameType.STATS


MAX_PRIORITY = 255


@dataclass(frozen=True)
class Prepare:
    """Stage a prefix's missing pages into DRAM before its first use (docs/protocol.md 5.11).

    The demand is a QUERY's (prompt, origin, groups); ``first_use_millis`` is relative to now;
    ``priority`` 0..255, higher first. The answer is PREPARED, never a hit.
    """
    operation_id: int
    first_use_millis: int
    priority: int
    prompt_tokens: int
    origin_tokens: int
    groups: Tuple[QueryGroup, ...]
    TYPE = FrameType.PREPARE

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)
        _check_int("first_use_millis", self.first_use_millis, 0, U31_MAX)
        _check_int("priority", self.priority, 0, MAX_PRIORITY)
        _check_int("prompt_tokens", self.prompt_tokens, 1, U63_MAX)
        _check_int("origin_tokens", self.origin_tokens, 0, self.prompt_tokens - 1)
        object.__setattr__(self, "groups", tuple(self.groups))
        _check_int("group count", len(self.groups), 1, 0xFFFF)
        _distinct("group ids", [g.group_id for g in self.groups])

    @staticmethod
    def of(query: "Query", first_use_millis: int, priority: int = 0) -> "Prepare":
        """The PREPARE of the demand ``query`` will make (its operation id, prompt, origin and groups)."""
        return Prepare(query.operation_id, first_use_millis, priority, query.prompt_tokens, query.origin_tokens,
                       query.groups)


@dataclass(frozen=True)
class Hint:
    """A value hint for pages of the connection's namespace (5.12); ``duration_millis`` only for PIN."""
    kind: HintKind
    groups: Tuple[QueryGroup, ...]
    duration_millis: int = 0
    TYPE = FrameType.HINT

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", HintKind(self.kind))
        if self.kind == HintKind.PIN:
            _check_int("duration_millis", self.duration_millis, 1, U31_MAX)
        elif self.duration_millis != 0:
            raise _bad(f"duration_millis must be 0 for {self.kind.name}")
        object.__setattr__(self, "groups", tuple(self.groups))
        _check_int("group count", len(self.groups), 1, 0xFFFF)
        _distinct("group ids", [g.group_id for g in self.groups])


@dataclass(frozen=True)
class Contains:
    """Where each page it names is held on the Manager now, in the connection's namespace (5.13):
    independent names answered one by one, in order; nothing is leased or staged."""
    groups: Tuple[QueryGroup, ...]
    TYPE = FrameType.CONTAINS

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", tuple(self.groups))
        _check_int("group count", len(self.groups), 1, 0xFFFF)
        _distinct("group ids", [g.group_id for g in self.groups])


# ---------------------------------------------------------------------------------------------
# Reply and event frames (section 6)


@dataclass(frozen=True)
class ArenaFile:
    """One arena's size; its descriptor comes from the descriptor socket (6.11), in arena order."""
    size_bytes: int
    slot_bytes: int

    def __post_init__(self) -> None:
        _check_int("size_bytes", self.size_bytes, 1, U63_MAX)
        _check_int("slot_bytes", self.slot_bytes, 1, U31_MAX)
        # Not a multiple: the Manager's arena file starts with a 4 KiB header; offsets are absolute.
        if self.size_bytes < self.slot_bytes:
            raise _bad(f"size_bytes {self.size_bytes} is below slot_bytes {self.slot_bytes}")


@dataclass(frozen=True)
class Registered:
    incarnation_id: int
    epoch: int
    limits: Limits
    ticket: bytes
    descriptor_socket: str
    arenas: Tuple[ArenaFile, ...]
    TYPE = FrameType.REGISTERED

    def __post_init__(self) -> None:
        _check_int("incarnation_id", self.incarnation_id, 1, U63_MAX)
        _check_int("epoch", self.epoch, 0, U63_MAX)
        if len(self.ticket) != TICKET_BYTES:
            raise _bad(f"a ticket is {TICKET_BYTES} bytes: {len(self.ticket)}")
        _check_text("descriptor_socket", self.descriptor_socket, 1, MAX_SOCKET_PATH_BYTES)
        if not self.descriptor_socket.startswith("/"):
            raise _bad(f"descriptor_socket must be absolute: {self.descriptor_socket}")
        object.__setattr__(self, "arenas", tuple(self.arenas))
        _check_int("arena count", len(self.arenas), 1, 0xFFFF)


@dataclass(frozen=True)
class RegionRegistered:
    region_id: int
    TYPE = FrameType.REGION_REGISTERED

    def __post_init__(self) -> None:
        _check_int("region_id", self.region_id, 0, U31_MAX)


@dataclass(frozen=True)
class Lease:
    """A RESIDENT page's image: ``length_bytes`` at ``offset_bytes`` of arena ``arena_index``."""
    arena_index: int
    offset_bytes: int
    length_bytes: int

    def __post_init__(self) -> None:
        _check_int("arena_index", self.arena_index, 0, U31_MAX)
        _check_int("offset_bytes", self.offset_bytes, 0, U63_MAX)
        _check_int("length_bytes", self.length_bytes, 1, U31_MAX)


@dataclass(frozen=True)
class PageResult:
    """One page of a QUERY_RESULT: a lease exactly when the state is RESIDENT."""
    state: PageState
    lease: Optional[Lease] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", PageState(self.state))
        if (self.state == PageState.RESIDENT) != (self.lease is not None):
            raise _bad("a page carries a lease exactly when it is RESIDENT")


@dataclass(frozen=True)
class Span:
    first_page: int
    pages: Tuple[PageResult, ...]

    def __post_init__(self) -> None:
        _check_int("first_page", self.first_page, 0, U63_MAX)
        object.__setattr__(self, "pages", tuple(self.pages))
        _check_int("span page count", len(self.pages), 1, U31_MAX)

    @property
    def end_page(self) -> int:
        return self.first_page + len(self.pages)


@dataclass(frozen=True)
class GroupResult:
    group_id: int
    spans: Tuple[Span, ...]

    def __post_init__(self) -> None:
        _check_int("group_id", self.group_id, 0, U31_MAX)
        object.__setattr__(self, "spans", tuple(self.spans))
        if len(self.spans) > MAX_SPANS_PER_GROUP:
            raise ProtocolError(ErrorCode.TOO_LARGE, f"more than {MAX_SPANS_PER_GROUP} spans in group {self.group_id}")
        for a, b in zip(self.spans, self.spans[1:]):
            if b.first_page < a.end_page:
                raise _bad(f"spans of group {self.group_id} must ascend without overlap")

    def pages(self):
        """(page index, PageResult) for every page of the group, ascending."""
        for s in self.spans:
            for i, p in enumerate(s.pages):
                yield s.first_page + i, p


@dataclass(frozen=True)
class QueryResult:
    operation_id: int
    revision: int
    status: QueryStatus
    hit: bool
    boundary_tokens: int
    groups: Tuple[GroupResult, ...]
    TYPE = FrameType.QUERY_RESULT

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)
        _check_int("revision", self.revision, 0, U31_MAX)
        object.__setattr__(self, "status", QueryStatus(self.status))
        if not isinstance(self.hit, bool):
            raise _bad("hit must be a bool")
        _check_int("boundary_tokens", self.boundary_tokens, 0, U63_MAX)
        object.__setattr__(self, "groups", tuple(self.groups))
        _check_int("group count", len(self.groups), 0, 0xFFFF)
        _distinct("group ids", [g.group_id for g in self.groups])
        if self.status == QueryStatus.FINAL:
            allowed = ((PageState.RESIDENT, PageState.READY) if self.hit
                       else (PageState.MISS, PageState.CANDIDATE))
            for g in self.groups:
                for _, p in g.pages():
                    if p.state not in allowed:
                        raise _bad(f"a FINAL {'hit' if self.hit else 'miss'} cannot have a "
                                   f"{p.state.name} page (group {g.group_id})")

    def group(self, group_id: int) -> GroupResult:
        for g in self.groups:
            if g.group_id == group_id:
                return g
        raise KeyError(group_id)


def _settle_reply(name: str, outcomes: Tuple[SettleOutcome, ...], allowed) -> Tuple[SettleOutcome, ...]:
    out = tuple(SettleOutcome(o) for o in outcomes)
    if not out:
        raise _bad(f"{name} has at least one outcome")
    for o in out:
        if o not in allowed:
            raise _bad(f"{o.name} does not answer {name}")
    return out


@dataclass(frozen=True)
class Cancelled:
    operation_id: int
    drained: bool
    pages_released: int
    TYPE = FrameType.CANCELLED

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)
        _check_int("pages_released", self.pages_released, 0, U31_MAX)


@dataclass(frozen=True)
class Released:
    operation_id: int
    drained: bool
    pages_released: int
    TYPE = FrameType.RELEASED

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)
        _check_int("pages_released", self.pages_released, 0, U31_MAX)


@dataclass(frozen=True)
class Granted:
    """Write the page at ``offset_bytes`` of arena ``arena_index``, then commit ``reservation_id``."""
    reservation_id: int
    arena_index: int
    offset_bytes: int

    def __post_init__(self) -> None:
        _check_int("reservation_id", self.reservation_id, 1, U63_MAX)
        _check_int("arena_index", self.arena_index, 0, U31_MAX)
        _check_int("offset_bytes", self.offset_bytes, 0, U63_MAX)


@dataclass(frozen=True)
class Refused:
    reason: Refusal

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", Refusal(self.reason))


@dataclass(frozen=True)
class Reserved:
    outcomes: Tuple[Union[Granted, Refused], ...]
    TYPE = FrameType.RESERVED

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcomes", tuple(self.outcomes))
        if not self.outcomes:
            raise _bad("RESERVED has at least one outcome")


@dataclass(frozen=True)
class Committed:
    outcomes: Tuple[SettleOutcome, ...]
    TYPE = FrameType.COMMITTED

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcomes", _settle_reply(
            "COMMITTED", self.outcomes, (SettleOutcome.SEALED, SettleOutcome.NOT_FOUND, SettleOutcome.DISCARDED)))


@dataclass(frozen=True)
class Aborted:
    outcomes: Tuple[SettleOutcome, ...]
    TYPE = FrameType.ABORTED

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcomes", _settle_reply(
            "ABORTED", self.outcomes, (SettleOutcome.ABORTED, SettleOutcome.NOT_FOUND)))


@dataclass(frozen=True)
class RestoreAccepted:
    operation_id: int
    page_count: int
    TYPE = FrameType.RESTORE_ACCEPTED

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)
        _check_int("page_count", self.page_count, 1, U31_MAX)


@dataclass(frozen=True)
class Prepared:
    """The answer to PREPARE: never a hit; the later QUERY finds the staged pages resident."""
    operation_id: int
    outcome: PrepareOutcome
    pages_to_stage: int
    pages_resident: int
    start_delay_millis: int
    bytes_to_stage: int
    TYPE = FrameType.PREPARED

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)
        object.__setattr__(self, "outcome", PrepareOutcome(self.outcome))
        _check_int("pages_to_stage", self.pages_to_stage, 0, U31_MAX)
        _check_int("pages_resident", self.pages_resident, 0, U31_MAX)
        _check_int("start_delay_millis", self.start_delay_millis, 0, U31_MAX)
        _check_int("bytes_to_stage", self.bytes_to_stage, 0, U63_MAX)
        if self.outcome == PrepareOutcome.REFUSED and (self.pages_to_stage or self.bytes_to_stage):
            raise _bad("a REFUSED prepare stages nothing")


@dataclass(frozen=True)
class Counter:
    name: str
    value: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _COUNTER_NAME.match(self.name):
            raise _bad(f"bad counter name {self.name!r}")
        _check_int("counter value", self.value, 0, U63_MAX)


@dataclass(frozen=True)
class StatsReply:
    counters: Tuple[Counter, ...]
    TYPE = FrameType.STATS_REPLY

    def __post_init__(self) -> None:
        object.__setattr__(self, "counters", tuple(self.counters))
        _check_int("counter count", len(self.counters), 0, 0xFFFF)
        _distinct("counter names", [c.name for c in self.counters])

    def as_dict(self) -> dict:
        return {c.name: c.value for c in self.counters}


@dataclass(frozen=True)
class Hinted:
    """The answer to HINT (6.13): pages applied, not resident (another namespace's included), refused by the budget."""
    kind: HintKind
    applied: int
    not_resident: int
    refused_budget: int
    TYPE = FrameType.HINTED

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", HintKind(self.kind))
        for name in ("applied", "not_resident", "refused_budget"):
            _check_int(name, getattr(self, name), 0, U31_MAX)


@dataclass(frozen=True)
class Contained:
    """The answer to CONTAINS (6.14): one location per page named, in order; ``peers``: the Manager
    has peers, so an ABSENT page may be held by one (a QUERY with a peer wait fetches it)."""
    peers: bool
    locations: Tuple[PageLocation, ...]
    TYPE = FrameType.CONTAINED

    def __post_init__(self) -> None:
        object.__setattr__(self, "peers", bool(self.peers))
        object.__setattr__(self, "locations", tuple(PageLocation(v) for v in self.locations))


@dataclass(frozen=True)
class Completion:
    operation_id: int
    revision: int
    event: CompletionEvent
    outcome: Outcome
    error_code: Optional[ErrorCode] = None
    TYPE = FrameType.COMPLETION

    def __post_init__(self) -> None:
        _check_int("operation_id", self.operation_id, 1, U63_MAX)
        _check_int("revision", self.revision, 0, U31_MAX)
        object.__setattr__(self, "event", CompletionEvent(self.event))
        object.__setattr__(self, "outcome", Outcome(self.outcome))
        if (self.outcome == Outcome.FAILED) != (self.error_code is not None):
            raise _bad("a COMPLETION carries an error code exactly when its outcome is FAILED")
        if self.error_code is not None:
            object.__setattr__(self, "error_code", ErrorCode(self.error_code))


@dataclass(frozen=True)
class Error:
    code: ErrorCode
    message: str
    TYPE = FrameType.ERROR

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", ErrorCode(self.code))
        _check_text("message", self.message, 0, 0xFFFF)


Request = Union[Register, RegisterRegion, Query, QueryPoll, Cancel, PublishReserve, PublishCommit, PublishAbort,
                Restore, Release, Stats, Prepare, Hint, Contains]
Reply = Union[Registered, RegionRegistered, QueryResult, Cancelled, Released, Reserved, Committed, Aborted,
              RestoreAccepted, StatsReply, Prepared, Hinted, Contained, Completion, Error]


# ---------------------------------------------------------------------------------------------
# Encoder


def _str16(value: str) -> bytes:
    raw = value.encode("utf-8")
    return struct.pack("<H", len(raw)) + raw


def _request_id_allowed(frame_type: FrameType, request_id: int) -> bool:
    if frame_type == FrameType.COMPLETION:
        return request_id == NO_REQUEST
    return frame_type == FrameType.ERROR or request_id != NO_REQUEST


def encode(request_id: int, frame) -> bytes:
    """The whole frame, header included. Raises ProtocolError if the request id breaks section 2."""
    _check_int("request_id", request_id, 0, U64_MAX)
    if not _request_id_allowed(frame.TYPE, request_id):
        raise _bad(f"{frame.TYPE.name} cannot travel under request id {request_id}")
    body = _body(frame)
    return HEADER.pack(HEADER_BYTES + len(body), VERSION, frame.TYPE, request_id) + body


def _groups(groups) -> bytes:
    """The page-name groups of a QUERY, PREPARE, HINT or CONTAINS: each group's header, then its hashes."""
    out = bytearray()
    for g in groups:
        out += struct.pack("<IBBHI", g.group_id, g.key_form, g.hash_bytes, 0, len(g.hashes))
        out += b"".join(g.hashes)
    return bytes(out)


def _body(f) -> bytes:
    p = struct.pack
    if isinstance(f, Register):
        ns, rc = f.namespace.canonical_bytes(), contract_bytes(f.contract)
        return p("<Q", f.epoch) + _str16(f.instance_id) + p("<I", len(ns)) + ns + p("<I", len(rc)) + rc
    if isinstance(f, RegisterRegion):
        head = p("<QII", f.size_bytes, f.page_bytes, f.page_count)
        if f.path is not None:
            return head + p("<BB", REGION_FROM_PATH, 0) + _str16(f.path)
        return head + p("<BB", REGION_FROM_DESCRIPTOR, 0) + bytes(f.handle)
    if isinstance(f, Query):
        return p("<QIBBHQQII", f.operation_id, f.revision, f.target, 0, len(f.groups), f.prompt_tokens,
                 f.origin_tokens, f.prefill_tokens_per_second, f.peer_wait_millis) + _groups(f.groups)
    if isinstance(f, Prepare):
        return p("<QIBBHQQ", f.operation_id, f.first_use_millis, f.priority, 0, len(f.groups), f.prompt_tokens,
                 f.origin_tokens) + _groups(f.groups)
    if isinstance(f, QueryPoll):
        return p("<QI", f.operation_id, f.revision)
    if isinstance(f, (Cancel, Release)):
        return p("<Q", f.operation_id)
    if isinstance(f, PublishReserve):
        out = bytearray(p("<I", len(f.pages)))
        for e in f.pages:
            out += p("<IIBB", e.group_id, e.length_bytes, e.key_form, len(e.name)) + e.name
        if f.tenant is not None:
            out += _str16(f.tenant)
        return bytes(out)
    if isinstance(f, (PublishCommit, PublishAbort)):
        return p(f"<I{len(f.reservation_ids)}Q", len(f.reservation_ids), *f.reservation_ids)
    if isinstance(f, Restore):
        out = bytearray(p("<QII", f.operation_id, f.region_id, len(f.pages)))
        for e in f.pages:
            out += p("<IIQ", e.group_id, e.destination_page, e.source_page)
        return bytes(out)
    if isinstance(f, Stats):
        return b""

    if isinstance(f, Hint):
        return p("<BBHI", f.kind, 0, len(f.groups), f.duration_millis) + _groups(f.groups)
    if isinstance(f, Contains):
        return p("<HH", len(f.groups), 0) + _groups(f.groups)
    if isinstance(f, Registered):
        out = bytearray(p("<QQ", f.incarnation_id, f.epoch) + p("<13I", *f.limits.values()))
        out += p("<HH", len(f.arenas), 0) + bytes(f.ticket) + _str16(f.descriptor_socket)
        for a in f.arenas:
            out += p("<QI", a.size_bytes, a.slot_bytes)
        return bytes(out)
    if isinstance(f, RegionRegistered):
        return p("<I", f.region_id)
    if isinstance(f, QueryResult):
        out = bytearray(p("<QIBBHQ", f.operation_id, f.revision, f.status, int(f.hit), len(f.groups),
                          f.boundary_tokens))
        for g in f.groups:
            out += p("<IHH", g.group_id, len(g.spans), 0)
            for s in g.spans:
                out += p("<QI", s.first_page, len(s.pages))
                for page in s.pages:
                    out.append(page.state)
                    if page.lease is not None:
                        out += p("<IQI", page.lease.arena_index, page.lease.offset_bytes, page.lease.length_bytes)
        return bytes(out)
    if isinstance(f, (Cancelled, Released)):
        return p("<QBBHI", f.operation_id, int(f.drained), 0, 0, f.pages_released)
    if isinstance(f, Reserved):
        out = bytearray(p("<I", len(f.outcomes)))
        for o in f.outcomes:
            if isinstance(o, Granted):
                out += p("<BQIQ", GRANTED, o.reservation_id, o.arena_index, o.offset_bytes)
            else:
                out.append(o.reason)
        return bytes(out)
    if isinstance(f, (Committed, Aborted)):
        return p("<I", len(f.outcomes)) + bytes(f.outcomes)
    if isinstance(f, RestoreAccepted):
        return p("<QI", f.operation_id, f.page_count)
    if isinstance(f, Prepared):
        return p("<QBBHIIIQ", f.operation_id, f.outcome, 0, 0, f.pages_to_stage, f.pages_resident,
                 f.start_delay_millis, f.bytes_to_stage)
    if isinstance(f, StatsReply):
        out = bytearray(p("<HH", len(f.counters), 0))
        for c in f.counters:
            out += p("<Q", c.value) + _str16(c.name)
        return bytes(out)

    if isinstance(f, Hinted):
        return p("<BBHIII", f.kind, 0, 0, f.applied, f.not_resident, f.refused_budget)
    if isinstance(f, Contained):
        return p("<IBBH", len(f.locations), 1 if f.peers else 0, 0, 0) + bytes(f.locations)
    if isinstance(f, Completion):
        return p("<QIBBH", f.operation_id, f.revision, f.event, f.outcome, f.error_code or 0)
    if isinstance(f, Error):
        return p("<H", f.code) + _str16(f.message)
    raise TypeError(f"not a frame: {f!r}")


# ---------------------------------------------------------------------------------------------
# Decoder (section 7.2)


@dataclass(frozen=True)
class Decoded:
    """A valid frame of ``consumed`` bytes at the front of the buffer."""
    request_id: int
    frame: object
    consumed: int


@dataclass(frozen=True)
class NeedBytes:
    """Nothing can be said until at least ``count`` more bytes have arrived."""
    count: int


#: the scalar layouts a body is read with, compiled once (decoding is on every round trip's path)
_SCALARS = {fmt: struct.Struct(fmt) for fmt in ("<B", "<H", "<I", "<Q")}


class _Reader:
    """Bounds-checked little-endian cursor over one frame body; failures raise ProtocolError."""

    def __init__(self, body: memoryview):
        self.body = body
        self.pos = 0

    def _take(self, n: int, field: str) -> memoryview:
        if len(self.body) - self.pos < n:
            raise _bad(f"truncated {field} at offset {HEADER_BYTES + self.pos}: need {n} bytes, "
                       f"{len(self.body) - self.pos} left")
        out = self.body[self.pos:self.pos + n]
        self.pos += n
        return out

    def _unpack(self, fmt: str, field: str) -> int:
        layout = _SCALARS[fmt]
        pos = self.pos
        if len(self.body) - pos < layout.size:
            self._take(layout.size, field)  # raises the truncation error
        self.pos = pos + layout.size
        return layout.unpack_from(self.body, pos)[0]

    def fields(self, layout: struct.Struct, field: str) -> tuple:
        """The next ``layout.size`` bytes unpacked with ``layout``."""
        pos = self.pos
        if len(self.body) - pos < layout.size:
            self._take(layout.size, field)  # raises the truncation error
        self.pos = pos + layout.size
        return layout.unpack_from(self.body, pos)

    def u8(self, field: str) -> int:
        return self._unpack("<B", field)

    def u16(self, field: str) -> int:
        return self._unpack("<H", field)

    def u31(self, field: str) -> int:
        v = self._unpack("<I", field)
        if v > U31_MAX:
            raise _bad(f"{field} exceeds 2^31-1: {v}")
        return v

    def u63(self, field: str) -> int:
        v = self._unpack("<Q", field)
        if v > U63_MAX:
            raise _bad(f"{field} exceeds 2^63-1: {v}")
        return v

    def zero8(self, field: str) -> None:
        if self.u8(field):
            raise _bad(f"reserved {field} must be 0")

    def zero16(self, field: str) -> None:
        if self.u16(field):
            raise _bad(f"reserved {field} must be 0")

    def zero32(self, field: str) -> None:
        if self._unpack("<I", field):
            raise _bad(f"reserved {field} must be 0")

    def flag(self, field: str) -> bool:
        v = self.u8(field)
        if v > 1:
            raise _bad(f"{field} must be 0 or 1: {v}")
        return v == 1

    def count(self, field: str, n: int, budget: int, budget_name: str, min_entry_bytes: int) -> int:
        """Checks a count against its budget (TOO_LARGE) and the bytes left (MALFORMED)."""
        if n > budget:
            raise ProtocolError(ErrorCode.TOO_LARGE, f"{field} {n} exceeds {budget_name} {budget}")
        if n * min_entry_bytes > len(self.body) - self.pos:
            raise _bad(f"{field} {n} needs at least {n * min_entry_bytes} bytes, {len(self.body) - self.pos} left")
        return n

    def raw(self, n: int, field: str) -> bytes:
        return bytes(self._take(n, field))

    def str16(self, field: str, lo: int, hi: int, over: "ErrorCode" = ErrorCode.TOO_LARGE) -> str:
        n = self.u16(field + " length")
        if n > hi:
            raise ProtocolError(over, f"{field} is {n} bytes, more than {hi}")
        if n < lo:
            raise _bad(f"{field} must not be empty")
        try:
            return self.raw(n, field).decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            raise _bad(f"{field} is not valid UTF-8") from None

    def blob32(self, field: str, limit: int) -> bytes:
        n = self._unpack("<I", field + " length")
        if n > limit:
            raise _bad(f"{field} is {n} bytes, more than {limit}")
        return self.raw(n, field)

    def end(self) -> None:
        if self.pos != len(self.body):
            raise _bad(f"{len(self.body) - self.pos} trailing bytes after the body")


def _code(enum_type, value: int, field: str):
    try:
        return enum_type(value)
    except ValueError:
        raise _bad(f"unknown {field} {value}") from None


_FRAME_TYPES = {t.value: t for t in FrameType}


class FrameDecoder:
    """Decodes frames travelling ``accepting`` (a client accepts TO_CLIENT) under ``limits``.

    Stateless apart from its configuration; each call reads only its argument and never
    modifies it. Guarantees: a length below 16 or above ``max_frame_bytes`` is refused from the
    first 4 bytes (not skippable); every proper prefix of a valid frame is NeedBytes; nothing is
    allocated for a declared count before it is checked against its budget and the bytes left.
    """

    def __init__(self, limits: Limits = DEFAULT_LIMITS, accepting: Direction = Direction.TO_CLIENT):
        self.limits = limits
        self.accepting = accepting

    def decode(self, data) -> Union[Decoded, NeedBytes]:
        """Decodes the front of ``data`` (bytes, bytearray or memoryview).

        Returns Decoded or NeedBytes; raises MalformedFrame for a refused frame."""
        buf = memoryview(data).cast("B")
        if len(buf) < 4:
            return NeedBytes(4 - len(buf))
        (length,) = struct.unpack_from("<I", buf, 0)
        if length < HEADER_BYTES:
            raise MalformedFrame(ErrorCode.MALFORMED, f"frame length {length} is below the 16-byte header", 0, 0)
        if length > self.limits.max_frame_bytes:
            raise MalformedFrame(ErrorCode.TOO_LARGE,
                                 f"frame length {length} exceeds maxFrameBytes {self.limits.max_frame_bytes}", 0, 0)
        if len(buf) < length:
            return NeedBytes(length - len(buf))
        _, version, type_code, request_id = HEADER.unpack_from(buf, 0)
        if version != VERSION:
            raise MalformedFrame(ErrorCode.UNSUPPORTED_VERSION, f"version {version} is not {VERSION}",
                                 request_id, length)
        frame_type = _FRAME_TYPES.get(type_code)
        wanted = self.accepting == Direction.TO_MANAGER
        if frame_type is None or frame_type.to_manager != wanted:
            raise MalformedFrame(ErrorCode.UNKNOWN_OPERATION, f"frame type 0x{type_code:04x} is unknown or does "
                                 f"not travel {self.accepting.value}", request_id, length)
        if not _request_id_allowed(frame_type, request_id):
            raise MalformedFrame(ErrorCode.MALFORMED, f"{frame_type.name} cannot carry request id {request_id}",
                                 request_id, length)
        reader = _Reader(buf[HEADER_BYTES:length])
        try:
            frame = self._body(frame_type, reader)
            reader.end()
        except ProtocolError as e:
            raise MalformedFrame(e.code, f"{frame_type.name}: {e.message}", request_id, length) from None
        except (StateError, ValueError) as e:
            raise MalformedFrame(ErrorCode.MALFORMED, f"{frame_type.name} is inconsistent: {e}",
                                 request_id, length) from None
        return Decoded(request_id, frame, length)

    def _body(self, t: FrameType, r: _Reader):
        if t is FrameType.QUERY_RESULT:  # the most frequent frame a client reads
            return self._query_result(r)
        lim = self.limits
        if t == FrameType.REGISTER:
            epoch = r.u63("epoch")
            instance = r.str16("instance_id", 1, MAX_INSTANCE_ID_BYTES)
            try:
                ns = Namespace.decode(r.blob32("namespace", 7228))
            except StateError as e:
                raise _bad(f"namespace: {e}") from None
            contract = decode_contract(r.blob32("contract", MAX_CONTRACT_BYTES))
            return Register(instance, epoch, ns, contract)
        if t == FrameType.REGISTER_REGION:
            size, page_bytes, page_count = r.u63("size_bytes"), r.u31("page_bytes"), r.u31("page_count")
            source = r.u8("source")
            r.zero8("pad")
            if source == REGION_FROM_PATH:
                return RegisterRegion(r.str16("path", 1, lim.max_string_bytes), size, page_bytes, page_count)
            if source == REGION_FROM_DESCRIPTOR:
                return RegisterRegion(None, size, page_bytes, page_count, r.raw(TICKET_BYTES, "handle"))
            raise _bad(f"unknown region source {source}")
        if t == FrameType.QUERY:
            return self._query(r)
        if t == FrameType.QUERY_POLL:
            return QueryPoll(r.u63("operation_id"), r.u31("revision"))
        if t == FrameType.CANCEL:
            return Cancel(r.u63("operation_id"))
        if t == FrameType.RELEASE:
            return Release(r.u63("operation_id"))
        if t == FrameType.PUBLISH_RESERVE:
            n = r.count("page_count", r.u31("page_count"), lim.max_pages_per_publish, "maxPagesPerPublish", 11)
            pages = []
            for _ in range(n):
                gid, length = r.u31("group_id"), r.u31("length_bytes")
                form, width = _code(KeyForm, r.u8("key_form"), "key_form"), self._width(r)
                pages.append(PublishPage(gid, form, r.raw(width, "hash"), length))
            # the optional trailing label: 1..64 bytes, a longer one is MALFORMED
            tenant = None if r.pos == len(r.body) else r.str16("tenant", 1, MAX_TENANT_BYTES, ErrorCode.MALFORMED)
            return PublishReserve(tuple(pages), tenant)
        if t in (FrameType.PUBLISH_COMMIT, FrameType.PUBLISH_ABORT):
            n = r.count("id_count", r.u31("id_count"), lim.max_ids_per_settle, "maxIdsPerSettle", 8)
            ids = tuple(r.u63("reservation_id") for _ in range(n))
            return PublishCommit(ids) if t == FrameType.PUBLISH_COMMIT else PublishAbort(ids)
        if t == FrameType.RESTORE:
            op, region = r.u63("operation_id"), r.u31("region_id")
            n = r.count("page_count", r.u31("page_count"), lim.max_pages_per_restore, "maxPagesPerRestore", 16)
            pages = []
            for _ in range(n):
                gid, dest = r.u31("group_id"), r.u31("destination_page")
                pages.append(RestorePage(gid, r.u63("source_page"), dest))
            return Restore(op, region, tuple(pages))
        if t == FrameType.STATS:
            return Stats()
        if t == FrameType.PREPARE:
            op, first_use, priority = r.u63("operation_id"), r.u31("first_use_millis"), r.u8("priority")
            r.zero8("pad")
            n = r.count("group_count", r.u16("group_count"), lim.max_groups_per_query, "maxGroupsPerQuery", 12)
            prompt, origin = r.u63("prompt_tokens"), r.u63("origin_tokens")
            return Prepare(op, first_use, priority, prompt, origin, self._groups(r, n))
        if t == FrameType.HINT:
            kind = _code(HintKind, r.u8("kind"), "kind")
            r.zero8("pad")
            n = r.count("group_count", r.u16("group_count"), lim.max_groups_per_query, "maxGroupsPerQuery", 12)
            duration = r.u31("duration_millis")
            return Hint(kind, self._groups(r, n), duration)
        if t == FrameType.CONTAINS:
            n = r.count("group_count", r.u16("group_count"), lim.max_groups_per_query, "maxGroupsPerQuery", 12)
            r.zero16("pad")
            return Contains(self._groups(r, n))
        if t == FrameType.REGISTERED:
            return self._registered(r)
        if t == FrameType.REGION_REGISTERED:
            return RegionRegistered(r.u31("region_id"))
        if t == FrameType.QUERY_RESULT:
            return self._query_result(r)
        if t in (FrameType.CANCELLED, FrameType.RELEASED):
            op, drained = r.u63("operation_id"), r.flag("drained")
            r.zero8("pad")
            r.zero16("pad")
            cls = Cancelled if t == FrameType.CANCELLED else Released
            return cls(op, drained, r.u31("pages_released"))
        if t == FrameType.RESERVED:
            n = r.count("outcome_count", r.u31("outcome_count"), lim.max_pages_per_publish, "maxPagesPerPublish", 1)
            outcomes = []
            for _ in range(n):
                code = r.u8("outcome")
                if code == GRANTED:
                    rid, arena = r.u63("reservation_id"), r.u31("arena_index")
                    outcomes.append(Granted(rid, arena, r.u63("offset_bytes")))
                else:
                    outcomes.append(Refused(_code(Refusal, code, "outcome")))
            return Reserved(tuple(outcomes))
        if t in (FrameType.COMMITTED, FrameType.ABORTED):
            n = r.count("outcome_count", r.u31("outcome_count"), lim.max_ids_per_settle, "maxIdsPerSettle", 1)
            outcomes = tuple(_code(SettleOutcome, r.u8("outcome"), "outcome") for _ in range(n))
            return Committed(outcomes) if t == FrameType.COMMITTED else Aborted(outcomes)
        if t == FrameType.RESTORE_ACCEPTED:
            return RestoreAccepted(r.u63("operation_id"), r.u31("page_count"))
        if t == FrameType.PREPARED:
            op, outcome = r.u63("operation_id"), _code(PrepareOutcome, r.u8("outcome"), "outcome")
            r.zero8("pad")
            r.zero16("pad")
            return Prepared(op, outcome, r.u31("pages_to_stage"), r.u31("pages_resident"), r.u31("start_delay_millis"),
                            r.u63("bytes_to_stage"))
        if t == FrameType.STATS_REPLY:
            n = r.count("counter_count", r.u16("counter_count"), lim.max_stats_counters, "maxStatsCounters", 11)
            r.zero16("pad")
            counters = []
            for _ in range(n):
                value = r.u63("value")
                counters.append(Counter(r.str16("name", 1, MAX_COUNTER_NAME), value))
            return StatsReply(tuple(counters))
        if t == FrameType.HINTED:
            kind = _code(HintKind, r.u8("kind"), "kind")
            r.zero8("pad")
            r.zero16("pad")
            return Hinted(kind, r.u31("applied"), r.u31("not_resident"), r.u31("refused_budget"))
        if t == FrameType.CONTAINED:
            n = r.count("page_count", r.u31("page_count"), lim.max_pages_per_query, "maxPagesPerQuery", 1)
            peers = r.flag("peers")
            r.zero8("pad")
            r.zero16("pad")
            codes = r.raw(n, "locations")
            bad = codes.translate(None, _LOCATION_CODES)
            if bad:
                raise _bad(f"unknown location {bad[0]}")
            return _decoded(Contained, peers, tuple([_LOCATIONS[c] for c in codes]))
        if t == FrameType.COMPLETION:
            op, revision = r.u63("operation_id"), r.u31("revision")
            event = _code(CompletionEvent, r.u8("event"), "event")
            outcome = _code(Outcome, r.u8("outcome"), "outcome")
            error = r.u16("error_code")
            if outcome == Outcome.FAILED:
                return Completion(op, revision, event, outcome, _code(ErrorCode, error, "error code"))
            if error:
                raise _bad("error_code must be 0 unless the outcome is FAILED")
            return Completion(op, revision, event, outcome)
        if t == FrameType.ERROR:
            code = _code(ErrorCode, r.u16("error_code"), "error code")
            return Error(code, r.str16("message", 0, lim.max_string_bytes))
        raise AssertionError(t)

    @staticmethod
    def _width(r: _Reader) -> int:
        width = r.u8("hash_bytes")
        if not 1 <= width <= MAX_HASH_BYTES:
            raise _bad(f"hash_bytes must be 1..{MAX_HASH_BYTES}: {width}")
        return width

    def _query(self, r: _Reader) -> Query:
        lim = self.limits
        op, revision = r.u63("operation_id"), r.u31("revision")
        target = _code(CompletionTarget, r.u8("target"), "target")
        r.zero8("pad")
        n = r.count("group_count", r.u16("group_count"), lim.max_groups_per_query, "maxGroupsPerQuery", 12)
        prompt, origin = r.u63("prompt_tokens"), r.u63("origin_tokens")
        prefill_rate = r.u31("prefill_tokens_per_second")
        peer_wait = r.u31("peer_wait_millis")
        return Query(op, revision, target, prompt, origin, self._groups(r, n), prefill_rate, peer_wait)

    def _groups(self, r: _Reader, n: int) -> Tuple[QueryGroup, ...]:
        """The ``n`` page-name groups of a QUERY, PREPARE or HINT, their pages summed under maxPagesPerQuery."""
        groups, pages = [], 0
        for _ in range(n):
            gid = r.u31("group_id")
            form, width = _code(KeyForm, r.u8("key_form"), "key_form"), self._width(r)
            r.zero16("pad")
            count = r.u31("page_count")
            pages += count
            r.count("pages of the frame", pages, self.limits.max_pages_per_query, "maxPagesPerQuery", 0)
            r.count("page_count", count, U31_MAX, "", width)
            packed = r.raw(count * width, "hashes")
            groups.append(QueryGroup(gid, form, tuple(packed[i * width:(i + 1) * width] for i in range(count)), width))
        return tuple(groups)

    def _registered(self, r: _Reader) -> Registered:
        incarnation, epoch = r.u63("incarnation_id"), r.u63("epoch")
        limits = Limits(*(r.u31(f"limit {i}") for i in range(13)))
        n = r.count("arena_count", r.u16("arena_count"), self.limits.max_arena_files, "maxArenaFiles", 12)
        r.zero16("pad")
        ticket = r.raw(TICKET_BYTES, "ticket")
        socket_path = r.str16("descriptor_socket", 1, MAX_SOCKET_PATH_BYTES)
        arenas = []
        for _ in range(n):
            size, slot = r.u63("size_bytes"), r.u31("slot_bytes")
            arenas.append(ArenaFile(size, slot))
        return Registered(incarnation, epoch, limits, ticket, socket_path, tuple(arenas))

    def _query_result(self, r: _Reader) -> QueryResult:
        """QUERY_RESULT (6.3), on every round trip's path: fixed parts read with one compiled layout
        each, every rule of the frame's dataclasses checked here once, and the objects built
        without running those checks again (:func:`_decoded`)."""
        lim = self.limits
        op, revision, status_code, hit_code, n, boundary = r.fields(_QR_HEAD, "QUERY_RESULT header")
        if not 1 <= op <= U63_MAX:
            raise _bad(f"operation_id must be an integer in [1, {U63_MAX}]: {op}")
        if revision > U31_MAX:
            raise _bad(f"revision exceeds 2^31-1: {revision}")
        status = _QUERY_STATUS.get(status_code)
        if status is None:
            raise _bad(f"unknown status {status_code}")
        if hit_code > 1:
            raise _bad(f"hit must be 0 or 1: {hit_code}")
        hit = hit_code == 1
        r.count("group_count", n, lim.max_groups_per_query, "maxGroupsPerQuery", 8)
        if boundary > U63_MAX:
            raise _bad(f"boundary_tokens exceeds 2^63-1: {boundary}")
        allowed = None if status != QueryStatus.FINAL else (_FINAL_HIT_STATES if hit else _FINAL_MISS_STATES)
        resident_allowed = allowed is None or PageState.RESIDENT in allowed
        groups, gids, pages = [], set(), 0
        for _ in range(n):
            gid, spans_n, pad = r.fields(_QR_GROUP, "group")
            if gid > U31_MAX:
                raise _bad(f"group_id exceeds 2^31-1: {gid}")
            if pad:
                raise _bad("reserved pad must be 0")
            r.count("span_count", spans_n, MAX_SPANS_PER_GROUP, "MAX_SPANS_PER_GROUP", 12)
            if gid in gids:
                raise _bad("group ids must be distinct")
            gids.add(gid)
            spans, end_page = [], 0
            for _ in range(spans_n):
                first, count = r.fields(_QR_SPAN, "span")
                if first > U63_MAX or count > U31_MAX:
                    raise _bad(f"span first_page {first} or page_count {count} out of range")
                if count < 1:
                    raise _bad(f"span page count must be an integer in [1, {U31_MAX}]: 0")
                if first < end_page:
                    raise _bad(f"spans of group {gid} must ascend without overlap")
                pages += count
                r.count("pages of the result", pages, lim.max_pages_per_query, "maxPagesPerQuery", 0)
                r.count("page_count", count, U31_MAX, "", 1)
                entries = self._resident_run(r, count) if resident_allowed else None
                if entries is not None:
                    spans.append(_decoded(Span, first, entries))
                    end_page = first + count
                    continue
                entries = []
                for _ in range(count):
                    state = _PAGE_STATES.get(r.u8("state"))
                    if state is None:
                        raise _bad(f"unknown state {r.body[r.pos - 1]}")
                    if allowed is not None and state not in allowed:
                        raise _bad(f"a FINAL {'hit' if hit else 'miss'} cannot have a {state.name} page "
                                   f"(group {gid})")
                    if state == PageState.RESIDENT:
                        arena, offset, length = r.fields(_QR_LEASE, "lease")
                        if arena > U31_MAX or offset > U63_MAX or not 1 <= length <= U31_MAX:
                            raise _bad(f"lease ({arena}, {offset}, {length}) out of range")
                        entries.append(_decoded(PageResult, state, _decoded(Lease, arena, offset, length)))
                    else:
                        entries.append(_decoded(PageResult, state, None))
                spans.append(_decoded(Span, first, tuple(entries)))
                end_page = first + count
            groups.append(_decoded(GroupResult, gid, tuple(spans)))
        return _decoded(QueryResult, op, revision, status, hit, boundary, tuple(groups))


    @staticmethod
    def _resident_run(r: "_Reader", count: int) -> Optional[tuple]:
        """A span of ``count`` RESIDENT entries (a hit's usual span) read in bulk, each checked as
        the entry-by-entry loop checks it; None (nothing read) when the span holds another state,
        a value out of range or too few bytes: the loop then reads it and names what is wrong."""
        size = _QR_RESIDENT.size * count
        body, pos = r.body, r.pos
        if len(body) - pos < size or body[pos:pos + size:_QR_RESIDENT.size] != _RESIDENT_CODES[:count]:
            return None
        rows = list(_QR_RESIDENT.iter_unpack(body[pos:pos + size]))
        _, arenas, offsets, lengths = zip(*rows)
        if max(arenas) > U31_MAX or max(offsets) > U63_MAX or min(lengths) < 1 or max(lengths) > U31_MAX:
            return None
        r.pos = pos + size
        entries = []
        resident = PageState.RESIDENT
        for _, arena, offset, length in rows:  # the frozen dataclasses' fields set as _decoded does
            lease = _new(Lease)
            fields = lease.__dict__
            fields["arena_index"], fields["offset_bytes"], fields["length_bytes"] = arena, offset, length
            entry = _new(PageResult)
            fields = entry.__dict__
            fields["state"], fields["lease"] = resident, lease
            entries.append(entry)
        return tuple(entries)


#: QUERY_RESULT's fixed parts (6.3): header (operation, revision, status, hit, group count,
#: boundary), group (id, span count, pad), span (first page, page count), lease (arena, offset, length)
_QR_HEAD = struct.Struct("<QIBBHQ")
_QR_GROUP = struct.Struct("<IHH")
_QR_SPAN = struct.Struct("<QI")
_QR_LEASE = struct.Struct("<IQI")
#: a RESIDENT entry whole (state, arena, offset, length), and the state bytes of a run of them
_QR_RESIDENT = struct.Struct("<BIQI")
_RESIDENT_CODES = bytes([PageState.RESIDENT.value]) * 65_536
_new = object.__new__
_QUERY_STATUS = {s.value: s for s in QueryStatus}
_PAGE_STATES = {s.value: s for s in PageState}
_FINAL_HIT_STATES = frozenset((PageState.RESIDENT, PageState.READY))
_FINAL_MISS_STATES = frozenset((PageState.MISS, PageState.CANDIDATE))
#: CONTAINED's location codes, for bytes.translate's delete argument
_LOCATION_CODES = bytes(l.value for l in PageLocation)
_LOCATIONS = {l.value: l for l in PageLocation}


_FIELD_NAMES: dict = {}


def _decoded(cls, *values):
    """An instance of the frozen dataclass ``cls`` with ``values`` as its fields, in order, without
    its ``__post_init__``: only for a decoder that has checked every rule of ``cls`` itself."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    obj = object.__new__(cls)
    obj.__dict__.update(zip(names, values))  # what a frozen dataclass's own __init__ does, less its checks
    return obj


def decode_all(data: bytes, accepting: Direction, limits: Limits = DEFAULT_LIMITS) -> List[Decoded]:
    """Every frame of ``data``, which must hold whole valid frames only; raises MalformedFrame
    for a bad frame and ProtocolError if ``data`` ends inside a frame."""
    decoder, out, pos = FrameDecoder(limits, accepting), [], 0
    view = memoryview(data)
    while pos < len(view):
        result = decoder.decode(view[pos:])
        if isinstance(result, NeedBytes):
            raise ProtocolError(ErrorCode.MALFORMED, f"truncated frame at offset {pos}: {result.count} more bytes")
        out.append(result)
        pos += result.consumed
    return out


def arenas_request(ticket: bytes) -> bytes:
    """The descriptor socket's ARENAS request for REGISTERED's ``ticket`` (protocol 6.11)."""
    if len(ticket) != TICKET_BYTES:
        raise _bad(f"a ticket is {TICKET_BYTES} bytes: {len(ticket)}")
    return EXCHANGE_MAGIC + struct.pack("<HH", VERSION, OP_ARENAS) + bytes(ticket)


def region_request() -> bytes:
    """The descriptor socket's REGION request; the region's descriptor travels with it."""
    return EXCHANGE_MAGIC + struct.pack("<HH", VERSION, OP_REGION) + bytes(TICKET_BYTES)


@dataclass(frozen=True)
class ExchangeReply:
    """The descriptor socket's reply: ``error_code`` 0 on success; ``handle`` only for a REGION success."""
    error_code: int
    fd_count: int
    handle: Optional[bytes]


def decode_exchange_reply(message: bytes) -> ExchangeReply:
    """Decodes a 24-byte descriptor socket reply; anything else is MALFORMED."""
    if len(message) != EXCHANGE_BYTES or message[:4] != EXCHANGE_MAGIC:
        raise _bad("not a descriptor socket reply")
    error, count = struct.unpack_from("<HH", message, 4)
    tail = bytes(message[8:])
    return ExchangeReply(error, count, None if tail == bytes(TICKET_BYTES) else tail)
