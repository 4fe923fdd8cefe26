package io.orbitkv.core.storage.publish;

import io.orbitkv.core.cost.ByteCount;
import io.orbitkv.core.cost.CostKey;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.CostPath;
import io.orbitkv.core.cost.Observation;
import io.orbitkv.core.cost.RepresentationFamily;
import io.orbitkv.core.cost.ResourceId;
import io.orbitkv.core.cost.SampleKind;
import io.orbitkv.core.cost.Shape;
import io.orbitkv.core.cost.Terminal;
import io.orbitkv.core.cost.Timeline;
import io.orbitkv.state.protocol.CompletionTarget;

import java.util.List;

/**
 * Turns one sealing copy (a published page source copied into its DRAM slot) into a
 * {@link CostPath#DRAM_COPY} observation. Owns only the DRAM arena's resource identity.
 *
 * <p>Key: resource {@code dram:<arena>} with the pipeline's incarnation, representation RAW,
 * target HOST_READY, shape = the copied bytes in one fragment. Stages: queue = publish →
 * sealing thread picks it up, admission = slot reservation, service = the copy. Logical and
 * I/O bytes are both the copied length (a CPU copy moves exactly the state bytes). The raw copy
 * has a single executor today ({@code MemorySegment.copy}), so the shadow comparison has no
 * eligible alternative and is not run; a second copy backend would be listed here.
 *
 * <p>Thread model: stateless after construction; called on the sealing thread.
 */
final class DramCopyObservations {

    private final CostObserver observer;
    private final ResourceId resource;

    DramCopyObservations(CostObserver observer, ResourceId resource) {
        this.observer = observer;
        this.resource = resource;
    }

    boolean enabled() {
        return observer.enabled();
    }

    void copied(int lengthBytes, long enqueuedNanos, long admittedNanos, long copyStartNanos, long copyEndNanos) {
        CostKey key = new CostKey(CostPath.DRAM_COPY, SampleKind.ROUTE, resource, RepresentationFamily.RAW,
                CompletionTarget.HOST_READY, Shape.of(lengthBytes, 1));
        observer.recordAndShadow(new Observation(key, Terminal.SUCCEEDED,
                new Timeline(enqueuedNanos, admittedNanos, copyStartNanos, copyEndNanos),
                ByteCount.known(lengthBytes), ByteCount.known(lengthBytes)), List.of());
    }
}
