package io.orbitkv.core.storage.publish;

/**
 * When a sealed block resident in DRAM is written to SSD.
 *
 * <p>A sealed hierarchy so every decision site switches exhaustively over the policies.
 */
public sealed interface SsdAdmissionPolicy {

    /** Every sealed block is queued for SSD as soon as it is in DRAM. */
    record WriteThrough() implements SsdAdmissionPolicy {}

    /** A block is written when DRAM evicts it (and its bytes are still leased by the writer). */
    record OnEvict() implements SsdAdmissionPolicy {}

    /**
     * A block is written once it has been hit {@code hits} times: one-off prefills never reach
     * the SSD write queue (the seed: "large one-off prefills should not automatically monopolize
     * the SSD write queue").
     */
    record ReuseAware(int hits) implements SsdAdmissionPolicy {
        public ReuseAware {
            if (hits < 1) throw new IllegalArgumentException("reuse-aware needs hits >= 1, got " + hits);
        }
    }

    /** Parses {@code write-through}, {@code on-evict}, {@code reuse-aware} or {@code reuse-aware:N}. */
    static SsdAdmissionPolicy parse(String text) {
        String t = text.trim().toLowerCase(java.util.Locale.ROOT);
        if (t.equals("write-through")) return new WriteThrough();
        if (t.equals("on-evict")) return new OnEvict();
        if (t.equals("reuse-aware")) return new ReuseAware(2);
        if (t.startsWith("reuse-aware:")) {
            try {
                return new ReuseAware(Integer.parseInt(t.substring("reuse-aware:".length())));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("bad hit count in SSD policy '" + text + "'");
            }
        }
        throw new IllegalArgumentException(
                "unknown SSD admission policy '" + text + "' (write-through, on-evict, reuse-aware[:N])");
    }
}
