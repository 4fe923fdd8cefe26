package io.orbitkv.core.cost;

import java.util.Map;
import java.util.Objects;

/**
 * Boundary choice counts for {@code /status} ({@code cost.boundary}): queries whose longest legal
 * boundary needed SSD staging or a peer fetch and that therefore had a choice to make.
 *
 * @param shortened   queries answered with a shorter DRAM-only boundary because its first-token
 *                    estimate beat the longest one's by more than the margin
 * @param keptLongest queries that kept the longest legal boundary, by {@link BoundaryChoice.Basis}
 *                    ({@code ONLY_CANDIDATE}, {@code NO_PREFILL_RATE}, {@code NO_ESTIMATE},
 *                    {@code LONGEST_BY_ESTIMATE}); empty when observations are off
 */
public record BoundaryStatus(long shortened, Map<BoundaryChoice.Basis, Long> keptLongest) {
    public BoundaryStatus {
        keptLongest = Map.copyOf(Objects.requireNonNull(keptLongest, "keptLongest"));
        if (keptLongest.containsKey(BoundaryChoice.Basis.SHORTENED_BY_ESTIMATE)) {
            throw new IllegalArgumentException("a shortened boundary is not a kept one");
        }
    }
}
