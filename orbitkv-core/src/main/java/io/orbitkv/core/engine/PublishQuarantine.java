package io.orbitkv.core.engine;

import io.orbitkv.core.storage.dram.Reservation;

import java.util.ArrayDeque;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.ToLongFunction;

/**
 * Unsealed publish reservations of closed or fenced sessions, held for a grace period before
 * their slots go back to the DRAM free list (protocol §9.6). Owns the reservations handed to it:
 * each one is released (aborted) exactly once, by {@link #onTick}, by the byte budget, or by
 * {@link #releaseAll}.
 *
 * <p>Thread model: thread-safe; every method takes this object's monitor, and the release
 * callback runs under it (aborting a DRAM reservation is a CAS and a free-list push, never I/O).
 * Time comes in as a parameter, so tests drive the clock.
 *
 * <p>Invariants: {@code heldBytes <= budgetBytes}; entries are in admission order and, since
 * every entry gets the same grace on a monotonic clock, also in deadline order, so a tick pops
 * from the head only; {@code heldBytes} is the sum of the held entries' slot bytes.
 *
 * <p>Design note: the Manager cannot see a client's writes into a granted slot, so a fenced
 * engine that keeps writing after its connection closed would corrupt whichever page the slot
 * holds next. Holding the slot for {@code publishQuarantineNanos} (5 s default: an engine's
 * writer notices a closed socket or a STALE_EPOCH within one step, milliseconds) turns that
 * race into a bounded window. The budget (default 256 MiB: 128 slots of 2 MiB, a few fenced
 * engines' worth of in-flight publishes) keeps a client that reserves and disconnects in a loop
 * from pinning the DRAM tier; past it the oldest entry is released early and counted, which
 * trades the guarantee for availability only under that abuse.
 */
final class PublishQuarantine {

    private record Held(Reservation reservation, long slotBytes, long releaseAtNanos) {
    }

    private final long graceNanos;
    private final long budgetBytes;
    private final ToLongFunction<Reservation> slotBytes;
    private final Consumer<Reservation> release;
    /** Guarded by this. */
    private final ArrayDeque<Held> held = new ArrayDeque<>();
    /** Guarded by this. */
    private long heldBytes;
    /** Guarded by this: entries released before their grace ended because the budget was full. */
    private long releasedEarly;

    /**
     * @param graceNanos  how long a slot stays held after its session closed; 0 releases at once
     * @param budgetBytes slot bytes held at most
     * @param slotBytes   the bytes of the slot a reservation holds (its size class), counted against the budget
     * @param release     gives a slot back (aborts the reservation); called once per entry
     */
    PublishQuarantine(long graceNanos, long budgetBytes, ToLongFunction<Reservation> slotBytes,
                      Consumer<Reservation> release) {
        if (graceNanos < 0) throw new IllegalArgumentException("graceNanos must be >= 0: " + graceNanos);
        if (budgetBytes < 0) throw new IllegalArgumentException("budgetBytes must be >= 0: " + budgetBytes);
        this.graceNanos = graceNanos;
        this.budgetBytes = budgetBytes;
        this.slotBytes = Objects.requireNonNull(slotBytes, "slotBytes");
        this.release = Objects.requireNonNull(release, "release");
    }

    /**
     * Takes an unsealed reservation of a session that closed at {@code nowNanos}. With no grace, or
     * a slot larger than the whole budget, releases it at once; otherwise releases the oldest
     * entries early until it fits.
     */
    synchronized void hold(Reservation reservation, long nowNanos) {
        long bytes = slotBytes.applyAsLong(reservation);
        if (graceNanos == 0 || bytes > budgetBytes) {
            release.accept(reservation);
            if (graceNanos > 0) releasedEarly++;
            return;
        }
        while (heldBytes + bytes > budgetBytes) {
            releaseHead();
            releasedEarly++;
        }
        held.addLast(new Held(reservation, bytes, nowNanos + graceNanos));
        heldBytes += bytes;
    }

    /** Releases every entry whose grace ended at {@code nowNanos}; returns how many. */
    synchronized int onTick(long nowNanos) {
        int n = 0;
        while (!held.isEmpty() && held.peekFirst().releaseAtNanos() - nowNanos <= 0) {
            releaseHead();
            n++;
        }
        return n;
    }

    /** Releases everything now (Manager shutdown); returns how many. */
    synchronized int releaseAll() {
        int n = held.size();
        while (!held.isEmpty()) releaseHead();
        return n;
    }

    private void releaseHead() {
        Held h = held.removeFirst();
        heldBytes -= h.slotBytes();
        release.accept(h.reservation());
    }

    synchronized long heldBytes() {
        return heldBytes;
    }

    synchronized int heldSlots() {
        return held.size();
    }

    synchronized long releasedEarly() {
        return releasedEarly;
    }
}
