package io.orbitkv.core.storage.ssd;

import java.util.List;
import java.util.Objects;

/**
 * Result of {@link ExtentScanner#scan}: the extents to index, which files are already
 * preallocated, and the report handed to the caller of {@link SsdStore#recover()}.
 *
 * @param live         the newest intact extent of every key found, unpinned
 * @param preallocated per file: true when the file already has its configured size
 * @param report       the counts
 */
record ScanResult(List<Extent> live, boolean[] preallocated, RecoveryReport report) {

    ScanResult {
        live = List.copyOf(live);
        Objects.requireNonNull(preallocated, "preallocated");
        Objects.requireNonNull(report, "report");
    }
}
