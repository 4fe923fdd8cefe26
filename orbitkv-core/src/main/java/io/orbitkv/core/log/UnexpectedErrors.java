package io.orbitkv.core.log;

import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.LongAdder;

/**
 * The one error boundary of the data paths: where a layer turns an unexpected
 * {@code RuntimeException} (a bug, not an outcome) into a value its caller already handles (a
 * miss, a failed read, a refused request), it calls {@link #record} first, so that the bug is
 * counted ({@code orbitkv_unexpected_errors_total{layer}}) and logged, rate-limited, with the
 * site and the first stack frame, instead of showing only as a lower hit rate.
 *
 * <p>Expected outcomes (a dead peer, a closed channel, a checksum mismatch, a full budget) are
 * values and never come here; an {@code IOException} from a peer is an outcome too. Only what no
 * code path meant to throw is recorded.
 *
 * <p>Process-wide, like a logger: a bug counter belongs to the code, not to one Manager, so the
 * counters are static and every Manager of a process exports the same values (a test reads the
 * difference before and after). Thread-safe: {@link LongAdder}s and a synchronized
 * {@link RateLimitedLog}; the label set is the fixed {@link Layer} enum, so the series are bounded.
 */
public final class UnexpectedErrors {

    /** Where the boundary sits ({@code layer} label). */
    public enum Layer {
        /** The query layer: planning, staging, peer waits and restores of one QUERY. */
        QUERY,
        /** Core peer reads: {@code PeerPages}, {@code PeerReader}, source selection. */
        PEER,
        /** The peer data plane: the bulk server and pool, the gRPC data endpoints. */
        TRANSPORT,
        /** Membership, credentials and the catalog's control plane. */
        CLUSTER,
        /** The tiers' own workers: the sealer, SSD writes and reads. */
        STORAGE;

        /** The label value. */
        public String label() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    private static final Map<Layer, LongAdder> COUNTS = new EnumMap<>(Layer.class);
    private static final RateLimitedLog LOG = RateLimitedLog.tenSeconds("io.orbitkv.unexpected");

    static {
        for (Layer l : Layer.values()) COUNTS.put(l, new LongAdder());
    }

    private UnexpectedErrors() {
    }

    /**
     * Counts {@code error} under {@code layer} and logs it at ERROR (at most once per 10 s per
     * layer and site), saying what the caller answers instead. Rethrows a
     * {@link VirtualMachineError}, which no boundary may swallow.
     *
     * @param site  a fixed name of the catch site, e.g. {@code "PeerReader.read"}
     * @param answer what the caller answers instead, e.g. {@code "a miss"}
     */
    public static void record(Layer layer, String site, String answer, Throwable error) {
        Objects.requireNonNull(layer, "layer");
        COUNTS.get(layer).increment();
        StackTraceElement[] frames = error.getStackTrace();
        LOG.log(System.Logger.Level.ERROR, layer.label() + ':' + site,
                "unexpected failure at " + site + " (a bug, counted in orbitkv_unexpected_errors_total{layer=\""
                        + layer.label() + "\"}); answered as " + answer + ": " + error
                        + (frames.length > 0 ? " at " + frames[0] : ""));
        if (error instanceof VirtualMachineError vme) throw vme;
    }

    /** Unexpected failures recorded under {@code layer} since the process started. */
    public static long count(Layer layer) {
        return COUNTS.get(layer).sum();
    }
}
