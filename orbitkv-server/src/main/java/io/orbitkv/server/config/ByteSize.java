package io.orbitkv.server.config;

import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Parses and prints byte sizes as users write them: {@code 4096}, {@code 64k}, {@code 512m},
 * {@code 4g}, {@code 1t} (binary multiples; an optional {@code b} or {@code ib} after the suffix,
 * any case). Stateless.
 *
 * <p>Design note: binary multiples only ({@code 1g} = 2^30 bytes) because every size this server
 * takes (arenas, SSD files, budgets) is carved into power-of-two slots or 4 KiB blocks; a decimal
 * {@code 1G} = 10^9 would not divide into 2 MiB slots.
 */
public final class ByteSize {

    private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([kmgt]?)(i?b)?");

    private ByteSize() {
    }

    /**
     * The number of bytes {@code text} names.
     *
     * @throws IllegalArgumentException if it is not a size or overflows a {@code long}
     */
    public static long parse(String text) {
        Matcher m = SIZE.matcher(text.strip().toLowerCase(Locale.ROOT));
        if (!m.matches()) {
            throw new IllegalArgumentException("'" + text + "' is not a size (e.g. 4096, 64k, 512m, 4g)");
        }
        int shift = switch (m.group(2)) {
            case "k" -> 10;
            case "m" -> 20;
            case "g" -> 30;
            case "t" -> 40;
            default -> 0;
        };
        try {
            long value = Long.parseLong(m.group(1));
            if (value > (Long.MAX_VALUE >> shift)) throw new NumberFormatException();
            return value << shift;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("size '" + text + "' does not fit 63 bits");
        }
    }

    /** {@code bytes} with the largest binary suffix that divides it exactly ({@code 512m}, {@code 3k}, {@code 1000}). */
    public static String format(long bytes) {
        String[] suffixes = {"t", "g", "m", "k"};
        int[] shifts = {40, 30, 20, 10};
        for (int i = 0; i < shifts.length; i++) {
            long unit = 1L << shifts[i];
            if (bytes != 0 && bytes % unit == 0) return (bytes / unit) + suffixes[i];
        }
        return Long.toString(bytes);
    }
}
