package io.orbitkv.reliability.fuzz;

import java.util.List;

/**
 * One fuzz target of the campaign: a decoder fed arbitrary bytes. {@link #fuzzOne} returns
 * normally when the decoder behaved as documented (decoded, or refused with its documented
 * result or exception type; a decoded value re-encodes to what it was decoded from, or decodes
 * to itself again); anything it throws is a finding. Jazzer reaches it through {@link JazzerEntry}, and
 * {@link #seeds} builds valid inputs with the encoders, the start of its committed corpus.
 *
 * <p>Implementations are stateless and thread-safe.
 */
public interface FuzzTarget {

    /** Checks one input; throws (an {@link AssertionError} for a broken property) on a finding. */
    void fuzzOne(byte[] input);

    /** Valid inputs built with the encoders, and a few malformed ones, named for the corpus. */
    List<Seed> seeds();

    /** A corpus entry: a file name and its bytes. */
    record Seed(String name, byte[] bytes) {
        public Seed {
            bytes = bytes.clone();
        }

        @Override
        public byte[] bytes() {
            return bytes.clone();
        }
    }

    /**
     * Runs {@code target}'s seeds once, from Jazzer's {@code fuzzerInitialize}: the classes they
     * reach are loaded and instrumented before fuzzing starts, so the per-input timeout never
     * times class loading (the first JSON input took 14 s on two loaded cores).
     */
    static void warmUp(FuzzTarget target) {
        for (Seed s : target.seeds()) target.fuzzOne(s.bytes());
    }

    /** Throws an {@link AssertionError} with {@code what} unless {@code holds}. */
    static void check(boolean holds, String what) {
        if (!holds) throw new AssertionError(what);
    }

    /** The input after its first (selector) byte; call only with a non-empty input. */
    static byte[] body(byte[] input) {
        return java.util.Arrays.copyOfRange(input, 1, input.length);
    }

    /** {@code selector} followed by {@code body}: the input form of a target with several decoders. */
    static byte[] tagged(int selector, byte[] body) {
        byte[] out = new byte[body.length + 1];
        out[0] = (byte) selector;
        System.arraycopy(body, 0, out, 1, body.length);
        return out;
    }
}
