package io.orbitkv.core.cost;

import java.util.Map;

/**
 * Whether measured estimates may change which source serves a read. Immutable.
 *
 * <p>Rules: selection needs observations (the Manager's {@code costObservations} key, alias
 * {@code ORBITKV_COST_OBSERVATIONS=1}): without estimates there is nothing to select by, so
 * {@link #of} turns it off whatever the selection switch says. Cross-medium switching is a
 * further opt-in on top of selection; a config with cross-medium but not selection cannot be built.
 *
 * @param selectionEnabled   key {@code costSelection} (alias {@code ORBITKV_COST_SELECTION=1}): among
 *                           equal-coverage same-medium {@code HOST_READY} sources, the guarded rule may
 *                           pick another one
 * @param crossMediumEnabled key {@code costCrossMediumSelection} (alias {@code ORBITKV_CROSS_MEDIUM_SELECTION=1}):
 *                           the rule may also pick a source on another medium, when every candidate has
 *                           fresh evidence
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

    /** The three switches, each on only when the ones it needs are on too. */
    public static SelectionConfig of(boolean observations, boolean selection, boolean crossMedium) {
        boolean selecting = observations && selection;
        return new SelectionConfig(selecting, selecting && crossMedium);
    }

    /** Reads the three variables (each on only when exactly {@code 1}) from {@code env}. */
    public static SelectionConfig fromEnvironment(Map<String, String> env) {
        return of("1".equals(env.get(CostConfig.OBSERVATIONS_ENV)), "1".equals(env.get(SELECTION_ENV)),
                "1".equals(env.get(CROSS_MEDIUM_ENV)));
    }
}
