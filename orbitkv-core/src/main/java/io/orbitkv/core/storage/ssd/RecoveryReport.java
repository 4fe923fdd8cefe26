package io.orbitkv.core.storage.ssd;

import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;

/**
 * What a restart scan found: the evidence behind the rebuilt index.
 *
 * @param extentsKept        extents now in the index (intact, newest generation of their key)
 * @param extentsSuperseded  intact extents not indexed because the same key has a newer generation
 * @param dropped            extents that start with the magic but cannot be served, by reason
 * @param payloadBytesKept   sum of the kept extents' payload lengths
 * @param footprintBytesKept sum of the kept extents' on-disk footprints
 * @param maxGeneration      highest generation in any CRC-valid header (0 when none); new
 *                           extents continue above it
 * @param resumeFile         file the write head resumes in (after the newest kept extent)
 * @param resumeOffset       offset in bytes the write head resumes at
 * @param bytesScanned       bytes read by the scan (headers and payloads)
 */
public record RecoveryReport(
        int extentsKept,
        int extentsSuperseded,
        Map<ExtentDamage, Integer> dropped,
        long payloadBytesKept,
        long footprintBytesKept,
        long maxGeneration,
        int resumeFile,
        long resumeOffset,
        long bytesScanned) {

    public RecoveryReport {
        Objects.requireNonNull(dropped, "dropped");
        EnumMap<ExtentDamage, Integer> copy = new EnumMap<>(ExtentDamage.class);
        copy.putAll(dropped);
        dropped = Map.copyOf(copy);
        if (extentsKept < 0 || extentsSuperseded < 0 || resumeFile < 0 || resumeOffset < 0 || maxGeneration < 0) {
            throw new IllegalArgumentException("negative count in " + this);
        }
    }

    /** Extents dropped for {@code damage} (0 when none). */
    public int dropped(ExtentDamage damage) {
        return dropped.getOrDefault(damage, 0);
    }

    /** All dropped extents, over every reason. */
    public int droppedTotal() {
        return dropped.values().stream().mapToInt(Integer::intValue).sum();
    }
}
