package io.orbitkv.core.storage.dram;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicIntegerArray;

/**
 * Where a slot's bytes live: its offset in its class's arena of a namespace ({@link DramArenas}),
 * the slices and {@link SlotRef}s handed to publishers and readers, and which namespace's arena
 * wrote the slot last. Owns that slot-owner map; borrows the arenas and the {@link SlotTable}'s
 * geometry.
 *
 * <p>Thread model: thread-safe. {@link #takeOver} runs only for a slot its caller has just
 * reserved, so nobody else writes that slot's owner at the same time.
 *
 * <p>Invariant: a slot's bytes live in one namespace's memfd only: when a slot changes namespace
 * the previous owner's pages of it are punched out, so the tier's memory stays within its
 * capacity however many namespaces write it. No reader holds the old bytes: a slot is allocated
 * only once its last lease was released.
 *
 * <p>Design note: one {@code int} per slot (4 B), read plainly on the common path where a slot
 * stays in its namespace, so a reservation pays no fence for it.
 */
final class SlotMemory {

    private final DramArenas arenas;
    private final SlotTable slots;
    /** The namespace whose arena holds each slot's bytes (-1: never written). */
    private final AtomicIntegerArray owners;

    SlotMemory(DramArenas arenas, SlotTable slots) {
        this.arenas = arenas;
        this.slots = slots;
        this.owners = new AtomicIntegerArray(slots.slotCount());
        for (int i = 0; i < slots.slotCount(); i++) owners.set(i, -1);
    }

    /**
     * The slot's first {@code lengthBytes} rounded up to whole 4 KiB blocks (slots are block
     * multiples), in the arena of {@code namespaceId}: the only memory that namespace's engines map.
     */
    MemorySegment blockSlice(int namespaceId, int slot, int lengthBytes) {
        int sizeClass = slots.classOf(slot);
        long blocks = ((long) lengthBytes + DramArenaLayout.PAGE_BYTES - 1) / DramArenaLayout.PAGE_BYTES;
        return arenas.segment(namespaceId, sizeClass).asSlice(slotOffset(slot), blocks * DramArenaLayout.PAGE_BYTES);
    }

    SlotRef slotRef(int slot, int lengthBytes) {
        return new SlotRef(slots.classOf(slot), slotOffset(slot), lengthBytes);
    }

    /**
     * A freshly reserved {@code slot} now belongs to {@code namespaceId}: if another namespace
     * wrote it last, that namespace's pages of the slot are punched out.
     */
    void takeOver(int slot, int namespaceId) {
        // The reserver owns the slot until it commits or aborts, so nobody else writes its owner
        // now: a plain read skips the exchange (a full fence) when the owner stays the same.
        int previous = owners.get(slot);
        if (previous == namespaceId) return;
        owners.set(slot, namespaceId);
        if (previous >= 0) {
            arenas.punch(previous, slots.classOf(slot), slotOffset(slot), slots.slotBytes(slot));
        }
    }

    /**
     * The arenas of {@code namespaceId} (one memfd per class), created on first use; empty when
     * {@code maxArenaNamespaces} namespaces already have arenas.
     */
    Optional<ArenaGeometry> arenasFor(int namespaceId) {
        try {
            return arenas.arenasFor(namespaceId).map(DramArenas.NamespaceArenas::geometry);
        } catch (IOException e) {
            throw new UncheckedIOException("creating the DRAM arenas of namespace " + namespaceId, e);
        }
    }

    /** As {@link #arenasFor}, without building the geometry: true when the namespace has (or now got) arenas. */
    boolean ensureArenas(int namespaceId) {
        try {
            return arenas.ensure(namespaceId);
        } catch (IOException e) {
            throw new UncheckedIOException("creating the DRAM arenas of namespace " + namespaceId, e);
        }
    }

    private long slotOffset(int slot) {
        return DramArenaLayout.FIRST_SLOT_OFFSET + (long) slots.slotInClass(slot) * slots.slotBytes(slot);
    }
}
