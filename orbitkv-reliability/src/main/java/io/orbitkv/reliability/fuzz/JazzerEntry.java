package io.orbitkv.reliability.fuzz;

/**
 * The class Jazzer's standalone driver runs ({@code --target_class}): it finds the
 * {@link FuzzTarget} named by the system property {@value #PROPERTY} (set by {@link FuzzCampaign}
 * on the child JVM) in {@code fuzzerInitialize} and hands it every input. One entry for all targets,
 * so a target is a plain {@link FuzzTarget} and adding one touches only {@link FuzzCampaign#TARGETS}.
 *
 * <p>Thread model: Jazzer calls both methods from its one fuzzing thread; the target is set once
 * before the first input.
 */
public final class JazzerEntry {

    /** System property naming the target. */
    public static final String PROPERTY = "orbitkv.fuzz.target";

    private static FuzzTarget target;

    private JazzerEntry() {}

    /** Jazzer calls this once before fuzzing. */
    public static void fuzzerInitialize() {
        String name = System.getProperty(PROPERTY, "");
        FuzzTarget t = FuzzCampaign.TARGETS.get(name);
        if (t == null) throw new IllegalArgumentException("-D" + PROPERTY + " names no target: '" + name + "'; targets: " + FuzzCampaign.TARGETS.keySet());
        FuzzTarget.warmUp(t);
        target = t;
    }

    /** Jazzer calls this with every input. */
    public static void fuzzerTestOneInput(byte[] input) {
        target.fuzzOne(input);
    }
}
