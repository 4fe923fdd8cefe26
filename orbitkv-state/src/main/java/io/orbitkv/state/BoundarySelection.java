package io.orbitkv.state;

import java.util.List;

/**
 * The outcome of {@link RecoveryContract#select}: the longest legal boundary with what to read
 * for it, or no hit; either way, why each longer candidate was refused.
 *
 * <p>Values; immutable. {@code rejected} lists candidates in descending token order, one per
 * page-aligned candidate above the selected boundary up to the cap, truncated to the caller's
 * budget; {@code rejectedCount} always counts them all.
 */
public sealed interface BoundarySelection {

    /** The selected boundary in tokens; for {@link NoHit}, the origin (nothing is restored). */
    long boundaryTokens();

    /** True for {@link Hit}. */
    boolean hit();

    /** Why longer candidates are not legal, highest first (possibly truncated). */
    List<Rejection> rejected();

    /** Number of refused candidates, including those left out of {@link #rejected()}. */
    long rejectedCount();

    /** What each group must read; empty for {@link NoHit}. */
    List<Requirement> required();

    /** State can be restored up to {@code boundaryTokens} by reading exactly {@code required}. */
    record Hit(long boundaryTokens, List<Requirement> required, List<Rejection> rejected, long rejectedCount)
            implements BoundarySelection {
        public Hit {
            required = List.copyOf(required);
            rejected = List.copyOf(rejected);
            if (rejectedCount < rejected.size()) throw new IllegalArgumentException("rejectedCount < rejected.size()");
        }

        @Override
        public boolean hit() {
            return true;
        }
    }

    /** No candidate is legal: the engine computes from {@code originTokens}. */
    record NoHit(long originTokens, List<Rejection> rejected, long rejectedCount) implements BoundarySelection {
        public NoHit {
            rejected = List.copyOf(rejected);
            if (rejectedCount < rejected.size()) throw new IllegalArgumentException("rejectedCount < rejected.size()");
        }

        @Override
        public long boundaryTokens() {
            return originTokens;
        }

        @Override
        public boolean hit() {
            return false;
        }

        @Override
        public List<Requirement> required() {
            return List.of();
        }
    }
}
