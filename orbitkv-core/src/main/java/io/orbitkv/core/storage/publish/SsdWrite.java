package io.orbitkv.core.storage.publish;

import io.orbitkv.core.storage.dram.AcquireResult;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.PageKey;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.core.storage.ssd.WriteResult;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * One admitted SSD write of the {@link PublishPipeline}, queued on the dispatcher's write lane:
 * key + image id, and the lease that came with it ({@code on-evict}'s eviction lease, or
 * {@code write-through}'s lease from the commit). At its turn it writes straight from the DRAM
 * slot, leasing exactly that image (quietly) if it holds no lease; an image gone meanwhile drops
 * the write ({@code source_gone}).
 *
 * <p>Thread model: {@link #start} and {@link #drop} are called once, by the dispatcher, on
 * whichever thread frees a submission slot; the store completes the write on an I/O worker.
 *
 * <p>Invariants: every write finishes exactly once, whatever happened (written, failed, dropped,
 * or its start threw): it releases the one lease it held and then calls {@code onFinished}, which
 * returns its bytes to the budget; a second finish is a bug and throws.
 */
final class SsdWrite implements IoOp {

    private final PageKey page;
    private final StateKey key;
    private final NamespaceDigest namespace;
    private final long imageId;
    private final int lengthBytes;
    private final Optional<Lease> retained;
    private final DramTier dram;
    private final SsdStore ssd;
    private final PublishMetrics metrics;
    private final Consumer<SsdWrite> onFinished;
    private final AtomicInteger finished = new AtomicInteger();

    SsdWrite(PageKey page, NamespaceDigest namespace, long imageId, int lengthBytes, Optional<Lease> retained,
             DramTier dram, SsdStore ssd, PublishMetrics metrics, Consumer<SsdWrite> onFinished) {
        this.page = page;
        this.key = page.key();
        this.namespace = namespace;
        this.imageId = imageId;
        this.lengthBytes = lengthBytes;
        this.retained = retained;
        this.dram = dram;
        this.ssd = ssd;
        this.metrics = metrics;
        this.onFinished = onFinished;
    }

    /** The image's namespace id and key. */
    PageKey page() {
        return page;
    }

    int lengthBytes() {
        return lengthBytes;
    }

    NamespaceDigest namespace() {
        return namespace;
    }

    @Override
    public CompletableFuture<?> start() {
        Optional<Lease> lease = retained.isPresent() ? retained : leaseImage();
        if (lease.isEmpty()) {
            metrics.writeDropped(PublishMetrics.WriteDrop.SOURCE_GONE);
            finish();
            return CompletableFuture.completedFuture(null);
        }
        Lease held = lease.get();
        CompletableFuture<WriteResult> write;
        try {
            write = ssd.write(namespace, key, held.blockSegment(), lengthBytes);
        } catch (RuntimeException e) {
            held.release();
            finish();
            throw e;
        }
        return write.whenComplete((result, failure) -> {
            held.release();
            PublishMetrics.Written written = failure != null ? PublishMetrics.Written.FAILED : outcome(result);
            if (written == PublishMetrics.Written.COMMITTED) metrics.committed(lengthBytes);
            else metrics.written(written);
            finish();
        });
    }

    @Override
    public void drop(DropReason reason) {
        retained.ifPresent(Lease::release);
        metrics.writeDropped(switch (reason) {
            case LANE_FULL -> PublishMetrics.WriteDrop.LANE_FULL;
            case CLOSED -> PublishMetrics.WriteDrop.CLOSED;
        });
        finish();
    }

    private Optional<Lease> leaseImage() {
        return switch (dram.acquireImage(key, page.namespaceId(), imageId)) {
            case Lease l -> Optional.of(l);
            case AcquireResult.Miss ignored -> Optional.empty();
        };
    }

    private void finish() {
        if (finished.getAndIncrement() != 0) throw new IllegalStateException("write finished twice: " + key);
        onFinished.accept(this);
    }

    private static PublishMetrics.Written outcome(WriteResult result) {
        return switch (result) {
            case WriteResult.Committed ignored -> PublishMetrics.Written.COMMITTED;
            case WriteResult.Busy ignored -> PublishMetrics.Written.BUSY;
            case WriteResult.NoSpace ignored -> PublishMetrics.Written.NO_SPACE;
            case WriteResult.RingFull ignored -> PublishMetrics.Written.RING_FULL;
            case WriteResult.Failed ignored -> PublishMetrics.Written.FAILED;
        };
    }
}
