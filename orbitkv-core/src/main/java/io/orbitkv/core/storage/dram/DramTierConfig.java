package io.orbitkv.core.storage.dram;

import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * Configuration of one {@link DramTier}: where its arena files live and how its bytes are
 * budgeted.
 *
 * <p>Immutable value, validated on construction so that a tier can never be opened with a
 * geometry it cannot serve (unsorted classes, budgets that exceed the arena).
 *
 * @param directory                directory of the arena files; {@link #DEFAULT_DIRECTORY} on
 *                                 Linux hosts ({@code tmpfs}, so other processes can map them)
 * @param arenaName                file name stem, {@code [A-Za-z0-9_-]{1,64}}; two Managers on
 *                                 one host must use different names or directories
 * @param sizeClasses              slot classes, strictly increasing {@code slotBytes}
 * @param reservedBudgetBytes      most slot bytes that may be reserved but not yet committed
 *                                 (in-flight publishes); at least the largest slot
 * @param evictedLeasedBudgetBytes evicted images that are still leased keep their slots; when
 *                                 they hold more than this, new reservations fail with
 *                                 {@link ReserveResult.FullReason#EVICTED_LEASED_BUDGET}
 * @param pressureScanEntries      when a class has no free slot, how many of the coldest
 *                                 entries are scanned for an unleased victim of that class, and
 *                                 then how many of the class's slots its clock hand passes
 * @param eviction                 which image leaves a full index ({@link DramEviction})
 * @param maxArenaNamespaces       namespaces that may have arenas (one memfd per class each, sized
 *                                 to the class, sparse): bounds the Manager's address space and
 *                                 descriptors, {@code namespaces × capacity} and
 *                                 {@code namespaces × classes}
 */
public record DramTierConfig(
        Path directory,
        String arenaName,
        List<SizeClass> sizeClasses,
        long reservedBudgetBytes,
        long evictedLeasedBudgetBytes,
        int pressureScanEntries,
        DramEviction eviction,
        int maxArenaNamespaces) {

    /** Default arena directory: POSIX shared memory, visible to every process on the host. */
    public static final Path DEFAULT_DIRECTORY = Path.of("/dev/shm/orbitkv");

    /** Default slot sizes: 64 KiB, 256 KiB and 2 MiB (a 16-token page of a 7-8B model is ~2 MiB). */
    public static final List<Integer> DEFAULT_SLOT_BYTES = List.of(64 * 1024, 256 * 1024, 2 * 1024 * 1024);

    /**
     * Default {@link #maxArenaNamespaces}: 64 models (or ranks, or adapters) on one host is far
     * beyond what its accelerators run at once, and 64 × a 64 GiB tier is 4 TiB of the 128 TiB
     * user address space.
     */
    public static final int DEFAULT_MAX_ARENA_NAMESPACES = 64;

    /** Default scan bound for class-pressure victims. */
    public static final int DEFAULT_PRESSURE_SCAN_ENTRIES = 256;

    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9_-]{1,64}");

    public DramTierConfig {
        Objects.requireNonNull(directory, "directory");
        Objects.requireNonNull(arenaName, "arenaName");
        if (!NAME.matcher(arenaName).matches()) {
            throw new IllegalArgumentException("arenaName must match " + NAME + ": " + arenaName);
        }
        sizeClasses = List.copyOf(sizeClasses);
        if (sizeClasses.isEmpty()) throw new IllegalArgumentException("at least one size class");
        long totalSlots = 0;
        long capacity = 0;
        for (int i = 0; i < sizeClasses.size(); i++) {
            if (i > 0 && sizeClasses.get(i).slotBytes() <= sizeClasses.get(i - 1).slotBytes()) {
                throw new IllegalArgumentException(
                        "size classes must have strictly increasing slotBytes: " + sizeClasses);
            }
            totalSlots += sizeClasses.get(i).slotCount();
            capacity += sizeClasses.get(i).capacityBytes();
        }
        if (totalSlots > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("too many slots: " + totalSlots);
        }
        int largestSlot = sizeClasses.getLast().slotBytes();
        if (reservedBudgetBytes < largestSlot) {
            throw new IllegalArgumentException(
                    "reservedBudgetBytes must hold at least one largest slot (" + largestSlot + "): "
                            + reservedBudgetBytes);
        }
        if (evictedLeasedBudgetBytes < 0) {
            throw new IllegalArgumentException("evictedLeasedBudgetBytes must be >= 0: " + evictedLeasedBudgetBytes);
        }
        if (reservedBudgetBytes + evictedLeasedBudgetBytes >= capacity) {
            throw new IllegalArgumentException("budgets (" + reservedBudgetBytes + " + " + evictedLeasedBudgetBytes
                    + ") leave nothing of the " + capacity + " byte arena for resident images");
        }
        if (pressureScanEntries <= 0) {
            throw new IllegalArgumentException("pressureScanEntries must be positive: " + pressureScanEntries);
        }
        Objects.requireNonNull(eviction, "eviction");
        if (maxArenaNamespaces <= 0) {
            throw new IllegalArgumentException("maxArenaNamespaces must be positive: " + maxArenaNamespaces);
        }
    }

    /** A configuration with {@link #DEFAULT_MAX_ARENA_NAMESPACES}. */
    public DramTierConfig(Path directory, String arenaName, List<SizeClass> sizeClasses, long reservedBudgetBytes,
                          long evictedLeasedBudgetBytes, int pressureScanEntries, DramEviction eviction) {
        this(directory, arenaName, sizeClasses, reservedBudgetBytes, evictedLeasedBudgetBytes, pressureScanEntries,
                eviction, DEFAULT_MAX_ARENA_NAMESPACES);
    }

    /** A configuration with {@link DramEviction#W_TINY_LFU} eviction. */
    public DramTierConfig(Path directory, String arenaName, List<SizeClass> sizeClasses, long reservedBudgetBytes,
                          long evictedLeasedBudgetBytes, int pressureScanEntries) {
        this(directory, arenaName, sizeClasses, reservedBudgetBytes, evictedLeasedBudgetBytes, pressureScanEntries,
                DramEviction.W_TINY_LFU);
    }

    /**
     * A configuration with default budgets: an eighth of the capacity for in-flight
     * reservations and an eighth for evicted-but-leased images (at least one largest slot each).
     */
    public static DramTierConfig of(Path directory, String arenaName, List<SizeClass> sizeClasses) {
        long capacity = sizeClasses.stream().mapToLong(SizeClass::capacityBytes).sum();
        long largest = sizeClasses.isEmpty() ? 0 : sizeClasses.getLast().slotBytes();
        long eighth = Math.max(largest, capacity / 8);
        return new DramTierConfig(directory, arenaName, sizeClasses, eighth, eighth, DEFAULT_PRESSURE_SCAN_ENTRIES);
    }

    /**
     * Size classes of the given slot sizes (ascending) that share {@code capacityBytes} equally,
     * each rounded down to whole slots. Fails if a share cannot hold one slot of its class.
     */
    public static List<SizeClass> splitEvenly(long capacityBytes, List<Integer> slotBytes) {
        if (slotBytes.isEmpty()) throw new IllegalArgumentException("at least one slot size");
        long share = capacityBytes / slotBytes.size();
        return slotBytes.stream().map(bytes -> {
            long count = share / bytes;
            if (count < 1 || count > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("a share of " + share + " bytes cannot be cut into " + bytes
                        + "-byte slots");
            }
            return new SizeClass(bytes, (int) count);
        }).toList();
    }

    /** Same configuration with other budgets. */
    public DramTierConfig withBudgets(long reservedBudgetBytes, long evictedLeasedBudgetBytes) {
        return new DramTierConfig(directory, arenaName, sizeClasses, reservedBudgetBytes, evictedLeasedBudgetBytes,
                pressureScanEntries, eviction, maxArenaNamespaces);
    }

    /** Same configuration with another eviction policy. */
    public DramTierConfig withEviction(DramEviction eviction) {
        return new DramTierConfig(directory, arenaName, sizeClasses, reservedBudgetBytes, evictedLeasedBudgetBytes,
                pressureScanEntries, eviction, maxArenaNamespaces);
    }

    /** Same configuration with another {@link #maxArenaNamespaces}. */
    public DramTierConfig withMaxArenaNamespaces(int maxArenaNamespaces) {
        return new DramTierConfig(directory, arenaName, sizeClasses, reservedBudgetBytes, evictedLeasedBudgetBytes,
                pressureScanEntries, eviction, maxArenaNamespaces);
    }

    /**
     * Throws unless tenant DRAM guarantees summing to {@code guaranteedBytes} can be kept: they need
     * a policy the tier bounds (LRU or chain; W-TinyLFU's bound is Caffeine's own and cannot pass
     * over guaranteed images) and must fit {@link #indexWeightBytes()}.
     */
    public void requireGuaranteesFit(long guaranteedBytes) {
        if (guaranteedBytes > 0 && eviction == DramEviction.W_TINY_LFU) {
            throw new IllegalArgumentException("a tenant DRAM guarantee (dramGuaranteedBytes) needs dramEviction=lru or chain, not "
                    + eviction);
        }
        if (guaranteedBytes > indexWeightBytes()) {
            throw new IllegalArgumentException("tenant DRAM guarantees of " + guaranteedBytes + " bytes exceed the "
                    + indexWeightBytes() + " bytes the DRAM tier keeps resident");
        }
    }

    /** Sum of all slot bytes. */
    public long capacityBytes() {
        return sizeClasses.stream().mapToLong(SizeClass::capacityBytes).sum();
    }

    /**
     * The bound handed to Caffeine as {@code maximumWeight}: capacity minus both budgets, so a
     * full index still leaves free slots for in-flight reservations and lingering leases.
     */
    public long indexWeightBytes() {
        return capacityBytes() - reservedBudgetBytes - evictedLeasedBudgetBytes;
    }
}
