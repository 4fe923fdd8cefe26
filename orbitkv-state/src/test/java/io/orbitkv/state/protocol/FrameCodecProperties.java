package io.orbitkv.state.protocol;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/**
 * Codec properties over random valid frames of every type: exact round trip, incremental decoding
 * in arbitrary chunks, truncation, and random corruption.
 */
class FrameCodecProperties {

    private static final FrameDecoder TO_MANAGER = new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_MANAGER);
    private static final FrameDecoder TO_CLIENT = new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_CLIENT);

    /** A frame with its request id. */
    record Sent(long requestId, Frame frame) {
        byte[] bytes() {
            return FrameEncoder.toBytes(requestId, frame);
        }

        FrameDecoder decoder() {
            return decoderFor(frame.type());
        }
    }

    static FrameDecoder decoderFor(FrameType type) {
        return type.direction() == Direction.TO_MANAGER ? TO_MANAGER : TO_CLIENT;
    }

    @Provide
    Arbitrary<Sent> frames() {
        return Combinators.combine(Arbitraries.of(FrameType.class), Arbitraries.longs())
                .as((type, seed) -> {
                    Random r = new Random(seed);
                    return new Sent(RandomFrames.requestId(type, r), RandomFrames.of(type, r));
                });
    }

    @Property(tries = 400)
    void everyTypeRoundTrips(@ForAll("frames") Sent sent) {
        byte[] bytes = sent.bytes();
        DecodeResult result = sent.decoder().decode(ByteBuffer.wrap(bytes));
        assertThat(result).isEqualTo(new DecodeResult.Decoded(sent.requestId(), sent.frame(), bytes.length));
        assertThat(FrameEncoder.toBytes(sent.requestId(), sent.frame())).isEqualTo(bytes);
    }

    @Property(tries = 100)
    void everyFrameTypeIsGenerated(@ForAll long seed) {
        // Guards the generator: a type it cannot build would silently drop out of the round trip.
        for (FrameType type : FrameType.values()) {
            Random r = new Random(seed);
            Frame frame = RandomFrames.of(type, r);
            assertThat(frame.type()).isEqualTo(type);
            byte[] bytes = FrameEncoder.toBytes(RandomFrames.requestId(type, r), frame);
            assertThat(decoderFor(type).decode(ByteBuffer.wrap(bytes)))
                    .isInstanceOfSatisfying(DecodeResult.Decoded.class, d -> assertThat(d.frame()).isEqualTo(frame));
        }
    }

    @Property(tries = 150)
    void chunkedStreamDecodesTheSameFrames(@ForAll("streams") List<Sent> stream, @ForAll long chunkSeed) {
        ByteArrayOutputStream wire = new ByteArrayOutputStream();
        for (Sent s : stream) wire.writeBytes(s.bytes());
        byte[] all = wire.toByteArray();
        Random chunks = new Random(chunkSeed);
        ByteBuffer receive = ByteBuffer.allocate(all.length);
        receive.flip();
        List<Sent> decoded = new ArrayList<>();
        int sent = 0;
        while (sent < all.length || receive.hasRemaining()) {
            DecodeResult result = decoderFor(stream.get(Math.min(decoded.size(), stream.size() - 1)).frame().type())
                    .decode(receive);
            switch (result) {
                case DecodeResult.Decoded d -> {
                    decoded.add(new Sent(d.requestId(), d.frame()));
                    receive.position(receive.position() + d.bytesConsumed());
                }
                case DecodeResult.NeedBytes n -> {
                    assertThat(sent).as("NeedBytes only while bytes are still to come").isLessThan(all.length);
                    int chunk = Math.min(all.length - sent, 1 + chunks.nextInt(64));
                    int limit = receive.limit();
                    receive.limit(limit + chunk);
                    receive.put(limit, all, sent, chunk);
                    sent += chunk;
                }
                case DecodeResult.Malformed m -> throw new AssertionError("valid stream refused: " + m);
            }
        }
        assertThat(decoded).isEqualTo(stream);
    }

    @Provide
    Arbitrary<List<Sent>> streams() {
        // One direction per stream, as on a real connection.
        return Arbitraries.of(Direction.class).flatMap(direction -> frames()
                .filter(s -> s.frame().type().direction() == direction).list().ofMinSize(1).ofMaxSize(6));
    }

    @Property(tries = 150)
    void everyTruncationNeedsBytes(@ForAll("frames") Sent sent) {
        byte[] bytes = sent.bytes();
        for (int n = 0; n < bytes.length; n++) {
            DecodeResult result = sent.decoder().decode(ByteBuffer.wrap(bytes, 0, n));
            int cut = n;
            assertThat(result).as("prefix of %d of %d bytes", cut, bytes.length)
                    .isInstanceOfSatisfying(DecodeResult.NeedBytes.class,
                            need -> assertThat(need.bytes()).isEqualTo(cut < 4 ? 4 - cut : bytes.length - cut));
        }
    }

    @Property(tries = 1000)
    void randomCorruptionNeverThrows(@ForAll("frames") Sent sent, @ForAll long seed,
                                     @ForAll @IntRange(min = 1, max = 8) int flips) {
        byte[] bytes = sent.bytes();
        Random r = new Random(seed);
        for (int i = 0; i < flips; i++) bytes[r.nextInt(bytes.length)] ^= (byte) (1 + r.nextInt(255));
        ByteBuffer buffer = ByteBuffer.wrap(bytes);
        DecodeResult result = sent.decoder().decode(buffer);
        assertThat(buffer.position()).isZero();
        switch (result) {
            case DecodeResult.Decoded d -> {
                assertThat(d.bytesConsumed()).isLessThanOrEqualTo(bytes.length);
                // Whatever decodes must re-encode to the same bytes: the encoding is canonical.
                assertThat(FrameEncoder.toBytes(d.requestId(), d.frame()))
                        .isEqualTo(Arrays.copyOf(bytes, d.bytesConsumed()));
            }
            case DecodeResult.NeedBytes n -> assertThat(n.bytes()).isPositive();
            case DecodeResult.Malformed m -> {
                assertThat(m.message()).isNotBlank();
                if (m.skippable()) assertThat(m.skipBytes()).isLessThanOrEqualTo(bytes.length);
            }
        }
    }
}
