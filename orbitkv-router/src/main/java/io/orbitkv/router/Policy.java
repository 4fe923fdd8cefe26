package io.orbitkv.router;

import java.util.List;

/**
 * Chooses a worker among the {@link Candidate}s of one request. Implementations are pure
 * functions of the candidates and the {@link Outlook} (no state, no I/O), so they can be compared on identical input.
 */
public sealed interface Policy permits JointPolicy, LoadOnlyPolicy, OverlapOnlyPolicy {

    /** The policy's name in tables, JSON and metrics. */
    String name();

    /** The chosen candidate's index in {@code candidates} (non-empty). */
    int choose(List<Candidate> candidates);

    /**
     * The chosen candidate's index given what the router measured of the arrivals; only a policy
     * that prices the work a choice imposes on later requests ({@link JointPolicy}) reads it.
     */
    default int choose(List<Candidate> candidates, Outlook outlook) {
        return choose(candidates);
    }

    /** The policy named {@code name} ({@code joint}, {@code load}, {@code overlap}). */
    static Policy named(String name) {
        return switch (name) {
            case "joint" -> new JointPolicy();
            case "load", "load-only" -> new LoadOnlyPolicy();
            case "overlap", "overlap-only" -> new OverlapOnlyPolicy();
            default -> throw new IllegalArgumentException("unknown policy '" + name + "' (joint, load, overlap)");
        };
    }

    /** Ties go to the less loaded worker, then to the lower index, so choices are deterministic. */
    static boolean lessLoaded(Candidate a, Candidate b) {
        if (a.queueSeconds() != b.queueSeconds()) return a.queueSeconds() < b.queueSeconds();
        return a.worker() < b.worker();
    }
}
