package io.orbitkv.core.cost;

import java.util.Map;
import java.util.Objects;

/**
 * Guarded selection counts for {@code /status} ({@code cost.selection}).
 *
 * @param enabled     {@code costSelection} (alias {@code ORBITKV_COST_SELECTION=1}) with observations on
 * @param crossMedium {@code costCrossMediumSelection} (alias {@code ORBITKV_CROSS_MEDIUM_SELECTION=1}) as well
 * @param switched    reads sent to another source than the default
 * @param kept        reads that kept the default, by reason
 */
public record SelectionStatus(boolean enabled, boolean crossMedium, long switched,
                              Map<Selection.KeepReason, Long> kept) {
    public SelectionStatus {
        kept = Map.copyOf(Objects.requireNonNull(kept, "kept"));
    }
}
