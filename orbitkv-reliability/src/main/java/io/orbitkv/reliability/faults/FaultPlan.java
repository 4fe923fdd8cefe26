package io.orbitkv.reliability.faults;

import java.util.EnumMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One schedule's fault decisions and counts. Device calls draw from {@link #nextCall}: the n-th
 * call faults with probability {@code deviceFaultRate}, decided by a generator seeded from
 * (seed, n) alone. Thread-safe (device calls come from the store's worker, counts from the driver).
 */
final class FaultPlan {

    private final long seed;
    private final double deviceFaultRate;
    private final double peerFaultRate;
    private final AtomicLong calls = new AtomicLong();
    private final Map<FaultKind, AtomicLong> counts = new EnumMap<>(FaultKind.class);

    FaultPlan(long seed, double deviceFaultRate) {
        this(seed, deviceFaultRate, 0);
    }

    FaultPlan(long seed, double deviceFaultRate, double peerFaultRate) {
        this.seed = seed;
        this.deviceFaultRate = deviceFaultRate;
        this.peerFaultRate = peerFaultRate;
        for (FaultKind k : FaultKind.values()) counts.put(k, new AtomicLong());
    }

    /**
     * The generator of the next device call's fault, or null when this call runs clean. Reads
     * fault at three times the rate: a schedule makes about one SSD read per four writes (most
     * queries hit DRAM), and the read path is where a lie would be served.
     */
    SplittableRandom nextCall(boolean read) {
        long n = calls.getAndIncrement();
        if (deviceFaultRate <= 0) return null;
        SplittableRandom r = new SplittableRandom(mix(seed ^ mix(n + 0x632BE59BD9B4E019L)));
        return r.nextDouble() < (read ? Math.min(1, 3 * deviceFaultRate) : deviceFaultRate) ? r : null;
    }

    /**
     * The generator of a peer call's fault, or null when it runs clean. {@code identity} names the
     * call by what it is about, not by when it came (the key and how many times it was asked for,
     * or the ticket): the transport's threads may reorder calls within a step, which then changes
     * no decision.
     */
    SplittableRandom peerCall(long identity) {
        if (peerFaultRate <= 0) return null;
        SplittableRandom r = new SplittableRandom(mix(seed ^ mix(identity ^ 0x3C6EF372FE94F82BL)));
        return r.nextDouble() < peerFaultRate ? r : null;
    }

    double peerFaultRate() {
        return peerFaultRate;
    }

    void count(FaultKind kind) {
        counts.get(kind).incrementAndGet();
    }

    Map<FaultKind, Long> counts() {
        Map<FaultKind, Long> copy = new EnumMap<>(FaultKind.class);
        counts.forEach((k, v) -> copy.put(k, v.get()));
        return copy;
    }

    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
