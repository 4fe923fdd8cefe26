package io.orbitkv.core.storage.publish;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.PageKey;

import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The {@code reuse-aware:N} hit table of the {@link PublishPipeline}: for each recently committed
 * image, the DRAM hits it had since its commit; the N-th hit makes it an SSD candidate, once.
 *
 * <p>Thread model: thread-safe (a Caffeine cache with per-entry atomic counters, maintenance run
 * on the calling thread); hits come from any reader, evictions from DRAM's evicting thread.
 *
 * <p>Invariants: counted per image ({@link PageKey}: namespace id and key, so a commit of the
 * same key bytes in another namespace neither resets nor shares a count); at most {@code hitTableEntries} images are counted (the least recently counted
 * leave first); a hit counts only for the exact image committed under its key (the image id
 * matches); an image is returned as a candidate at most once, by the hit that reached N.
 *
 * <p>Design note: a bounded side table rather than a field in each DRAM image, so the DRAM tier
 * knows nothing of SSD policy and only {@code reuse-aware:N} pays for the counts; the bound
 * ({@code hitTableEntries}, 65,536 by default) caps its memory whatever the commit rate, and an
 * image that leaves the table before its N-th hit is simply not a candidate.
 */
final class ReuseHits {

    /** A committed image whose DRAM hits are counted. */
    record Candidate(int namespaceId, long imageId, int lengthBytes) {}

    private record Count(Candidate image, AtomicInteger hits) {}

    private final int threshold;
    private final Cache<PageKey, Count> table;

    ReuseHits(int entries, int threshold) {
        this.threshold = threshold;
        this.table = Caffeine.newBuilder().maximumSize(entries).executor(Runnable::run).build();
    }

    /** {@code key}'s image was committed: its count starts at 0 (replacing any older image's). */
    void committed(PageKey key, Candidate image) {
        table.put(key, new Count(image, new AtomicInteger()));
    }

    /** Counts a hit on {@code lease}'s image; the hit that reaches the threshold returns it, once. */
    Optional<Candidate> onHit(Lease lease) {
        PageKey key = new PageKey(lease.namespaceId(), lease.key());
        Count count = table.getIfPresent(key);
        if (count == null || count.image().imageId() != lease.imageId()) return Optional.empty();
        if (count.hits().incrementAndGet() != threshold) return Optional.empty();
        table.asMap().remove(key, count);
        return Optional.of(count.image());
    }

    /** {@code key}'s image left DRAM: it is no longer counted. */
    void evicted(PageKey key) {
        table.invalidate(key);
    }
}
