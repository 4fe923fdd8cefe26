package io.orbitkv.state.protocol;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The decoder's refusals, each with its error code and whether the stream can go on. */
class FrameDecoderTest {

    private final FrameDecoder manager = new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_MANAGER);
    private final FrameDecoder client = new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_CLIENT);

    private static ByteBuffer le(byte[] bytes) {
        return ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static DecodeResult.Malformed malformed(DecodeResult r) {
        assertThat(r).isInstanceOf(DecodeResult.Malformed.class);
        return (DecodeResult.Malformed) r;
    }

    private static byte[] poll() {
        return FrameEncoder.toBytes(7, new Request.QueryPoll(3, 1));
    }

    @Test
    void oversizedLengthIsRefusedFromFourBytesWithoutAllocating() {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        byte[] header = new byte[4];
        le(header).putInt(0, 0xFFFF_FFF0); // declares almost 4 GiB
        DecodeResult result = manager.decode(ByteBuffer.wrap(header));
        threads.getCurrentThreadAllocatedBytes(); // warm up the counter itself
        long before = threads.getCurrentThreadAllocatedBytes();
        for (int i = 0; i < 100; i++) result = manager.decode(ByteBuffer.wrap(header));
        long allocated = (threads.getCurrentThreadAllocatedBytes() - before) / 100;
        DecodeResult.Malformed m = malformed(result);
        assertThat(m.code()).isEqualTo(ErrorCode.TOO_LARGE);
        assertThat(m.skippable()).isFalse();
        assertThat(allocated).as("bytes allocated for a 4 GiB declaration").isLessThan(4096);
    }

    @Test
    void lengthJustOverTheLimitIsTooLargeAndAtTheLimitWaits() {
        ProtocolLimits small = new ProtocolLimits(64, 64, 64, 64, 64, 64, 64, 64, 64, 1, 1, 1, 1);
        FrameDecoder d = new FrameDecoder(small, Direction.TO_MANAGER);
        byte[] header = new byte[16];
        le(header).putInt(0, 65);
        assertThat(malformed(d.decode(ByteBuffer.wrap(header))).code()).isEqualTo(ErrorCode.TOO_LARGE);
        le(header).putInt(0, 64);
        assertThat(d.decode(ByteBuffer.wrap(header))).isEqualTo(new DecodeResult.NeedBytes(48));
    }

    @Test
    void hugeDeclaredCountInsideASmallFrameIsRefusedWithoutAllocating() {
        // A PUBLISH_COMMIT claiming 2^31-1 ids in an 20-byte body: the count is checked first.
        ProtocolLimits generous = new ProtocolLimits(1 << 20, 64, 1 << 20, 1 << 20, Integer.MAX_VALUE, 1 << 20,
                64, 64, 64, 1, 1, 1, 1);
        FrameDecoder d = new FrameDecoder(generous, Direction.TO_MANAGER);
        byte[] frame = FrameEncoder.toBytes(9, new Request.PublishCommit(List.of(1L, 2L)));
        le(frame).putInt(FrameLayout.HEADER_BYTES, Integer.MAX_VALUE);
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        DecodeResult result = d.decode(ByteBuffer.wrap(frame));
        threads.getCurrentThreadAllocatedBytes();
        long before = threads.getCurrentThreadAllocatedBytes();
        for (int i = 0; i < 100; i++) result = d.decode(ByteBuffer.wrap(frame));
        assertThat((threads.getCurrentThreadAllocatedBytes() - before) / 100).isLessThan(16_384);
        DecodeResult.Malformed m = malformed(result);
        assertThat(m.code()).isEqualTo(ErrorCode.MALFORMED);
        assertThat(m.skippable()).isTrue();
        assertThat(m.requestId()).isEqualTo(9);
    }

    @Test
    void countOverItsBudgetIsTooLargeButSkippable() {
        ProtocolLimits limits = new ProtocolLimits(1 << 20, 64, 64, 64, 3, 64, 64, 64, 64, 1, 1, 1, 1);
        byte[] frame = FrameEncoder.toBytes(5, new Request.PublishAbort(List.of(1L, 2L, 3L, 4L)));
        DecodeResult.Malformed m = malformed(new FrameDecoder(limits, Direction.TO_MANAGER).decode(ByteBuffer.wrap(frame)));
        assertThat(m.code()).isEqualTo(ErrorCode.TOO_LARGE);
        assertThat(m.skipBytes()).isEqualTo(frame.length);
    }

    @Test
    void queryPagesAreBudgetedOverAllGroups() {
        ProtocolLimits limits = new ProtocolLimits(1 << 20, 64, 5, 64, 64, 64, 64, 64, 64, 1, 1, 1, 1);
        Request.Query q = new Request.Query(1, 0, CompletionTarget.HOST_READY, 100, 0, List.of(
                new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.packed(8, new byte[8 * 3])),
                new Request.QueryGroup(1, KeyForm.BLOCK_HASH, Hashes.packed(8, new byte[8 * 3]))));
        byte[] frame = FrameEncoder.toBytes(5, q);
        assertThat(malformed(new FrameDecoder(limits, Direction.TO_MANAGER).decode(ByteBuffer.wrap(frame))).code())
                .isEqualTo(ErrorCode.TOO_LARGE);
        assertThat(manager.decode(ByteBuffer.wrap(frame))).isInstanceOf(DecodeResult.Decoded.class);
    }

    @Test
    void aPublishReserveCarriesAnOptionalTenantLabelOfOneTo64Bytes() {
        List<Request.PublishPage> pages = List.of(new Request.PublishPage(0, KeyForm.BLOCK_HASH,
                Hashes.of(List.of(new byte[] {1, 2, 3})), 4096));
        byte[] plain = FrameEncoder.toBytes(9, new Request.PublishReserve(pages));
        byte[] labelled = FrameEncoder.toBytes(9, new Request.PublishReserve(pages, Optional.of("salt-a")));
        assertThat(labelled.length).as("a trailing str16").isEqualTo(plain.length + 2 + 6);
        assertThat(((DecodeResult.Decoded) manager.decode(ByteBuffer.wrap(plain))).frame())
                .isEqualTo(new Request.PublishReserve(pages, Optional.empty()));
        assertThat(((DecodeResult.Decoded) manager.decode(ByteBuffer.wrap(labelled))).frame())
                .isEqualTo(new Request.PublishReserve(pages, Optional.of("salt-a")));
        for (int n : new int[] {0, 65}) {
            // the same frame with a label of n bytes: empty and over-long are MALFORMED
            ByteBuffer b = ByteBuffer.allocate(plain.length + 2 + n).order(ByteOrder.LITTLE_ENDIAN);
            b.put(plain).putShort((short) n).put("x".repeat(n).getBytes(StandardCharsets.UTF_8));
            b.putInt(0, b.capacity());
            assertThat(malformed(manager.decode(ByteBuffer.wrap(b.array()))).code()).as("a label of %d bytes", n)
                    .isEqualTo(ErrorCode.MALFORMED);
        }
        assertThatThrownBy(() -> new Request.PublishReserve(pages, Optional.of("y".repeat(65))))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void lengthBelowTheHeaderClosesTheStream() {
        byte[] frame = poll();
        le(frame).putInt(0, 15);
        DecodeResult.Malformed m = malformed(manager.decode(ByteBuffer.wrap(frame)));
        assertThat(m.code()).isEqualTo(ErrorCode.MALFORMED);
        assertThat(m.skippable()).isFalse();
    }

    @Test
    void badVersionIsSkippableUnsupportedVersion() {
        byte[] frame = poll();
        le(frame).putShort(FrameLayout.VERSION_OFFSET, (short) 3);
        DecodeResult.Malformed m = malformed(manager.decode(ByteBuffer.wrap(frame)));
        assertThat(m.code()).isEqualTo(ErrorCode.UNSUPPORTED_VERSION);
        assertThat(m.skipBytes()).isEqualTo(frame.length);
        assertThat(m.requestId()).isEqualTo(7);
    }

    @Test
    void aVersionOneFrameIsRefusedAsUnsupportedVersion() {
        // version 1 named arenas by /proc path; a client that still speaks it must fail at once
        byte[] frame = poll();
        le(frame).putShort(FrameLayout.VERSION_OFFSET, (short) 1);
        DecodeResult.Malformed m = malformed(manager.decode(ByteBuffer.wrap(frame)));
        assertThat(m.code()).isEqualTo(ErrorCode.UNSUPPORTED_VERSION);
        assertThat(m.message()).contains("version 1 is not 2");
    }

    @Test
    void unknownTypeAndWrongDirectionAreUnknownOperation() {
        byte[] frame = poll();
        le(frame).putShort(FrameLayout.TYPE_OFFSET, (short) 0x0777);
        assertThat(malformed(manager.decode(ByteBuffer.wrap(frame))).code()).isEqualTo(ErrorCode.UNKNOWN_OPERATION);
        assertThat(malformed(client.decode(ByteBuffer.wrap(poll()))).code()).isEqualTo(ErrorCode.UNKNOWN_OPERATION);
        byte[] reply = FrameEncoder.toBytes(7, new Reply.RegionRegistered(4));
        assertThat(malformed(manager.decode(ByteBuffer.wrap(reply))).code()).isEqualTo(ErrorCode.UNKNOWN_OPERATION);
    }

    @Test
    void trailingBytesAreMalformed() {
        byte[] frame = java.util.Arrays.copyOf(poll(), poll().length + 3);
        le(frame).putInt(0, frame.length);
        DecodeResult.Malformed m = malformed(manager.decode(ByteBuffer.wrap(frame)));
        assertThat(m.code()).isEqualTo(ErrorCode.MALFORMED);
        assertThat(m.message()).contains("trailing");
        assertThat(m.skipBytes()).isEqualTo(frame.length);
    }

    @Test
    void requestIdZeroIsOnlyForCompletion() {
        byte[] frame = poll();
        le(frame).putLong(FrameLayout.REQUEST_ID_OFFSET, 0);
        assertThat(malformed(manager.decode(ByteBuffer.wrap(frame))).code()).isEqualTo(ErrorCode.MALFORMED);
        byte[] completion = FrameEncoder.toBytes(0, new Reply.Completion(1, 0, CompletionEvent.RESTORE_DONE, Reply.Settled.OK));
        le(completion).putLong(FrameLayout.REQUEST_ID_OFFSET, 3);
        assertThat(malformed(client.decode(ByteBuffer.wrap(completion))).code()).isEqualTo(ErrorCode.MALFORMED);
    }

    @Test
    void internallyInconsistentFramesAreMalformed() {
        // origin_tokens (offset 16 + 24) raised to the prompt size: the Query record refuses it.
        Request.Query q = new Request.Query(1, 0, CompletionTarget.ENGINE_RESTORE, 100, 0,
                List.of(new Request.QueryGroup(0, KeyForm.STATE_KEY, Hashes.packed(32, new byte[64]))));
        byte[] frame = FrameEncoder.toBytes(5, q);
        le(frame).putLong(FrameLayout.HEADER_BYTES + 24, 100);
        assertThat(malformed(manager.decode(ByteBuffer.wrap(frame))).message()).contains("origin_tokens");
        // A STATE_KEY group whose hashes are 16 bytes wide (hash_bytes at body offset 45).
        byte[] narrow = FrameEncoder.toBytes(5, q);
        le(narrow).put(FrameLayout.HEADER_BYTES + 45, (byte) 16);
        assertThat(malformed(manager.decode(ByteBuffer.wrap(narrow))).message()).contains("32 bytes");
        // A FINAL miss carrying a lease.
        Reply.QueryResult pending = new Reply.QueryResult(1, 0, QueryStatus.PENDING, false, 0, List.of(
                new Reply.GroupResult(0, List.of(new Reply.Span(0, List.of(new Reply.Resident(new Reply.Lease(0, 0, 4))))))));
        byte[] result = FrameEncoder.toBytes(5, pending);
        le(result).put(FrameLayout.HEADER_BYTES + 12, (byte) QueryStatus.FINAL.code());
        assertThat(malformed(client.decode(ByteBuffer.wrap(result))).message()).contains("FINAL miss");
    }

    @Test
    void queryPrefillRateAndPeerWaitAreU31s() {
        Request.Query q = new Request.Query(1, 0, CompletionTarget.HOST_READY, 100, 0, 1_500, 250,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.packed(8, new byte[8]))));
        byte[] frame = FrameEncoder.toBytes(5, q);
        assertThat(le(frame).getInt(FrameLayout.HEADER_BYTES + 32)).isEqualTo(1_500);
        assertThat(le(frame).getInt(FrameLayout.HEADER_BYTES + 36)).isEqualTo(250);
        assertThat(manager.decode(ByteBuffer.wrap(frame))).isEqualTo(new DecodeResult.Decoded(5, q, frame.length));
        byte[] huge = frame.clone();
        le(huge).putInt(FrameLayout.HEADER_BYTES + 32, 0x8000_0000);
        assertThat(malformed(manager.decode(ByteBuffer.wrap(huge))).message()).contains("prefill_tokens_per_second");
        byte[] hugeWait = frame.clone();
        le(hugeWait).putInt(FrameLayout.HEADER_BYTES + 36, 0x8000_0000);
        assertThat(malformed(manager.decode(ByteBuffer.wrap(hugeWait))).message()).contains("peer_wait_millis");
        byte[] noWait = frame.clone();
        le(noWait).putInt(FrameLayout.HEADER_BYTES + 36, 0);
        assertThat(manager.decode(ByteBuffer.wrap(noWait)))
                .isEqualTo(new DecodeResult.Decoded(5, q.withPeerWaitMillis(0), frame.length));
    }

    @Test
    void malformedNamespaceInRegisterIsMalformed() {
        Random r = new Random(1);
        Frame register = RandomFrames.of(FrameType.REGISTER, r);
        byte[] frame = FrameEncoder.toBytes(5, register);
        int instanceLength = Short.toUnsignedInt(le(frame).getShort(FrameLayout.HEADER_BYTES + 8));
        int namespaceAt = FrameLayout.HEADER_BYTES + 8 + 2 + instanceLength + 4;
        frame[namespaceAt] = 'X'; // magic "OKNS" broken
        DecodeResult.Malformed m = malformed(manager.decode(ByteBuffer.wrap(frame)));
        assertThat(m.code()).isEqualTo(ErrorCode.MALFORMED);
        assertThat(m.message()).contains("namespace").contains("magic");
    }

    @Test
    void decodeDoesNotMoveTheBufferAndReadsFromItsPosition() {
        byte[] one = poll();
        ByteBuffer buffer = ByteBuffer.allocate(one.length * 2 + 5);
        buffer.put(new byte[5]).put(one).put(one).flip().position(5);
        DecodeResult first = manager.decode(buffer);
        assertThat(buffer.position()).isEqualTo(5);
        assertThat(first).isEqualTo(new DecodeResult.Decoded(7, new Request.QueryPoll(3, 1), one.length));
        buffer.position(5 + one.length);
        assertThat(manager.decode(buffer)).isEqualTo(first);
    }

    @Test
    void encoderRefusesRequestIdsTheDecoderWouldRefuse() {
        org.assertj.core.api.Assertions.assertThatIllegalArgumentException()
                .isThrownBy(() -> FrameEncoder.toBytes(0, new Request.Stats()));
        org.assertj.core.api.Assertions.assertThatIllegalArgumentException()
                .isThrownBy(() -> FrameEncoder.toBytes(1, new Reply.Completion(1, 0, CompletionEvent.DRAINED, Reply.Settled.OK)));
        assertThat(FrameEncoder.toBytes(0, new Reply.Error(ErrorCode.MALFORMED, "bad header"))).hasSizeGreaterThan(16);
    }

    @Test
    void aSkippableRefusalLeavesTheNextFrameIntact() {
        byte[] bad = poll();
        le(bad).putShort(FrameLayout.TYPE_OFFSET, (short) 0x0777);
        byte[] good = FrameEncoder.toBytes(8, new Request.Cancel(3));
        ByteBuffer stream = ByteBuffer.allocate(bad.length + good.length).put(bad).put(good).flip();
        DecodeResult.Malformed m = malformed(manager.decode(stream));
        assertThat(m.requestId()).isEqualTo(7);
        stream.position(stream.position() + m.skipBytes());
        assertThat(manager.decode(stream)).isEqualTo(new DecodeResult.Decoded(8, new Request.Cancel(3), good.length));
    }

    @Test
    void limitsRefuseBudgetsThatCannotWork() {
        org.assertj.core.api.Assertions.assertThatIllegalArgumentException().isThrownBy(() ->
                new ProtocolLimits(15, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)).withMessageContaining("maxFrameBytes");
        org.assertj.core.api.Assertions.assertThatIllegalArgumentException().isThrownBy(() ->
                new ProtocolLimits(1 << 20, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1)).withMessageContaining(">= 1");
        org.assertj.core.api.Assertions.assertThatIllegalArgumentException().isThrownBy(() ->
                new ProtocolLimits(1 << 20, 1, 1, 1, 1, 1, 1, 1, 70_000, 1, 1, 1, 1)).withMessageContaining("u16");
        assertThat(ProtocolLimits.fromArray(ProtocolLimits.DEFAULTS.toArray())).isEqualTo(ProtocolLimits.DEFAULTS);
    }

    @Test
    void segmentsEncodeAndDecodeLikeBuffers() {
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment receive = arena.allocate(ProtocolLimits.DEFAULTS.maxFrameBytes() + 100L);
            Request.Cancel cancel = new Request.Cancel(11);
            int written = FrameEncoder.encode(4, cancel, receive, 0);
            assertThat(manager.decode(receive)).isEqualTo(new DecodeResult.Decoded(4, cancel, written));
            assertThat(manager.decode(receive.asSlice(0, written - 1))).isEqualTo(new DecodeResult.NeedBytes(1));
        }
    }

    @Test
    void hintRoundTripsAndRefusesADurationThatDoesNotFitItsKind() {
        Hashes names = Hashes.packed(32, new byte[64]);
        Request.Hint pin = new Request.Hint(HintKind.PIN, 1_000,
                List.of(new Request.QueryGroup(3, KeyForm.STATE_KEY, names)));
        byte[] frame = FrameEncoder.toBytes(4, pin);
        assertThat(manager.decode(ByteBuffer.wrap(frame))).isEqualTo(new DecodeResult.Decoded(4, pin, frame.length));
        int kind = FrameLayout.HEADER_BYTES;
        int duration = FrameLayout.HEADER_BYTES + 4;
        le(frame).putInt(duration, 0); // a PIN of no time
        DecodeResult.Malformed zero = malformed(manager.decode(ByteBuffer.wrap(frame)));
        assertThat(zero.code()).isEqualTo(ErrorCode.MALFORMED);
        assertThat(zero.skippable()).isTrue();
        frame[kind] = (byte) HintKind.DROP.code();
        assertThat(manager.decode(ByteBuffer.wrap(frame))).isInstanceOf(DecodeResult.Decoded.class);
        le(frame).putInt(duration, 5); // a DROP with a duration
        assertThat(malformed(manager.decode(ByteBuffer.wrap(frame))).code()).isEqualTo(ErrorCode.MALFORMED);
        le(frame).putInt(duration, 0);
        frame[kind] = 9; // no such kind
        assertThat(malformed(manager.decode(ByteBuffer.wrap(frame))).message()).contains("kind");
        Reply.Hinted hinted = new Reply.Hinted(HintKind.DEMOTE, 5, 6, 0);
        byte[] reply = FrameEncoder.toBytes(4, hinted);
        assertThat(client.decode(ByteBuffer.wrap(reply))).isEqualTo(new DecodeResult.Decoded(4, hinted, reply.length));
    }

    @Test
    void containsRoundTripsAndItsReplyRefusesAnUnknownLocationAndACountPastTheBudget() {
        Request.Contains contains = new Request.Contains(List.of(
                new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.packed(8, new byte[24])),
                new Request.QueryGroup(2, KeyForm.STATE_KEY, Hashes.packed(32, new byte[32]))));
        byte[] frame = FrameEncoder.toBytes(6, contains);
        assertThat(frame).hasSize(FrameLayout.HEADER_BYTES + 4 + 12 + 24 + 12 + 32);
        assertThat(manager.decode(ByteBuffer.wrap(frame))).isEqualTo(new DecodeResult.Decoded(6, contains, frame.length));
        le(frame).putShort(FrameLayout.HEADER_BYTES + 2, (short) 1); // the pad after group_count
        assertThat(malformed(manager.decode(ByteBuffer.wrap(frame))).code()).isEqualTo(ErrorCode.MALFORMED);

        Reply.Contained contained = new Reply.Contained(true,
                List.of(PageLocation.DRAM, PageLocation.ABSENT, PageLocation.SSD, PageLocation.DRAM));
        byte[] reply = FrameEncoder.toBytes(6, contained);
        assertThat(reply).hasSize(FrameLayout.HEADER_BYTES + 8 + 4);
        assertThat(client.decode(ByteBuffer.wrap(reply))).isEqualTo(new DecodeResult.Decoded(6, contained, reply.length));
        reply[FrameLayout.HEADER_BYTES + 8 + 2] = 7; // no such location
        assertThat(malformed(client.decode(ByteBuffer.wrap(reply))).message()).contains("location");
        reply[FrameLayout.HEADER_BYTES + 8 + 2] = (byte) PageLocation.SSD.code();
        le(reply).putInt(FrameLayout.HEADER_BYTES, ProtocolLimits.DEFAULTS.maxPagesPerQuery() + 1);
        assertThat(malformed(client.decode(ByteBuffer.wrap(reply))).code()).isEqualTo(ErrorCode.TOO_LARGE);
    }
}
