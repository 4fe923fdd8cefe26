package io.orbitkv.core.storage.ssd;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;

import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToDoubleFunction;

/**
 * The store's meters, all named {@code orbitkv.ssd.*} and tagged with the store directory.
 * Owns no store state: gauges read the owner through the functions passed in.
 *
 * <p>Thread-safe (Micrometer counters are). Every tagged counter is created up front, so the
 * hot path does no registry lookup and the set of series is fixed: {@code kind} has 4 values,
 * {@code damage} has {@value #DAMAGE_KINDS}.
 */
final class SsdMetrics {

    private static final int DAMAGE_KINDS = 7;

    /** Why an operation was refused or failed. */
    enum ErrorKind { BUSY, NO_SPACE, RING_FULL, IO }

    private final Counter reads;
    private final Counter writes;
    private final Counter readBytes;
    private final Counter writeBytes;
    private final Counter pinnedSkips;
    private final Counter pinnedWaits;
    private final Counter bounceCopies;
    private final Map<ErrorKind, Counter> errors = new EnumMap<>(ErrorKind.class);
    private final Map<ExtentDamage, Counter> corruptDropped = new EnumMap<>(ExtentDamage.class);

    SsdMetrics(MeterRegistry registry, String store) {
        Tags tags = Tags.of("store", store);
        reads = counter(registry, "orbitkv.ssd.reads", tags, "extent reads completed");
        writes = counter(registry, "orbitkv.ssd.writes", tags, "extents written");
        readBytes = counter(registry, "orbitkv.ssd.read.bytes", tags, "bytes read from extent files");
        writeBytes = counter(registry, "orbitkv.ssd.write.bytes", tags, "bytes written to extent files (headers and padding included)");
        pinnedSkips = counter(registry, "orbitkv.ssd.pinned.skips", tags, "ring positions skipped because a reader pinned the extent");
        pinnedWaits = counter(registry, "orbitkv.ssd.pinned.waits", tags, "ring writer waits for a pinned extent");
        bounceCopies = counter(registry, "orbitkv.ssd.bounce.copies", tags, "reads copied through a bounce buffer (unaligned destination)");
        for (ErrorKind k : ErrorKind.values()) {
            errors.put(k, counter(registry, "orbitkv.ssd.errors", tags.and("kind", k.name().toLowerCase(Locale.ROOT)),
                    "store operations that failed, by kind"));
        }
        for (ExtentDamage d : ExtentDamage.values()) {
            corruptDropped.put(d, counter(registry, "orbitkv.ssd.corrupt.dropped",
                    tags.and("damage", d.name().toLowerCase(Locale.ROOT)), "extents dropped as damaged (never served)"));
        }
    }

    private static Counter counter(MeterRegistry registry, String name, Tags tags, String description) {
        return Counter.builder(name).tags(tags).description(description).register(registry);
    }

    /** Registers the gauges that read the owner's state. */
    static <T> void gauges(MeterRegistry registry, String store, T owner,
                           ToDoubleFunction<T> queueDepth, ToDoubleFunction<T> usedBytes,
                           ToDoubleFunction<T> capacityBytes, ToDoubleFunction<T> readerPins,
                           ToDoubleFunction<T> directIo) {
        Tags tags = Tags.of("store", store);
        Gauge.builder("orbitkv.ssd.queue.depth", owner, queueDepth).tags(tags)
                .description("I/O operations waiting for a worker").register(registry);
        Gauge.builder("orbitkv.ssd.used", owner, usedBytes).tags(tags).baseUnit("bytes")
                .description("on-disk footprint of indexed extents").register(registry);
        Gauge.builder("orbitkv.ssd.capacity", owner, capacityBytes).tags(tags).baseUnit("bytes")
                .description("bytes the ring may use").register(registry);
        Gauge.builder("orbitkv.ssd.pins", owner, readerPins).tags(tags)
                .description("reader pins outstanding").register(registry);
        Gauge.builder("orbitkv.ssd.direct_io", owner, directIo).tags(tags).description("1 when O_DIRECT is used, 0 for buffered fallback").register(registry);
    }

    void read(long bytes) {
        reads.increment();
        readBytes.increment(bytes);
    }

    void write(long bytes) {
        writes.increment();
        writeBytes.increment(bytes);
    }

    void error(ErrorKind kind) {
        errors.get(kind).increment();
    }

    void corruptDropped(ExtentDamage damage) {
        corruptDropped.get(damage).increment();
    }

    void pinnedSkip() {
        pinnedSkips.increment();
    }

    void pinnedWait() {
        pinnedWaits.increment();
    }

    void bounceCopy() {
        bounceCopies.increment();
    }
}
