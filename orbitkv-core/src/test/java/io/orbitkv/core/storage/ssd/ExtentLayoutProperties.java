package io.orbitkv.core.storage.ssd;

import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.assertj.core.api.Assertions.assertThat;

/** Header codec: round trip, and every single-bit flip of a covered byte is detected. */
class ExtentLayoutProperties {

    @Property(tries = 200)
    void encodeThenDecodeIsIdentity(@ForAll("headers") ExtentHeader header) {
        MemorySegment block = MemorySegment.ofArray(new byte[ExtentLayout.HEADER_BYTES]);
        ExtentLayout.encodeHeader(block, header);
        assertThat(ExtentLayout.decodeHeader(block, Integer.MAX_VALUE))
                .isEqualTo(new ExtentLayout.HeaderDecode.Valid(header));
    }

    @Property(tries = 300)
    void anySingleBitFlipInTheHeaderFieldsIsNeverValid(@ForAll("headers") ExtentHeader header,
                                                       @ForAll @IntRange(min = 0, max = 99) int byteIndex,
                                                       @ForAll @IntRange(min = 0, max = 7) int bit) {
        MemorySegment block = MemorySegment.ofArray(new byte[ExtentLayout.HEADER_BYTES]);
        ExtentLayout.encodeHeader(block, header);
        byte b = block.get(ValueLayout.JAVA_BYTE, byteIndex);
        block.set(ValueLayout.JAVA_BYTE, byteIndex, (byte) (b ^ (1 << bit)));
        assertThat(ExtentLayout.decodeHeader(block, Integer.MAX_VALUE))
                .isNotInstanceOf(ExtentLayout.HeaderDecode.Valid.class);
    }

    @Property(tries = 100)
    void footprintIsAlignedAndCoversHeaderAndPayload(@ForAll @IntRange(min = 1, max = 64 << 20) int payloadBytes) {
        long footprint = ExtentLayout.footprintBytes(payloadBytes);
        assertThat(footprint % ExtentLayout.BLOCK_BYTES).isZero();
        assertThat(footprint).isBetween(ExtentLayout.HEADER_BYTES + (long) payloadBytes,
                ExtentLayout.HEADER_BYTES + (long) payloadBytes + ExtentLayout.BLOCK_BYTES - 1);
    }

    @Provide
    Arbitrary<ExtentHeader> headers() {
        Arbitrary<Long> word = Arbitraries.longs();
        Arbitrary<NamespaceDigest> ns = Combinators.combine(word, word, word, word).as(NamespaceDigest::new);
        Arbitrary<StateKey> key = Arbitraries.bytes().array(byte[].class).ofSize(StateKey.BYTES).map(StateKey::ofBytes);
        return Combinators.combine(ns, key, Arbitraries.longs().between(1, Long.MAX_VALUE),
                        Arbitraries.integers().between(1, Integer.MAX_VALUE), Arbitraries.integers())
                .as(ExtentHeader::new);
    }
}
