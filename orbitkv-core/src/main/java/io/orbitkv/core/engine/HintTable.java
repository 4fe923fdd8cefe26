package io.orbitkv.core.engine;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.dram.HeldImage;
import io.orbitkv.core.storage.dram.ValueHint;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.HintKind;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * HINT (protocol §5.12): pins with their deadlines and per-namespace pinned-byte budgets, and the
 * value hints and drops that pass straight to the tiers. One per Manager.
 *
 * <p>Every hint acts in the session's namespace only: a page counts as present only when the DRAM
 * image (or, for DROP, the SSD extent) carries the session's namespace id (digest); an image of
 * the same key bytes in another namespace is treated as absent and counted {@code not_resident},
 * so the reply for another namespace's key is the reply for a key nobody holds. The budget is
 * consulted only after the page was found in the namespace, so it reveals nothing either.
 *
 * <p>Pins belong to the namespace, not to the session that made them: they end at their deadline
 * ({@code min(duration_millis, pinMaxNanos)} after the PIN; a repeated PIN extends it), at an
 * UNPIN or DROP of the page by any session of the namespace, or when the image leaves DRAM
 * otherwise (a displacement; found at the next PIN or expiry). A PIN does not outlive its bound
 * when its session goes; a system prompt pinned for many sessions stays pinned when the one that
 * asked disconnects.
 *
 * <p>Thread model: {@link #apply} runs on session threads, {@link #onTick} on the Manager's tick
 * thread (or a test's); the tables are guarded by {@code lock}, held over a whole request (at
 * most {@code maxPagesPerQuery} pages, each a few index and slot-table operations). Lock order:
 * this lock, then the tier's locks; the tier never calls back.
 *
 * <p>Invariants: {@code pins.size() == byDeadline.size() <= maxPins}; per namespace, the pinned
 * bytes are the slot bytes of its pins and at most {@code pinnedBytesPerNamespace}; every pin
 * record holds its image ({@link io.orbitkv.core.storage.dram.DramTier#hold}) until it is removed
 * from the table, and is removed before {@link #close()} returns.
 *
 * <p>Design note: a hold is a flag on the slot, not a lease, so a pinned page costs no lease-table
 * place and a DROP removes it at once (its slot is freed then, or after the leases of readers).
 * Expiry is a tick duty over a deadline-ordered set (at most {@code maxPins} entries, 100 ms
 * resolution) rather than one timer per pin.
 */
final class HintTable implements AutoCloseable {

    /** Why a pin ended ({@code orbitkv_manager_hint_pins_ended_total}, label {@code reason}). */
    enum EndReason { EXPIRED, UNPINNED, DROPPED, EVICTED, SHUTDOWN }

    /** How one page of a HINT was answered (label {@code outcome}). */
    enum Outcome { APPLIED, NOT_RESIDENT, REFUSED_BUDGET }

    private record PinKey(int namespaceId, StateKey key) {
    }

    private static final class Pin {
        final PinKey name;
        final HeldImage image;
        final long seq;
        long deadlineNanos;

        Pin(PinKey name, HeldImage image, long seq, long deadlineNanos) {
            this.name = name;
            this.image = image;
            this.seq = seq;
            this.deadlineNanos = deadlineNanos;
        }
    }

    private final TieredStore store;
    private final LongSupplier nanoClock;
    private volatile HintBounds bounds;
    private final Object lock = new Object();
    // @GuardedBy("lock") below
    private final Map<PinKey, Pin> pins = new HashMap<>();
    private final TreeSet<Pin> byDeadline = new TreeSet<>(
            Comparator.<Pin>comparingLong(p -> p.deadlineNanos).thenComparingLong(p -> p.seq));
    private final Map<Integer, Long> pinnedBytes = new HashMap<>();
    private long totalPinnedBytes;
    private long nextSeq;

    private final List<Meter> meters = new ArrayList<>();
    private final MeterRegistry registry;
    private final Map<HintKind, Map<Outcome, Counter>> pages = new EnumMap<>(HintKind.class);
    private final Map<EndReason, Counter> ended = new EnumMap<>(EndReason.class);

    HintTable(TieredStore store, HintBounds bounds, LongSupplier nanoClock, MeterRegistry registry) {
        this.store = Objects.requireNonNull(store, "store");
        this.bounds = Objects.requireNonNull(bounds, "bounds");
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
        this.registry = Objects.requireNonNull(registry, "registry");
        for (HintKind kind : HintKind.values()) {
            Map<Outcome, Counter> byOutcome = new EnumMap<>(Outcome.class);
            for (Outcome o : Outcome.values()) {
                byOutcome.put(o, add(Counter.builder("orbitkv.manager.hint.pages").tag("kind", lower(kind))
                        .tag("outcome", lower(o)).description("pages named by HINT requests, by kind and outcome")
                        .register(registry)));
            }
            pages.put(kind, byOutcome);
        }
        for (EndReason r : EndReason.values()) {
            ended.put(r, add(Counter.builder("orbitkv.manager.hint.pins.ended").tag("reason", lower(r))
                    .description("HINT pins that ended, by why").register(registry)));
        }
        add(Gauge.builder("orbitkv.manager.hint.pins", this, HintTable::pinCount)
                .description("pages pinned by HINT now").register(registry));
        add(Gauge.builder("orbitkv.manager.hint.pinned.bytes", this, HintTable::pinnedBytes).baseUnit("bytes")
                .description("DRAM slot bytes pinned by HINT now, all namespaces").register(registry));
    }

    /** Replaces the bounds (the daemon's configuration); before traffic. */
    void bounds(HintBounds next) {
        this.bounds = Objects.requireNonNull(next, "bounds");
    }

    /**
     * Applies {@code hint} in {@code scope}'s namespace: HINTED with the per-page counts, or ERROR
     * NAMESPACE_MISMATCH (a group the contract lacks; nothing is applied).
     */
    Reply apply(SessionScope scope, Request.Hint hint) {
        for (Request.QueryGroup g : hint.groups()) {
            if (scope.contract().group(g.groupId()).isEmpty()) {
                return new Reply.Error(ErrorCode.NAMESPACE_MISMATCH, "group " + g.groupId() + " is not in the contract");
            }
        }
        int[] counts = new int[Outcome.values().length];
        HintBounds b = bounds;
        long durationNanos = Math.min(TimeUnit.MILLISECONDS.toNanos(hint.durationMillis()), b.pinMaxNanos());
        synchronized (lock) {
            long now = nanoClock.getAsLong();
            for (Request.QueryGroup g : hint.groups()) {
                for (int i = 0; i < g.hashes().count(); i++) {
                    StateKey key = g.form() == KeyForm.BLOCK_HASH
                            ? StateKeys.forBlockHash(scope.digestBytes(), g.groupId(), g.hashes().get(i))
                            : g.hashes().key(i);
                    PinKey name = new PinKey(scope.namespaceId(), key);
                    Outcome o = switch (hint.kind()) {
                        case PIN -> pinLocked(name, now + durationNanos, b);
                        case UNPIN -> endLocked(name, EndReason.UNPINNED) ? Outcome.APPLIED : Outcome.NOT_RESIDENT;
                        case RETAIN -> valueHint(name, ValueHint.RETAIN);
                        case DEMOTE -> valueHint(name, ValueHint.DEMOTE);
                        case DROP -> {
                            endLocked(name, EndReason.DROPPED);
                            yield store.drop(key, scope.namespaceId(), scope.digest()) ? Outcome.APPLIED
                                    : Outcome.NOT_RESIDENT;
                        }
                    };
                    counts[o.ordinal()]++;
                }
            }
        }
        Map<Outcome, Counter> byOutcome = pages.get(hint.kind());
        for (Outcome o : Outcome.values()) if (counts[o.ordinal()] > 0) byOutcome.get(o).increment(counts[o.ordinal()]);
        return new Reply.Hinted(hint.kind(), counts[Outcome.APPLIED.ordinal()], counts[Outcome.NOT_RESIDENT.ordinal()],
                counts[Outcome.REFUSED_BUDGET.ordinal()]);
    }

    private Outcome valueHint(PinKey name, ValueHint value) {
        return store.dram().hint(name.key(), name.namespaceId(), value) ? Outcome.APPLIED : Outcome.NOT_RESIDENT;
    }

    // @GuardedBy("lock")
    private Outcome pinLocked(PinKey name, long deadlineNanos, HintBounds b) {
        Pin existing = pins.get(name);
        if (existing != null) {
            if (store.dram().holds(existing.image)) {
                if (deadlineNanos > existing.deadlineNanos) {
                    byDeadline.remove(existing);
                    existing.deadlineNanos = deadlineNanos;
                    byDeadline.add(existing);
                }
                return Outcome.APPLIED;
            }
            endLocked(name, EndReason.EVICTED);
        }
        HeldImage held = store.dram().hold(name.key(), name.namespaceId()).orElse(null);
        if (held == null) return Outcome.NOT_RESIDENT;
        long used = pinnedBytes.getOrDefault(name.namespaceId(), 0L);
        if (used + held.slotBytes() > b.pinnedBytesPerNamespace() || pins.size() >= b.maxPins()) {
            store.dram().releaseHold(held);
            return Outcome.REFUSED_BUDGET;
        }
        Pin pin = new Pin(name, held, nextSeq++, deadlineNanos);
        pins.put(name, pin);
        byDeadline.add(pin);
        pinnedBytes.put(name.namespaceId(), used + held.slotBytes());
        totalPinnedBytes += held.slotBytes();
        return Outcome.APPLIED;
    }

    /** Ends the pin of {@code name}, if any, counted under {@code reason}; true when there was one. */
    // @GuardedBy("lock")
    private boolean endLocked(PinKey name, EndReason reason) {
        Pin pin = pins.remove(name);
        if (pin == null) return false;
        byDeadline.remove(pin);
        long left = pinnedBytes.get(name.namespaceId()) - pin.image.slotBytes();
        if (left == 0) pinnedBytes.remove(name.namespaceId());
        else pinnedBytes.put(name.namespaceId(), left);
        totalPinnedBytes -= pin.image.slotBytes();
        store.dram().releaseHold(pin.image);
        ended.get(reason).increment();
        return true;
    }

    /** Ends every pin whose deadline is at or before {@code nowNanos}; returns how many. A tick duty. */
    long onTick(long nowNanos) {
        long n = 0;
        synchronized (lock) {
            while (!byDeadline.isEmpty() && byDeadline.first().deadlineNanos - nowNanos <= 0) {
                endLocked(byDeadline.first().name, EndReason.EXPIRED);
                n++;
            }
        }
        return n;
    }

    /** Pinned pages now. */
    int pinCount() {
        synchronized (lock) {
            return pins.size();
        }
    }

    /** Pinned pages of {@code namespaceId} now; walks the pins (at most {@code maxPins}). */
    int pinCount(int namespaceId) {
        synchronized (lock) {
            int n = 0;
            for (PinKey k : pins.keySet()) if (k.namespaceId() == namespaceId) n++;
            return n;
        }
    }

    /** Slot bytes pinned now, all namespaces. */
    long pinnedBytes() {
        synchronized (lock) {
            return totalPinnedBytes;
        }
    }

    /** Slot bytes {@code namespaceId} has pinned now. */
    long pinnedBytes(int namespaceId) {
        synchronized (lock) {
            return pinnedBytes.getOrDefault(namespaceId, 0L);
        }
    }

    /** Ends every pin (the Manager is closing) and removes the meters. Idempotent. */
    @Override
    public void close() {
        synchronized (lock) {
            for (PinKey name : List.copyOf(pins.keySet())) endLocked(name, EndReason.SHUTDOWN);
        }
        for (Meter m : meters) registry.remove(m);
        meters.clear();
    }

    private <M extends Meter> M add(M meter) {
        meters.add(meter);
        return meter;
    }

    private static String lower(Enum<?> e) {
        return e.name().toLowerCase(Locale.ROOT);
    }
}
