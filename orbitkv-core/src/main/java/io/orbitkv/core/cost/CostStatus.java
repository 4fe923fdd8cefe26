package io.orbitkv.core.cost;

import java.util.Map;
import java.util.Objects;

/**
 * A snapshot of cost observation for {@code /status}.
 *
 * @param enabled          whether observations are on
 * @param entries          estimate entries held
 * @param warmEntries      of which warm now
 * @param maxEntries       the bound
 * @param trained          samples that trained an estimate (operation and route samples both count)
 * @param censored         operations that did not succeed, by terminal outcome; they trained nothing
 * @param droppedContended updates and lookups dropped because the estimator was busy
 * @param logicalUnknown   operations whose logical byte count was unknown
 * @param ioUnknown        operations whose physical byte count was unknown
 * @param shadow           shadow verdicts by outcome
 * @param selection        guarded selection switches and keeps
 * @param boundary         boundary choices by first-token estimate: shortened, or kept longest by reason
 */
public record CostStatus(boolean enabled, int entries, int warmEntries, int maxEntries, long trained,
                         Map<Terminal, Long> censored, long droppedContended, long logicalUnknown, long ioUnknown,
                         Map<ShadowOutcome, Long> shadow, SelectionStatus selection,
                         BoundaryStatus boundary) {
    public CostStatus {
        Objects.requireNonNull(selection, "selection");
        Objects.requireNonNull(boundary, "boundary");
        censored = Map.copyOf(Objects.requireNonNull(censored, "censored"));
        shadow = Map.copyOf(Objects.requireNonNull(shadow, "shadow"));
    }
}
