package io.orbitkv.bench.ttft;

/**
 * One way of serving a request in the TTFT benchmark.
 *
 * <p>Value type. {@link #PAIRED} are the arms every request of the workload runs, in an order
 * that rotates per request; {@link #DRAM_FULL} runs right after {@link #DRAM} on that arm's own
 * prompt cut to a page boundary (plus the engine's minimum prefill), so everything but the
 * minimum compute step is restored: the request the hit model describes.
 */
enum Arm {
    /** {@code KvPageStore.cold()}: never touches OrbitKV. */
    COLD("cold"),
    /** Connected to a warm Manager under a namespace nothing is published to: every QUERY misses. */
    MISS("miss path"),
    /** Connected to a Manager that stays up: hits are resident in its DRAM. */
    DRAM("DRAM hit"),
    /** Connected to a Manager restarted before every request: hits are staged from its SSD store. */
    SSD("SSD hit"),
    /** The DRAM arm's prompt cut to pages + the minimum prefill: a full-prefix DRAM hit. */
    DRAM_FULL("DRAM full-prefix hit"),
    /**
     * Lands on a host whose Manager never saw the prefix; the pages are on another host's Manager
     * (a cluster of two over a real etcd; see {@link CrossHostArm}).
     */
    CROSS("cross-host hit");

    static final java.util.List<Arm> PAIRED = java.util.List.of(COLD, MISS, DRAM, SSD, CROSS);

    final String label;

    /**
     * {@link #PAIRED} without the arms {@code skip} names ({@code ssd}, {@code cross}, comma-separated;
     * the others are needed by the report's targets): the two arms that start Manager processes per
     * request, the slowest part of a run on shared cores.
     */
    static java.util.List<Arm> paired(String skip) {
        java.util.Set<Arm> skipped = java.util.EnumSet.noneOf(Arm.class);
        for (String s : skip.split(",")) {
            switch (s.trim()) {
                case "" -> { }
                case "ssd" -> skipped.add(SSD);
                case "cross" -> skipped.add(CROSS);
                default -> throw new IllegalArgumentException("--skip takes ssd and cross, not " + s);
            }
        }
        return PAIRED.stream().filter(a -> !skipped.contains(a)).toList();
    }

    Arm(String label) {
        this.label = label;
    }
}
