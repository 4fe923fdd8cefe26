package io.orbitkv.core.cost;

import java.util.Map;

/**
 * Whether measured estimates may change which source serves a read. Immutable.
 *
 * <p>Rules: selection needs observations ({@code ORBITKV_COST_OBSERVATIONS=1}): without
 * estimates there is nothing to select by, so {@link #fromEnvironment} turns it off whatever
 * {@value #SELECTION_ENV} says. Cross-medium switching is a further opt-in on top of selection
 * ({@value #CROSS_MEDIUM_ENV}); a config with cross-medium but not selection cannot be built.
 *
 * @param selectionEnabled   {@code ORBITKV_COST_SELECTION=1}: among equal-coverage same-medium
 *                           {@code HOST_READY} sources, the guarded rule may pick another one
 * @param crossMediumEnabled {@code ORBITKV_CROSS_MEDIUM_SELECTION=1}: the rule may also pick a
 *                           source on another medium, when every candidate has fresh evidence
 */
public record SelectionConfig(boolean selectionEnabled, boolean crossMediumEnabled) {

    public static final String SELECTION_ENV = "ORBITKV_COST_SELECTION";
    public static final String CROSS_MEDIUM_ENV = "ORBITKV_CROSS_MEDIUM_SELECTION";

    public SelectionConfig {
        if (crossMediumEnabled && !selectionEnabled) {
            throw new IllegalArgumentException("cross-medium selection needs selection enabled");
        }
    }

    /** Selection off: the default route always serves. */
    public static SelectionConfig off() {
        return new SelectionConfig(false, false);
    }

    /** Same-medium selection only. */
    public static SelectionConfig sameMedium() {
        return new SelectionConfig(true, false);
    }

    /** Same- and cross-medium selection. */
    public static SelectionConfig crossMedium() {
        return new SelectionConfig(true, true);
    }

    /** Reads the three variables (each on only when exactly {@code 1}) from {@code env}. */
    public static SelectionConfig fromEnvironment(Map<String, String> env) {
        boolean observations = "1".equals(env.get(CostConfig.OBSERVATIONS_ENV));
        boolean selection = observations && "1".equals(env.get(SELECTION_ENV));
        return new SelectionConfig(selection, selection && "1".equals(env.get(CROSS_MEDIUM_ENV)));
    }
}
