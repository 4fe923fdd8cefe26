package io.orbitkv.core.cost;

import java.util.Objects;

/**
 * One source able to serve a read, with what the estimator knows about its complete route.
 *
 * @param key           the route key its reads are recorded under
 * @param medium        where its bytes live
 * @param coveragePages how many pages of the request it covers (only equal coverage competes)
 * @param lookup        the estimator's view of {@code key} now
 */
public record SourceCandidate(CostKey key, SourceMedium medium, long coveragePages, Lookup lookup) {
    public SourceCandidate {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(medium, "medium");
        Objects.requireNonNull(lookup, "lookup");
        if (coveragePages < 0) throw new IllegalArgumentException("coveragePages: " + coveragePages);
    }
}
