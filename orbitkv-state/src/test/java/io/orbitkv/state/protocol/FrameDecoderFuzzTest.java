package io.orbitkv.state.protocol;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.junit.FuzzTest;
import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * Jazzer fuzz test of {@link FrameDecoder}: the input is what a peer wrote on the socket, decoded
 * the way a connection loop does (decode, advance or skip, until NeedBytes or a fatal refusal),
 * in both directions.
 *
 * <p>In {@code mvn verify} this runs in regression mode: it replays the committed corpus in
 * {@code src/test/resources/io/orbitkv/state/protocol/FrameDecoderFuzzTestInputs/decodeStream/}
 * (a valid frame of every type and a few malformed ones) plus Jazzer's own findings directory.
 * {@code JAZZER_FUZZ=1 ./mvnw -pl orbitkv-state test -Dtest=FrameDecoderFuzzTest} fuzzes for
 * {@code maxDuration}; a crash it finds is written next to the corpus as a new regression input.
 *
 * <p>What counts as a bug: any exception, a result that does not advance, a decoded frame that
 * does not re-encode to exactly the bytes it was decoded from (the encoding is canonical), and a
 * skip or consume past the end of the input.
 */
class FrameDecoderFuzzTest {

    /** Small budgets, so the fuzzer reaches the TOO_LARGE paths with short inputs. */
    private static final ProtocolLimits SMALL = new ProtocolLimits(
            4096, 4, 64, 16, 16, 16, 4, 8, 128, 1, 1, 1, 1);

    private static final FrameDecoder[] DECODERS = {
        new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_MANAGER),
        new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_CLIENT),
        new FrameDecoder(SMALL, Direction.TO_MANAGER),
        new FrameDecoder(SMALL, Direction.TO_CLIENT),
    };

    @FuzzTest(maxDuration = "60s")
    void decodeStream(byte[] input) {
        for (FrameDecoder decoder : DECODERS) drain(decoder, input);
    }

    private static void drain(FrameDecoder decoder, byte[] input) {
        ByteBuffer buffer = ByteBuffer.wrap(input);
        while (buffer.hasRemaining()) {
            int at = buffer.position();
            DecodeResult result = decoder.decode(buffer);
            assertThat(buffer.position()).isEqualTo(at);
            switch (result) {
                case DecodeResult.Decoded d -> {
                    assertThat(d.bytesConsumed()).isBetween(FrameLayout.HEADER_BYTES, buffer.remaining());
                    byte[] consumed = Arrays.copyOfRange(input, at, at + d.bytesConsumed());
                    assertThat(FrameEncoder.toBytes(d.requestId(), d.frame())).isEqualTo(consumed);
                    buffer.position(at + d.bytesConsumed());
                }
                case DecodeResult.NeedBytes n -> {
                    assertThat(n.bytes()).isPositive();
                    return;
                }
                case DecodeResult.Malformed m -> {
                    if (!m.skippable()) return;
                    assertThat(m.skipBytes()).isBetween(FrameLayout.HEADER_BYTES, buffer.remaining());
                    buffer.position(at + m.skipBytes());
                }
            }
        }
    }
}
