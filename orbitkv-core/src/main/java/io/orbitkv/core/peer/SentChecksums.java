package io.orbitkv.core.peer;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;

import java.util.OptionalInt;

/**
 * The CRC32C of DRAM images a source has sent whole, by image id ({@link PinnedImage#imageId()}),
 * so a later send of the same image need not checksum its payload again: the trailer is known
 * before the first byte goes out and can leave with the last piece.
 *
 * <p>Thread model: thread-safe. Invariant: an entry is the checksum of the pinned bytes of that
 * image as they were first sent. A DRAM image id names one immutable image for the tier's whole
 * life (the slot table counts ids up and never reuses one; an image's bytes do not change once
 * committed), so whoever pins the same id later pins the same bytes; a slot whose bytes did
 * change under a live image (a bug) is caught by the requester's check against the first
 * checksum, where a checksum taken at each send would have vouched for the changed bytes. Bounded:
 * at most {@link #MAX_ENTRIES} images, the least recently sent dropped first (about 120 bytes of
 * heap each, 7.5 MiB at the bound: heap used before and after 65,536 puts, JDK 25).
 *
 * <p>Design note: worth keeping because a popular prefix is read by several peers, each once;
 * the first read pays the checksum as before (piece by piece, overlapping the transfer).
 */
public final class SentChecksums {

    /** Images remembered at most. */
    public static final int MAX_ENTRIES = 65_536;

    private final Cache<Long, Integer> byImage;

    public SentChecksums() {
        this(MAX_ENTRIES);
    }

    /** A table of at most {@code maxEntries} images (tests use small ones). */
    public SentChecksums(int maxEntries) {
        if (maxEntries < 1) throw new IllegalArgumentException("maxEntries: " + maxEntries);
        this.byImage = Caffeine.newBuilder().maximumSize(maxEntries).executor(Runnable::run).build();
    }

    /** The checksum remembered for {@code imageId}, if any. */
    public OptionalInt get(long imageId) {
        Integer crc = byImage.getIfPresent(imageId);
        return crc == null ? OptionalInt.empty() : OptionalInt.of(crc);
    }

    /** Remembers {@code crc32c}, computed over the whole pinned payload of {@code imageId}. */
    public void put(long imageId, int crc32c) {
        byImage.put(imageId, crc32c);
    }

    /** Images remembered now (approximate while others write). */
    public long size() {
        return byImage.estimatedSize();
    }
}
