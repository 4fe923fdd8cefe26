package io.orbitkv.server.channel;

import io.orbitkv.state.protocol.ProtocolLimits;
import java.io.IOException;
import java.time.Duration;

/**
 * A client arriving during a flood: it tries, and on failure tries again 0.5 s later (the
 * cadence of the clients that found the floods), until it succeeds or a bound passes.
 */
final class Newcomer {

    private static final long RETRY_NANOS = 500_000_000L;

    /** One attempt: true on success. */
    interface Attempt {
        boolean tryOnce() throws IOException;
    }

    private Newcomer() {
    }

    /** Nanoseconds from the first attempt to the first success, or {@link Long#MAX_VALUE} past {@code bound}. */
    static long nanosToSuccess(Attempt attempt, Duration bound) throws IOException {
        long start = System.nanoTime();
        while (System.nanoTime() - start < bound.toNanos()) {
            if (attempt.tryOnce()) return System.nanoTime() - start;
            long next = System.nanoTime() + RETRY_NANOS;
            while (System.nanoTime() < next) Thread.onSpinWait();
        }
        return Long.MAX_VALUE;
    }

    /** The default protocol limits with {@code maxConnections} instead of 256. */
    static ProtocolLimits limitsWithMaxConnections(int maxConnections) {
        ProtocolLimits d = ProtocolLimits.DEFAULTS;
        return new ProtocolLimits(d.maxFrameBytes(), d.maxGroupsPerQuery(), d.maxPagesPerQuery(),
                d.maxPagesPerPublish(), d.maxIdsPerSettle(), d.maxPagesPerRestore(), d.maxArenaFiles(),
                d.maxStatsCounters(), d.maxStringBytes(), maxConnections, d.maxOperationsPerConnection(),
                d.maxReservationsPerConnection(), d.maxRegionsPerConnection());
    }
}
