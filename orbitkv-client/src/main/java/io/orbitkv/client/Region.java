package io.orbitkv.client;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Objects;

/**
 * A destination region registered for ENGINE_RESTORE: {@code pageCount} pages of
 * {@code pageBytes} in the shared-memory file {@code path}, which this client has mapped
 * read-write as {@code mapping}. The Manager names it {@code regionId} on this connection only.
 *
 * <p>Value; the mapping is owned by the {@link OrbitKvClient} that registered the region and is
 * unmapped when that client closes. Destination pages named by a RESTORE must not be read
 * until its COMPLETION RESTORE_DONE (protocol.md 9.3).
 */
public record Region(int regionId, Path path, int pageBytes, int pageCount, MemorySegment mapping) {

    public Region {
        Objects.requireNonNull(path, "path");
        Objects.requireNonNull(mapping, "mapping");
        if (pageBytes < 1 || pageCount < 1 || mapping.byteSize() < (long) pageBytes * pageCount) {
            throw new IllegalArgumentException("a region of " + pageCount + " pages of " + pageBytes
                    + " bytes needs a mapping that large: " + mapping.byteSize());
        }
    }

    /** Destination page {@code index}: {@code pageBytes} at byte {@code index * pageBytes}. */
    public MemorySegment page(int index) {
        Objects.checkIndex(index, pageCount);
        return mapping.asSlice((long) index * pageBytes, pageBytes);
    }
}
