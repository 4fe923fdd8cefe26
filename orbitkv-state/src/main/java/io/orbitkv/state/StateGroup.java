package io.orbitkv.state;

/**
 * One component of a model's KV state with its own recovery rule. A hybrid model is a
 * {@link RecoveryContract} listing several groups of any kinds.
 *
 * <p>Values; immutable. Group ids are non-negative and are the {@code group id} hashed into
 * {@link StateKeys}.
 */
public sealed interface StateGroup {

    /** The group id, {@code >= 0}, unique within a contract. */
    int id();

    /** The kind as spelled in contract JSON: {@code full}, {@code sliding_window}, {@code recurrent}. */
    String kind();

    /** Full attention: every page from the origin to the boundary is needed. */
    record Full(int id) implements StateGroup {
        public Full {
            StateKeys.requireGroup(id);
        }

        @Override
        public String kind() {
            return "full";
        }
    }

    /**
     * Sliding-window attention over the last {@code windowTokens} tokens, plus attention sinks:
     * the first {@code sinkTokens} tokens of the sequence.
     */
    record SlidingWindow(int id, int windowTokens, int sinkTokens) implements StateGroup {
        public SlidingWindow {
            StateKeys.requireGroup(id);
            if (windowTokens <= 0) throw new IllegalArgumentException("window must be > 0: " + windowTokens);
            if (sinkTokens < 0) throw new IllegalArgumentException("sink must be >= 0: " + sinkTokens);
        }

        @Override
        public String kind() {
            return "sliding_window";
        }
    }

    /** Recurrent or convolution state: only a checkpoint taken exactly at the boundary will do. */
    record Recurrent(int id) implements StateGroup {
        public Recurrent {
            StateKeys.requireGroup(id);
        }

        @Override
        public String kind() {
            return "recurrent";
        }
    }
}
