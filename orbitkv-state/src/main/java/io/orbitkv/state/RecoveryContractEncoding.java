package io.orbitkv.state;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The canonical binary encoding of a {@link RecoveryContract}, as carried by a REGISTER frame
 * (normative copy: {@code docs/protocol.md}, section "Recovery contract encoding").
 *
 * <pre>
 *   offset      size  field
 *   0           4     magic "OKRC" (0x4F 0x4B 0x52 0x43)
 *   4           4     u32 encoding version = 1
 *   8           4     u32 page_tokens            (1 .. 2^31-1)
 *   12          4     u32 group_count n          (1 .. {@value #MAX_GROUPS})
 *   16 + 16*i   16    group i, in contract order:
 *                       u32 kind (1 full, 2 sliding_window, 3 recurrent)
 *                       u32 group_id             (0 .. 2^31-1, unique)
 *                       u32 window_tokens        (sliding_window: >= 1; others: 0)
 *                       u32 sink_tokens          (sliding_window: >= 0; others: 0)
 * </pre>
 * All integers little-endian; no padding, no trailing bytes, so one contract has exactly one
 * encoding (group order is part of the contract: it is the order blockers are reported in).
 *
 * <p>Stateless and thread-safe.
 *
 * <p>Design note: fixed 16-byte group entries, rather than a per-kind variable layout, so a
 * reader finds group {@code i} at {@code 16 + 16 i} without parsing its predecessors, and the
 * whole contract of the largest hybrid (64 groups) is 1,040 bytes; the two unused words of a
 * full or recurrent group must be zero, which keeps the encoding canonical.
 */
public final class RecoveryContractEncoding {

    /** Most groups a contract may have on the wire. */
    public static final int MAX_GROUPS = 64;
    /** Version written after the magic. */
    public static final int ENCODING_VERSION = 1;
    /** Size of the fixed header (magic, version, page_tokens, group_count), in bytes. */
    public static final int HEADER_BYTES = 16;
    /** Size of one group entry, in bytes. */
    public static final int GROUP_BYTES = 16;
    /** Largest encoding: the header and {@value #MAX_GROUPS} groups. */
    public static final int MAX_ENCODED_BYTES = HEADER_BYTES + MAX_GROUPS * GROUP_BYTES;

    /** Wire value of {@code kind} for {@link StateGroup.Full}. */
    public static final int KIND_FULL = 1;
    /** Wire value of {@code kind} for {@link StateGroup.SlidingWindow}. */
    public static final int KIND_SLIDING_WINDOW = 2;
    /** Wire value of {@code kind} for {@link StateGroup.Recurrent}. */
    public static final int KIND_RECURRENT = 3;

    private static final byte[] MAGIC = {'O', 'K', 'R', 'C'};

    private RecoveryContractEncoding() {
    }

    /**
     * The canonical bytes of {@code contract}.
     *
     * @throws IllegalArgumentException if the contract has more than {@value #MAX_GROUPS} groups
     */
    public static byte[] canonicalBytes(RecoveryContract contract) {
        Objects.requireNonNull(contract, "contract");
        List<StateGroup> groups = contract.groups();
        if (groups.size() > MAX_GROUPS) {
            throw new IllegalArgumentException("a contract on the wire has at most " + MAX_GROUPS
                    + " groups: " + groups.size());
        }
        ByteBuffer out = ByteBuffer.allocate(HEADER_BYTES + groups.size() * GROUP_BYTES)
                .order(ByteOrder.LITTLE_ENDIAN);
        out.put(MAGIC).putInt(ENCODING_VERSION).putInt(contract.pageTokens()).putInt(groups.size());
        for (StateGroup g : groups) {
            switch (g) {
                case StateGroup.Full f -> out.putInt(KIND_FULL).putInt(f.id()).putInt(0).putInt(0);
                case StateGroup.SlidingWindow w -> out.putInt(KIND_SLIDING_WINDOW).putInt(w.id())
                        .putInt(w.windowTokens()).putInt(w.sinkTokens());
                case StateGroup.Recurrent r -> out.putInt(KIND_RECURRENT).putInt(r.id()).putInt(0).putInt(0);
            }
        }
        return out.array();
    }

    /**
     * Decodes canonical bytes. Every malformation, including trailing bytes, non-zero unused
     * words and a contract the {@link RecoveryContract} constructor refuses, is a
     * {@link ContractDecoding.Malformed} naming the offset.
     */
    public static ContractDecoding decode(byte[] bytes) {
        Objects.requireNonNull(bytes, "bytes");
        if (bytes.length < HEADER_BYTES) {
            return malformed("truncated header: " + bytes.length + " bytes, need " + HEADER_BYTES);
        }
        if (bytes.length > MAX_ENCODED_BYTES) {
            return malformed("encoding is " + bytes.length + " bytes, more than " + MAX_ENCODED_BYTES);
        }
        ByteBuffer in = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < MAGIC.length; i++) {
            if (in.get() != MAGIC[i]) return malformed("bad magic at offset " + i + ": not \"OKRC\"");
        }
        int version = in.getInt();
        if (version != ENCODING_VERSION) {
            return malformed("unsupported encoding version " + Integer.toUnsignedString(version));
        }
        int pageTokens = in.getInt();
        if (pageTokens <= 0) {
            return malformed("page_tokens at offset 8 must be in [1, 2^31-1]: " + Integer.toUnsignedString(pageTokens));
        }
        int count = in.getInt();
        if (count <= 0 || count > MAX_GROUPS) {
            return malformed("group_count at offset 12 must be in [1, " + MAX_GROUPS + "]: "
                    + Integer.toUnsignedString(count));
        }
        if (in.remaining() != count * GROUP_BYTES) {
            return malformed(count + " groups need " + count * GROUP_BYTES + " bytes after offset 16, found "
                    + in.remaining());
        }
        List<StateGroup> groups = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int at = in.position();
            int kind = in.getInt();
            int id = in.getInt();
            int window = in.getInt();
            int sink = in.getInt();
            if (id < 0) return malformed("group_id at offset " + (at + 4) + " exceeds 2^31-1");
            switch (kind) {
                case KIND_FULL, KIND_RECURRENT -> {
                    if (window != 0 || sink != 0) {
                        return malformed("unused words of group at offset " + at + " must be zero");
                    }
                    groups.add(kind == KIND_FULL ? new StateGroup.Full(id) : new StateGroup.Recurrent(id));
                }
                case KIND_SLIDING_WINDOW -> {
                    if (window <= 0 || sink < 0) {
                        return malformed("sliding_window at offset " + at + " needs window >= 1 and sink >= 0");
                    }
                    groups.add(new StateGroup.SlidingWindow(id, window, sink));
                }
                default -> {
                    return malformed("unknown group kind " + Integer.toUnsignedString(kind) + " at offset " + at);
                }
            }
        }
        try {
            return new ContractDecoding.Decoded(new RecoveryContract(pageTokens, groups));
        } catch (IllegalArgumentException e) {
            return malformed("invalid contract: " + e.getMessage());
        }
    }

    private static ContractDecoding malformed(String reason) {
        return new ContractDecoding.Malformed(reason);
    }
}
