package io.orbitkv.state;

import java.util.List;

/**
 * What one group must read to recover at a boundary: page ranges (full, sliding window) or the
 * one checkpoint at the boundary (recurrent).
 *
 * <p>Values; immutable and thread-safe. Produced by {@link RecoveryContract#requiredRanges} and
 * carried in a {@link RecoveryDemand}; equality is exact (same ranges in the same order), which is
 * what demand validation compares.
 */
public sealed interface Requirement {

    /** The group this requirement belongs to. */
    int groupId();

    /**
     * Pages to read, as given (a {@link RecoveryContract} produces them in
     * {@link PageRange#normalize normal form}; a demand from the wire may not be).
     */
    record Pages(int groupId, List<PageRange> ranges) implements Requirement {
        public Pages {
            StateKeys.requireGroup(groupId);
            ranges = List.copyOf(ranges);
        }
    }

    /** The checkpoint taken at token {@code boundaryTokens}. */
    record Checkpoint(int groupId, long boundaryTokens) implements Requirement {
        public Checkpoint {
            StateKeys.requireGroup(groupId);
            if (boundaryTokens <= 0) {
                throw new IllegalArgumentException("checkpoint must be at a token > 0: " + boundaryTokens);
            }
        }
    }
}
