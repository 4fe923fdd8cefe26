package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.cost.ByteCount;
import io.orbitkv.core.cost.CostKey;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.CostPath;
import io.orbitkv.core.cost.Observation;
import io.orbitkv.core.cost.RepresentationFamily;
import io.orbitkv.core.cost.ResourceId;
import io.orbitkv.core.cost.SampleKind;
import io.orbitkv.core.cost.Selection;
import io.orbitkv.core.cost.SourceMedium;
import io.orbitkv.core.cost.SourceOffer;
import io.orbitkv.core.cost.Shape;
import io.orbitkv.core.cost.Terminal;
import io.orbitkv.core.cost.Timeline;
import io.orbitkv.state.protocol.CompletionTarget;

import java.util.List;

/**
 * Turns one executed SSD read (either route) into a cost {@link Observation} and its shadow
 * comparison against the other route over the same extent. Owns nothing but the store's
 * resource identity.
 *
 * <p>Key: path = the executed route, resource = {@code ssd:<directory>} with the store's open
 * incarnation, representation RAW (extents hold raw pages), target HOST_READY (the payload is
 * in a host buffer), shape = the whole extent footprint (header + padded payload) in one
 * fragment. Logical bytes are the unpadded payload length from the extent header; I/O bytes
 * the footprint actually read. The queue stage is enqueue → worker (positional) or → slot
 * (io_uring); admission is zero for both today (no separate admission step).
 *
 * <p>Thread model: stateless after construction; called on SSD workers and the io_uring reaper.
 */
final class SsdReadObservations {

    private final CostObserver observer;
    private final ResourceId resource;
    private final boolean uringEligible;

    SsdReadObservations(CostObserver observer, ResourceId resource, boolean uringEligible) {
        this.observer = observer;
        this.resource = resource;
        this.uringEligible = uringEligible;
    }

    boolean enabled() {
        return observer.enabled();
    }

    CostObserver observer() {
        return observer;
    }

    ResourceId resource() {
        return resource;
    }

    /** Route key of a read of {@code e} by {@code route} ({@link ReadPath#POSITIONAL} or {@link ReadPath#URING}). */
    CostKey key(ReadPath route, Extent e) {
        return key(route, e.footprintBytes());
    }

    /** Route key of a read by {@code route} of an extent occupying {@code footprintBytes} on disk. */
    CostKey key(ReadPath route, long footprintBytes) {
        return new CostKey(path(route), SampleKind.ROUTE, resource, RepresentationFamily.RAW,
                CompletionTarget.HOST_READY, Shape.of(footprintBytes, 1));
    }

    /**
     * The route that serves a read of {@code e}: {@code defaultRoute} unless guarded selection
     * is on and the other route of this store is measured faster by the margin (same medium,
     * same extent, same coverage). Never blocks; one branch when selection is off.
     */
    ReadPath choose(ReadPath defaultRoute, Extent e) {
        if (!observer.selectionEnabled()) return defaultRoute;
        ReadPath other = switch (defaultRoute) {
            case POSITIONAL -> ReadPath.URING;
            case URING -> ReadPath.POSITIONAL;
            case AUTO -> throw new IllegalArgumentException("AUTO is a setting, not a route");
        };
        Selection s = observer.select(new SourceOffer(key(defaultRoute, e), SourceMedium.SSD, 1),
                List.of(new SourceOffer(key(other, e), SourceMedium.SSD, 1)));
        return switch (s) {
            case Selection.Switch sw -> other;
            case Selection.Keep k -> defaultRoute;
        };
    }

    /** Records one finished read and compares it with the other eligible route. */
    void executed(ReadPath route, Extent e, ReadResult result, boolean callerCancelled, long enqueuedNanos,
                  long submittedNanos, long completedNanos) {
        Terminal terminal = callerCancelled ? Terminal.CANCELLED : switch (result) {
            case ReadResult.Served s -> Terminal.SUCCEEDED;
            case ReadResult.Corrupt c -> Terminal.FAILED;
            case ReadResult.Failed f -> Terminal.FAILED;
            case ReadResult.Released r -> Terminal.CANCELLED;
            case ReadResult.Busy b -> Terminal.FAILED;
        };
        CostKey key = key(route, e);
        Observation o = new Observation(key, terminal,
                new Timeline(enqueuedNanos, submittedNanos, submittedNanos, completedNanos),
                ByteCount.known(e.payloadBytes), ByteCount.known(e.footprintBytes()));
        observer.recordAndShadow(o, alternatives(key));
    }

    private List<CostKey> alternatives(CostKey executed) {
        return switch (executed.path()) {
            case SSD_POSITIONAL -> uringEligible ? List.of(executed.withPath(CostPath.SSD_URING)) : List.of();
            case SSD_URING -> List.of(executed.withPath(CostPath.SSD_POSITIONAL));
            case DRAM_COPY, PEER_FETCH, RESTORE_COPY -> List.of();
        };
    }

    private static CostPath path(ReadPath route) {
        return switch (route) {
            case POSITIONAL -> CostPath.SSD_POSITIONAL;
            case URING -> CostPath.SSD_URING;
            case AUTO -> throw new IllegalArgumentException("AUTO is a setting, not an executed route");
        };
    }
}
