package io.orbitkv.core.storage.publish;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.BaseUnits;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The pipeline's counters ({@code orbitkv.publish.*}, tag {@code arena}). Every tagged series is
 * created up front from closed enums, so the hot path does no registry lookup and keys never
 * become tags. The gauges read the pipeline's {@link PublishQueues} ({@link #queueGauges}). Thread-safe.
 */
final class PublishMetrics implements AutoCloseable {

    /** What sealing did with a block taken from the queue, or an engine's commit with its reservation. */
    enum Sealed { INSERTED, DUPLICATE, ALREADY_RESIDENT }

    /** Why a queued block was not sealed. */
    enum SealDrop { SOURCE_GONE, DRAM_FULL, CLOSED }

    /** Why SSD admission said no; the block stays in DRAM. */
    enum Skip { OVER_RATE, QUEUE_FULL, ALREADY_STORED, UNKNOWN_NAMESPACE, TENANT_QUOTA }

    /** Why an admitted SSD write was not performed. */
    enum WriteDrop { SOURCE_GONE, LANE_FULL, CLOSED }

    /** How a performed SSD write ended (the store's {@code WriteResult}). */
    enum Written { COMMITTED, BUSY, NO_SPACE, RING_FULL, FAILED }

    private final MeterRegistry registry;
    private final Tags tags;
    private final List<Meter> meters = new ArrayList<>();
    final Counter sealBusy;
    final Counter admitted;
    final Counter refreshed;
    private final Map<Sealed, Counter> sealed = new EnumMap<>(Sealed.class);
    private final Map<SealDrop, Counter> sealDropped = new EnumMap<>(SealDrop.class);
    private final Map<Skip, Counter> skipped = new EnumMap<>(Skip.class);
    private final Map<WriteDrop, Counter> writeDropped = new EnumMap<>(WriteDrop.class);
    private final Map<Written, Counter> written = new EnumMap<>(Written.class);
    /** Payload bytes published into DRAM (a new image, copied or committed in place) and onto SSD (written and committed). */
    private final Counter dramBytes;
    private final Counter ssdBytes;

    PublishMetrics(MeterRegistry registry, Tags tags) {
        this.registry = registry;
        this.tags = tags;
        sealBusy = counter("orbitkv.publish.seal.busy", tags, "publishes refused: seal queue full");
        admitted = counter("orbitkv.publish.ssd.admitted", tags, "SSD writes admitted by policy and budget");
        refreshed = counter("orbitkv.publish.ssd.refreshed", tags,
                "admitted SSD writes that rewrite a page whose extent was in the ring's oldest part (on-evict)");
        perValue(Sealed.values(), sealed, "orbitkv.publish.seal.sealed", "result", tags, "blocks sealed");
        perValue(SealDrop.values(), sealDropped, "orbitkv.publish.seal.dropped", "reason", tags, "blocks not sealed");
        perValue(Skip.values(), skipped, "orbitkv.publish.ssd.skipped", "reason", tags, "SSD writes skipped");
        perValue(WriteDrop.values(), writeDropped, "orbitkv.publish.ssd.dropped", "reason", tags,
                "admitted SSD writes dropped");
        perValue(Written.values(), written, "orbitkv.publish.ssd.written", "result", tags, "SSD writes performed");
        String published = "payload bytes published, by tier: new images sealed into DRAM (copied or committed in place), "
                + "SSD writes committed";
        dramBytes = counter("orbitkv.publish.bytes", tags.and("tier", "dram"), published);
        ssdBytes = counter("orbitkv.publish.bytes", tags.and("tier", "ssd"), published);
    }

    /** A block sealed into DRAM as a new image of {@code lengthBytes}, by the sealer or an engine's commit. */
    void inserted(int lengthBytes) {
        sealed.get(Sealed.INSERTED).increment();
        dramBytes.increment(lengthBytes);
    }

    /** An SSD write of {@code lengthBytes} of payload committed. */
    void committed(int lengthBytes) {
        written.get(Written.COMMITTED).increment();
        ssdBytes.increment(lengthBytes);
    }

    void sealed(Sealed result) {
        sealed.get(result).increment();
    }

    void sealDropped(SealDrop reason) {
        sealDropped.get(reason).increment();
    }

    void skipped(Skip reason) {
        skipped.get(reason).increment();
    }

    void writeDropped(WriteDrop reason) {
        writeDropped.get(reason).increment();
    }

    void written(Written result) {
        written.get(result).increment();
    }

    /** The gauges of {@code queues}, removed with the counters on {@link #close}. */
    void queueGauges(PublishQueues queues) {
        meters.add(Gauge.builder("orbitkv.publish.seal.queue.bytes", queues, PublishQueues::sealQueueBytes)
                .baseUnit(BaseUnits.BYTES).tags(tags).description("bytes waiting to be sealed").register(registry));
        meters.add(Gauge.builder("orbitkv.publish.seal.queue.depth", queues, PublishQueues::sealQueueDepth)
                .tags(tags).description("blocks waiting to be sealed").register(registry));
        meters.add(Gauge.builder("orbitkv.publish.ssd.writethrough.queue.depth", queues,
                PublishQueues::writeThroughQueueDepth).tags(tags)
                .description("sealed blocks (leased) waiting for SSD write room under write-through").register(registry));
        meters.add(Gauge.builder("orbitkv.publish.ssd.handover.queue.bytes", queues, PublishQueues::evictedQueueBytes)
                .baseUnit(BaseUnits.BYTES).tags(tags).description("bytes of images DRAM evicted, waiting for SSD lane room and write budget")
                .register(registry));
        meters.add(Gauge.builder("orbitkv.publish.ssd.queued.bytes", queues, PublishQueues::writeQueuedBytes)
                .baseUnit(BaseUnits.BYTES).tags(tags).description("bytes admitted for SSD, not yet written")
                .register(registry));
    }

    @Override
    public void close() {
        for (Meter m : meters) registry.remove(m);
        meters.clear();
    }

    private <E extends Enum<E>> void perValue(E[] values, Map<E, Counter> into, String name, String tagKey, Tags tags,
                                              String description) {
        for (E v : values) {
            into.put(v, counter(name, tags.and(tagKey, v.name().toLowerCase(Locale.ROOT)), description));
        }
    }

    private Counter counter(String name, Tags tags, String description) {
        Counter c = Counter.builder(name).tags(tags).description(description).register(registry);
        meters.add(c);
        return c;
    }
}
