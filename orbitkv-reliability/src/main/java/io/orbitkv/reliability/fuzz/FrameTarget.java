package io.orbitkv.reliability.fuzz;

import io.orbitkv.reliability.manager.CampaignEngine;
import io.orbitkv.reliability.manager.DerivedPages;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.DecodeResult;
import io.orbitkv.state.protocol.Direction;
import io.orbitkv.state.protocol.FrameDecoder;
import io.orbitkv.state.protocol.FrameEncoder;
import io.orbitkv.state.protocol.FrameLayout;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Request;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;

/**
 * Target {@code frame}: the engine channel's {@link FrameDecoder} over a byte stream, in both
 * directions, with the default limits and with small ones (so short inputs reach the TOO_LARGE
 * paths), decoded the way a connection loop does: decode, advance or skip, until it needs bytes
 * or meets a refusal it cannot skip. The decoder documents no exception at all: its refusals are
 * {@link DecodeResult.Malformed} values. Properties: a decode never moves the buffer, a decoded
 * frame re-encodes to exactly its bytes (the encoding is canonical), a consume or skip stays
 * inside the input and covers at least a header.
 */
public final class FrameTarget implements FuzzTarget {

    /** Small budgets, so the fuzzer reaches every count limit with short inputs. */
    private static final ProtocolLimits SMALL = new ProtocolLimits(4096, 4, 64, 16, 16, 16, 4, 8, 128, 1, 1, 1, 1);
    private static final List<FrameDecoder> DECODERS = List.of(
            new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_MANAGER),
            new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_CLIENT),
            new FrameDecoder(SMALL, Direction.TO_MANAGER),
            new FrameDecoder(SMALL, Direction.TO_CLIENT));

    @Override
    public void fuzzOne(byte[] input) {
        for (FrameDecoder d : DECODERS) drain(d, input);
    }

    private static void drain(FrameDecoder decoder, byte[] input) {
        ByteBuffer buffer = ByteBuffer.wrap(input);
        while (buffer.hasRemaining()) {
            int at = buffer.position();
            DecodeResult result = decoder.decode(buffer);
            FuzzTarget.check(buffer.position() == at, "decode moved the buffer");
            switch (result) {
                case DecodeResult.Decoded d -> {
                    FuzzTarget.check(d.bytesConsumed() >= FrameLayout.HEADER_BYTES && d.bytesConsumed() <= buffer.remaining(),
                            "consumed " + d.bytesConsumed() + " of " + buffer.remaining());
                    byte[] consumed = Arrays.copyOfRange(input, at, at + d.bytesConsumed());
                    FuzzTarget.check(Arrays.equals(FrameEncoder.toBytes(d.requestId(), d.frame()), consumed),
                            d.frame().type() + " does not re-encode to its bytes");
                    buffer.position(at + d.bytesConsumed());
                }
                case DecodeResult.NeedBytes n -> {
                    FuzzTarget.check(n.bytes() > 0, "needs " + n.bytes() + " bytes");
                    return;
                }
                case DecodeResult.Malformed m -> {
                    if (m.skipBytes() == 0) return; // not skippable: the connection is closed
                    FuzzTarget.check(m.skipBytes() >= FrameLayout.HEADER_BYTES && m.skipBytes() <= buffer.remaining(),
                            "skips " + m.skipBytes() + " of " + buffer.remaining());
                    buffer.position(at + m.skipBytes());
                }
            }
        }
    }

    @Override
    public List<Seed> seeds() {
        List<byte[]> names = List.of(DerivedPages.name(1, 0), DerivedPages.name(1, 1));
        return List.of(
                new Seed("register", FrameEncoder.toBytes(1, new Request.Register("engine-a", 1, CampaignEngine.NAMESPACE,
                        CampaignEngine.CONTRACT))),
                new Seed("query", FrameEncoder.toBytes(2, CampaignEngine.query(7, 0, CompletionTarget.HOST_READY, names))),
                new Seed("stats-twice", concat(FrameEncoder.toBytes(3, new Request.Stats()), FrameEncoder.toBytes(4, new Request.Stats()))),
                new Seed("release", FrameEncoder.toBytes(5, new Request.Release(7))));
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
