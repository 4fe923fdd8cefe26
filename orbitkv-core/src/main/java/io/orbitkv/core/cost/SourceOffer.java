package io.orbitkv.core.cost;

import java.util.Objects;

/**
 * A source offered to {@link CostObserver#select}: its route key, medium and coverage; the
 * observer adds the estimator's lookup to make a {@link SourceCandidate}.
 */
public record SourceOffer(CostKey key, SourceMedium medium, long coveragePages) {
    public SourceOffer {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(medium, "medium");
        if (coveragePages < 0) throw new IllegalArgumentException("coveragePages: " + coveragePages);
    }

    SourceCandidate with(Lookup lookup) {
        return new SourceCandidate(key, medium, coveragePages, lookup);
    }
}
