package io.orbitkv.core.transfer;

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

import java.util.Objects;

/**
 * Turns one finished RESTORE (all its copy tasks) into a complete-route cost
 * {@link Observation}: path {@link CostPath#RESTORE_COPY}, target
 * {@link CompletionTarget#ENGINE_RESTORE}, resource = the Manager's restore copier with its
 * incarnation, representation RAW, shape = the restore's bytes and pages. The timeline runs
 * from RESTORE accepted to the last copy's completion seen by the session (enqueue → terminal);
 * the copier has no separate admission, so queue and admission are zero and service = total.
 *
 * <p>Thread model: immutable; {@link #restored} is called with the session lock held.
 *
 * <p>Design note: one sample per RESTORE, not per task, because the engine waits for the whole
 * batch (RESTORE_DONE); per-task times would describe a route nobody waits for.
 */
public final class RestoreObservations {

    private final CostObserver observer;
    private final ResourceId resource;

    public RestoreObservations(CostObserver observer, ResourceId resource) {
        this.observer = Objects.requireNonNull(observer, "observer");
        this.resource = Objects.requireNonNull(resource, "resource");
    }

    public boolean enabled() {
        return observer.enabled();
    }

    /** Route key of a restore of {@code bytes} (> 0) in {@code pages} pages. */
    public CostKey key(long bytes, int pages) {
        return new CostKey(CostPath.RESTORE_COPY, SampleKind.ROUTE, resource, RepresentationFamily.RAW,
                CompletionTarget.ENGINE_RESTORE, Shape.of(bytes, pages));
    }

    /**
     * Records a finished restore of {@code logicalBytes} in {@code pages} pages that was
     * accepted at {@code acceptedNanos} and ended at {@code completedNanos}; {@code copiedBytes}
     * are the bytes the copy threads moved before the end.
     */
    public void restored(Terminal terminal, long logicalBytes, int pages, long copiedBytes, long acceptedNanos,
                         long completedNanos) {
        if (!observer.enabled() || logicalBytes <= 0 || pages <= 0) return;
        observer.record(new Observation(key(logicalBytes, pages), terminal,
                new Timeline(acceptedNanos, acceptedNanos, acceptedNanos, Math.max(acceptedNanos, completedNanos)),
                ByteCount.known(logicalBytes), ByteCount.known(copiedBytes)));
    }
}
