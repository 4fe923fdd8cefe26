package io.orbitkv.core.storage.ssd;

import java.util.Locale;

/**
 * Which route serves {@link SsdStore#read}: the setting ({@code --ssd-read-path}) and, after
 * {@link SsdStore#open}, the route actually chosen ({@link SsdStore#readPath()} is never
 * {@link #AUTO}).
 */
public enum ReadPath {
    /** Worker threads doing positional reads ({@code FileChannel.read(buffer, position)}). */
    POSITIONAL,
    /** io_uring with one completion owner; a store forced to it fails to open if io_uring is unavailable. */
    URING,
    /** io_uring when its setup succeeds at open, positional otherwise. */
    AUTO;

    /** Parses {@code positional | uring | auto}, case-insensitively. */
    public static ReadPath parse(String value) {
        return switch (value.trim().toLowerCase(Locale.ROOT)) {
            case "positional" -> POSITIONAL;
            case "uring" -> URING;
            case "auto" -> AUTO;
            default -> throw new IllegalArgumentException("SSD read path must be positional, uring or auto: " + value);
        };
    }
}
