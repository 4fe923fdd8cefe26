package io.orbitkv.core.engine;

import java.util.concurrent.TimeUnit;

/**
 * The bounds of HINT (protocol §5.12; {@link HintTable}). Immutable; validated on construction.
 *
 * @param pinMaxNanos             the longest a PIN holds a page, whatever {@code duration_millis} it asks
 * @param pinnedBytesPerNamespace slot bytes one namespace may hold pinned at once; a PIN past it is
 *                                refused page by page ({@code refused_budget}); 0 refuses every PIN
 * @param maxPins                 pinned pages of all namespaces at once (the pin table); past it a PIN is
 *                                refused like a budget refusal
 */
public record HintBounds(long pinMaxNanos, long pinnedBytesPerNamespace, int maxPins) {

    /** Defaults: pins of at most 10 minutes, 256 MiB pinned per namespace, 65,536 pinned pages in all. */
    public static final HintBounds DEFAULTS = new HintBounds(TimeUnit.MINUTES.toNanos(10), 256L << 20, 1 << 16);

    public HintBounds {
        if (pinMaxNanos < 1) throw new IllegalArgumentException("pinMaxNanos must be >= 1: " + pinMaxNanos);
        if (pinnedBytesPerNamespace < 0) {
            throw new IllegalArgumentException("pinnedBytesPerNamespace must be >= 0: " + pinnedBytesPerNamespace);
        }
        if (maxPins < 1) throw new IllegalArgumentException("maxPins must be >= 1: " + maxPins);
    }
}
