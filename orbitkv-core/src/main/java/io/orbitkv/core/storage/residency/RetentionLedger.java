package io.orbitkv.core.storage.residency;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * Retention amplification per namespace: the payload bytes this Manager retains (DRAM or SSD,
 * each key counted once however many tiers hold it) divided by the bytes of those retained images
 * that a served legal boundary actually needed (a hit's required pages or checkpoint).
 *
 * <pre>
 *   amplification(ns) = retained_bytes(ns) / needed_bytes(ns)
 *   retained: a key enters on its first ADDED (DRAM insert, SSD commit or recovery) and leaves when
 *             no tier holds it any more; needed: a retained key some settled hit leased
 * </pre>
 *
 * <p>Owns per-namespace maps of key → (payload bytes, tiers holding it, needed). Fed by the tiers
 * through {@link ResidencyStream#retention()} (the same points that append residency events) and
 * by the query path ({@link #needed}). Thread-safe: one lock guards all maps; no call out is made
 * under it (gauges are registered after it is released). Bounded: one entry per image the tiers
 * hold (their slot and extent budgets bound it), so at most one namespace per retained image; a key that leaves every tier leaves the ledger, and if it comes back it must be
 * needed again to count as needed.
 *
 * <p>Design note: a value above 1 is what a cadence costs: checkpoints (or pages) kept that no
 * boundary used. It is measured on payload bytes, not slot bytes, so it compares cadences and
 * not the slot size classes; with nothing needed yet the ratio is undefined (reported as 0 in
 * the gauge, null in {@code /status}). The alternative, counting served bytes per hit, would
 * grow with traffic and say nothing about what is kept.
 */
public final class RetentionLedger {

    /** One namespace's figures. {@code amplification} is null when nothing retained was needed. */
    public record NamespaceRetention(String namespace, long retainedBytes, long retainedImages, long neededBytes,
                                     long neededImages, Double amplification) {
    }

    private static final int DRAM = 1;
    private static final int SSD = 2;

    private static final class Entry {
        final int bytes;
        int tiers;
        boolean needed;

        Entry(int bytes) {
            this.bytes = bytes;
        }
    }

    private static final class Book {
        final Map<StateKey, Entry> entries = new HashMap<>();
        long retainedBytes;
        long neededBytes;
        long neededImages;
    }

    private final NamespaceTable namespaces;
    private final MeterRegistry registry;
    private final Object lock = new Object();
    /** Guarded by {@code lock}. */
    private final Map<NamespaceDigest, Book> books = new HashMap<>();

    /**
     * @param namespaces maps the ids DRAM images carry to the digests SSD extents carry
     * @param registry   where the per-namespace gauges are registered (on first sight of a namespace)
     */
    public RetentionLedger(NamespaceTable namespaces, MeterRegistry registry) {
        this.namespaces = namespaces;
        this.registry = registry;
    }

    /** A DRAM image of namespace {@code namespaceId} became resident or left the index. */
    public void dram(int namespaceId, StateKey key, ResidencyEvent.Kind kind, int lengthBytes) {
        namespaces.digest(namespaceId).ifPresent(digest -> change(digest, key, DRAM, kind, lengthBytes));
    }

    /**
     * An SSD extent of {@code namespace} was committed (or recovered) or dropped. Kept by digest, not
     * by id: a recovered extent must not bind a namespace id before an engine registers it.
     */
    public void ssd(NamespaceDigest namespace, StateKey key, ResidencyEvent.Kind kind, int lengthBytes) {
        change(namespace, key, SSD, kind, lengthBytes);
    }

    /** A settled hit of namespace {@code namespaceId} leased {@code keys}: each retained one is needed. */
    public void needed(int namespaceId, Collection<StateKey> keys) {
        Optional<NamespaceDigest> digest = namespaces.digest(namespaceId);
        if (digest.isEmpty()) return;
        synchronized (lock) {
            Book book = books.get(digest.get());
            if (book == null) return;
            for (StateKey key : keys) {
                Entry e = book.entries.get(key);
                if (e == null || e.needed) continue;
                e.needed = true;
                book.neededBytes += e.bytes;
                book.neededImages++;
            }
        }
    }

    private void change(NamespaceDigest namespace, StateKey key, int tier, ResidencyEvent.Kind kind, int lengthBytes) {
        boolean firstSight = false;
        synchronized (lock) {
            Book book = books.get(namespace);
            if (book == null) {
                if (kind == ResidencyEvent.Kind.REMOVED) return;
                book = new Book();
                books.put(namespace, book);
                firstSight = true;
            }
            switch (kind) {
                case ADDED -> {
                    Entry e = book.entries.get(key);
                    if (e == null) {
                        e = new Entry(lengthBytes);
                        book.entries.put(key, e);
                        book.retainedBytes += lengthBytes;
                    }
                    e.tiers |= tier;
                }
                case REMOVED -> {
                    Entry e = book.entries.get(key);
                    if (e == null) return;
                    e.tiers &= ~tier;
                    if (e.tiers == 0) {
                        book.entries.remove(key);
                        book.retainedBytes -= e.bytes;
                        if (e.needed) {
                            book.neededBytes -= e.bytes;
                            book.neededImages--;
                        }
                    }
                }
            }
        }
        if (firstSight) registerGauges(namespace);
    }

    /** One row per namespace seen, by digest. */
    public List<NamespaceRetention> snapshot() {
        Map<String, NamespaceRetention> out = new TreeMap<>();
        synchronized (lock) {
            for (Map.Entry<NamespaceDigest, Book> e : books.entrySet()) {
                Book b = e.getValue();
                String name = e.getKey().toString();
                out.put(name, new NamespaceRetention(name, b.retainedBytes, b.entries.size(),
                        b.neededBytes, b.neededImages, b.neededBytes == 0 ? null : (double) b.retainedBytes / b.neededBytes));
            }
        }
        return new ArrayList<>(out.values());
    }

    /** Retained ÷ needed bytes of {@code namespaceId}; 0 when nothing retained was needed. */
    public double amplification(int namespaceId) {
        return namespaces.digest(namespaceId).map(this::amplification).orElse(0.0);
    }

    private double amplification(NamespaceDigest namespace) {
        synchronized (lock) {
            Book b = books.get(namespace);
            return b == null || b.neededBytes == 0 ? 0 : (double) b.retainedBytes / b.neededBytes;
        }
    }

    private long retained(NamespaceDigest namespace) {
        synchronized (lock) {
            Book b = books.get(namespace);
            return b == null ? 0 : b.retainedBytes;
        }
    }

    private long needed(NamespaceDigest namespace) {
        synchronized (lock) {
            Book b = books.get(namespace);
            return b == null ? 0 : b.neededBytes;
        }
    }

    private void registerGauges(NamespaceDigest namespace) {
        if (registry == null) return;
        String ns = namespace.toString();
        Gauge.builder("orbitkv.retention.amplification.ratio", () -> amplification(namespace)).tag("namespace", ns)
                .description("payload bytes retained / bytes of retained images a served boundary needed (0: none needed)")
                .register(registry);
        Gauge.builder("orbitkv.retention.retained", () -> retained(namespace)).tag("namespace", ns).baseUnit("bytes")
                .description("payload bytes retained in DRAM or SSD, each key once").register(registry);
        Gauge.builder("orbitkv.retention.needed", () -> needed(namespace)).tag("namespace", ns).baseUnit("bytes")
                .description("payload bytes of retained images some served boundary needed").register(registry);
    }
}
