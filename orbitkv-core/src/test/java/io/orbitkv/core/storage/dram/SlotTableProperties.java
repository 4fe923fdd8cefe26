package io.orbitkv.core.storage.dram;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;
import net.jqwik.api.state.Transformer;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Action chains over the slot allocator and its {@link LruPolicy} against a plain model: after
 * every step the byte accounting matches the model and sums to the capacity, no two live slots
 * overlap, no slot is handed out while live (pinned ones included), the policy's events agree
 * with the slots' states and its recency list with the model's; each victim is the model's, and
 * a leased image is never a class victim.
 */
class SlotTableProperties {

    private static final List<SizeClass> CLASSES =
            List.of(new SizeClass(4096, 5), new SizeClass(8192, 3), new SizeClass(12288, 2));
    private static final long RESERVED_BUDGET = 3 * 12288;
    private static final long EVICTED_LEASED_BUDGET = 8192;

    /** The table and what it should contain: slot to image id per state, and lease counts. */
    static final class Model {
        final LruPolicy lru = new LruPolicy(CLASSES);
        final EventCheck policy = new EventCheck(lru);
        final SlotTable table = new SlotTable(CLASSES, RESERVED_BUDGET, EVICTED_LEASED_BUDGET, policy);
        /** The resident slots from least to most recently inserted or used. */
        final List<Integer> recency = new ArrayList<>();
        final Map<Integer, Long> reserved = new HashMap<>();
        final Map<Integer, Long> resident = new HashMap<>();
        final Map<Integer, Long> evictedLeased = new HashMap<>();
        final Map<Integer, Integer> leases = new HashMap<>();
        long lastImageId;
        /** What the table's event counts should say: publishes, pins that were uses, retirements by cause. */
        long publishes;
        long usePins;
        final Map<DramMetrics.EvictionCause, Long> retirements = new java.util.EnumMap<>(DramMetrics.EvictionCause.class);

        long bytes(Map<Integer, Long> slots) {
            return slots.keySet().stream().mapToLong(table::slotBytes).sum();
        }

        boolean live(int slot) {
            return reserved.containsKey(slot) || resident.containsKey(slot) || evictedLeased.containsKey(slot);
        }

        int freeSlotsOf(int sizeClass) {
            int free = 0;
            for (int s = 0; s < table.slotCount(); s++) {
                if (table.classOf(s) == sizeClass && !live(s)) free++;
            }
            return free;
        }

        void used(int slot) {
            recency.remove(Integer.valueOf(slot));
            recency.add(slot);
        }

        long imageOf(int slot) {
            Long id = resident.get(slot);
            return id != null ? id : evictedLeased.get(slot);
        }

        @Override
        public String toString() {
            return "Model[reserved=" + reserved + ", resident=" + resident + ", evictedLeased=" + evictedLeased
                    + ", leases=" + leases + "]";
        }
    }

    @Property(tries = 300)
    void accountingAndExclusivityHoldAfterAnySequence(@ForAll("chains") ActionChain<Model> chain) {
        chain.withInvariant("accounting", SlotTableProperties::accountingMatches)
                .withInvariant("no overlap", SlotTableProperties::liveSlotsDoNotOverlap)
                .run();
    }

    @Provide
    Arbitrary<ActionChain<Model>> chains() {
        return ActionChain.startWith(Model::new)
                .withAction(3, new Reserve())
                .withAction(1, new Abort())
                .withAction(2, new Publish())
                .withAction(2, new Pin())
                .withAction(2, new Unpin())
                .withAction(2, new Retire())
                .withAction(2, new RetireHandingOver())
                .withAction(1, new PinStale())
                .withAction(1, new PinUse())
                .withAction(2, new ClockVictim())
                .withAction(1, new Republish())
                .withAction(2, new BoundVictim())
                .withAction(2, new ClassVictim())
                .withMaxTransformations(60);
    }

    static void accountingMatches(Model m) {
        DramUsage u = m.table.usage();
        long capacity = CLASSES.stream().mapToLong(SizeClass::capacityBytes).sum();
        assertThat(u.capacityBytes()).isEqualTo(capacity);
        assertThat(u.reservedBytes()).isEqualTo(m.bytes(m.reserved));
        assertThat(u.usedBytes()).isEqualTo(m.bytes(m.resident));
        assertThat(u.evictedLeasedBytes()).isEqualTo(m.bytes(m.evictedLeased));
        assertThat(u.freeBytes() + u.reservedBytes() + u.usedBytes() + u.evictedLeasedBytes()).isEqualTo(capacity);
        assertThat(u.leases()).isEqualTo(m.leases.values().stream().mapToLong(Integer::longValue).sum());
        assertThat(u.leasedBytes()).isEqualTo(m.leases.keySet().stream().mapToLong(m.table::slotBytes).sum());
        assertThat(u.residentImages()).isEqualTo(m.resident.size());
        assertThat(m.lru.recencyOrder(m.table)).as("the recency list is the model's").isEqualTo(m.recency);
        assertThat(m.policy.inserted).as("the policy was told of exactly the resident slots")
                .isEqualTo(m.resident.keySet());
        assertThat(m.policy.pinned).as("the policy was told of exactly the leased resident slots")
                .isEqualTo(m.resident.keySet().stream().filter(m.leases::containsKey).collect(java.util.stream.Collectors.toSet()));
        assertThat(m.lru.recencyOrder(m.table)).as("the recency list holds exactly the resident slots")
                .doesNotHaveDuplicates().containsExactlyInAnyOrderElementsOf(m.resident.keySet());
        assertThat(m.table.publishes()).as("inserts").isEqualTo(m.publishes);
        assertThat(m.table.usePins()).as("hits: pins that are uses, not quiet pins").isEqualTo(m.usePins);
        for (DramMetrics.EvictionCause cause : DramMetrics.EvictionCause.values()) {
            assertThat(m.table.retirements(cause)).as("evictions, cause " + cause)
                    .isEqualTo(m.retirements.getOrDefault(cause, 0L));
        }
    }

    static void liveSlotsDoNotOverlap(Model m) {
        record Range(int sizeClass, long from, long to) {
        }
        List<Range> ranges = new ArrayList<>();
        for (int s = 0; s < m.table.slotCount(); s++) {
            if (!m.live(s)) continue;
            int bytes = m.table.slotBytes(s);
            long from = DramArenaLayout.FIRST_SLOT_OFFSET + (long) m.table.slotInClass(s) * bytes;
            ranges.add(new Range(m.table.classOf(s), from, from + bytes));
            assertThat(m.table.state(s)).as("slot %d state", s).isNotEqualTo(SlotTable.FREE);
        }
        for (int i = 0; i < ranges.size(); i++) {
            for (int j = i + 1; j < ranges.size(); j++) {
                Range a = ranges.get(i);
                Range b = ranges.get(j);
                boolean overlap = a.sizeClass() == b.sizeClass() && a.from() < b.to() && b.from() < a.to();
                assertThat(overlap).as("%s overlaps %s", a, b).isFalse();
            }
        }
    }

    static final class Reserve implements Action.Independent<Model> {
        @Override
        public Arbitrary<Transformer<Model>> transformer() {
            return Arbitraries.integers().between(0, CLASSES.size() - 1).map(c -> Transformer.mutate("reserve class " + c, m -> {
                long bytes = CLASSES.get(c).slotBytes();
                SlotTable.Allocation a = m.table.reserve(c);
                ReserveResult.FullReason expected = m.bytes(m.evictedLeased) > EVICTED_LEASED_BUDGET
                        ? ReserveResult.FullReason.EVICTED_LEASED_BUDGET
                        : m.bytes(m.reserved) + bytes > RESERVED_BUDGET
                        ? ReserveResult.FullReason.RESERVED_BUDGET
                        : m.freeSlotsOf(c) == 0 ? ReserveResult.FullReason.NO_FREE_SLOT : null;
                switch (a) {
                    case SlotTable.Allocation.Allocated(int slot, long imageId) -> {
                        assertThat(expected).as("allocation refused by the model").isNull();
                        assertThat(m.table.classOf(slot)).isEqualTo(c);
                        assertThat(m.live(slot)).as("slot %d handed out while live", slot).isFalse();
                        assertThat(m.leases).as("slot %d handed out while pinned", slot).doesNotContainKey(slot);
                        assertThat(imageId).isGreaterThan(m.lastImageId);
                        m.lastImageId = imageId;
                        m.reserved.put(slot, imageId);
                    }
                    case SlotTable.Allocation.Refused(ReserveResult.FullReason reason) ->
                            assertThat(reason).isEqualTo(expected);
                }
            }));
        }
    }

    /** Picks one slot of {@code slots} (the action only runs when it is non-empty). */
    abstract static class OnSlot implements Action.Dependent<Model> {
        abstract Map<Integer, ?> slots(Model m);

        abstract String name();

        abstract void apply(Model m, int slot);

        @Override
        public boolean precondition(Model m) {
            return !slots(m).isEmpty();
        }

        @Override
        public Arbitrary<Transformer<Model>> transformer(Model m) {
            return Arbitraries.of(List.copyOf(slots(m).keySet()))
                    .map(slot -> Transformer.mutate(name() + " " + slot, state -> apply(state, slot)));
        }
    }

    static final class Abort extends OnSlot {
        Map<Integer, ?> slots(Model m) { return m.reserved; }

        String name() { return "abort"; }

        void apply(Model m, int slot) {
            m.table.abort(slot, m.reserved.remove(slot));
        }
    }

    static final class Publish extends OnSlot {
        Map<Integer, ?> slots(Model m) { return m.reserved; }

        String name() { return "publish"; }

        void apply(Model m, int slot) {
            long id = m.reserved.remove(slot);
            m.table.publish(slot, id);
            m.resident.put(slot, id);
            m.recency.add(slot);
            m.publishes++;
        }
    }

    static final class Pin extends OnSlot {
        Map<Integer, ?> slots(Model m) { return m.resident; }

        String name() { return "pin"; }

        void apply(Model m, int slot) {
            assertThat(m.table.pin(slot, m.resident.get(slot))).isTrue();
            m.leases.merge(slot, 1, Integer::sum);
        }
    }

    static final class Unpin extends OnSlot {
        Map<Integer, ?> slots(Model m) { return m.leases; }

        String name() { return "unpin"; }

        void apply(Model m, int slot) {
            m.table.unpin(slot, m.imageOf(slot));
            if (m.leases.merge(slot, -1, Integer::sum) == 0) {
                m.leases.remove(slot);
                m.evictedLeased.remove(slot);
            }
        }
    }

    static final class Retire extends OnSlot {
        Map<Integer, ?> slots(Model m) { return m.resident; }

        String name() { return "retire"; }

        void apply(Model m, int slot) {
            long id = m.resident.remove(slot);
            m.recency.remove(Integer.valueOf(slot));
            boolean freed = m.table.retire(slot, id, DramMetrics.EvictionCause.EXPLICIT);
            m.retirements.merge(DramMetrics.EvictionCause.EXPLICIT, 1L, Long::sum);
            assertThat(freed).isEqualTo(!m.leases.containsKey(slot));
            if (!freed) m.evictedLeased.put(slot, id);
        }
    }

    /**
     * An eviction handed to the listener: keeps a lease (the slot parks) when the slot is leased
     * already or its bytes fit the evicted-leased budget, else retires it free without one.
     */
    static final class RetireHandingOver extends OnSlot {
        Map<Integer, ?> slots(Model m) { return m.resident; }

        String name() { return "retire handing over"; }

        void apply(Model m, int slot) {
            long id = m.resident.remove(slot);
            m.recency.remove(Integer.valueOf(slot));
            boolean fits = m.leases.containsKey(slot)
                    || m.bytes(m.evictedLeased) + m.table.slotBytes(slot) <= EVICTED_LEASED_BUDGET;
            assertThat(m.table.retireHandingOver(slot, id, DramMetrics.EvictionCause.POLICY)).isEqualTo(fits);
            m.retirements.merge(DramMetrics.EvictionCause.POLICY, 1L, Long::sum);
            if (fits) {
                m.leases.merge(slot, 1, Integer::sum);
                m.evictedLeased.put(slot, id);
            }
        }
    }

    /** A lookup that counts as a use: the same lease, plus the mark the clock hand passes over once. */
    static final class PinUse extends OnSlot {
        Map<Integer, ?> slots(Model m) { return m.resident; }

        String name() { return "pin use"; }

        void apply(Model m, int slot) {
            assertThat(m.table.pinUse(slot, m.resident.get(slot))).isTrue();
            m.leases.merge(slot, 1, Integer::sum);
            m.usePins++;
            m.used(slot);
        }
    }

    /**
     * The clock hand over a whole class: it names a RESIDENT, unleased slot of that class with the
     * image it holds iff the class has one, and changes no accounting.
     */
    static final class ClockVictim implements Action.Independent<Model> {
        @Override
        public Arbitrary<Transformer<Model>> transformer() {
            return Arbitraries.integers().between(0, CLASSES.size() - 1).map(c -> Transformer.mutate("clock class " + c, m -> {
                boolean candidate = m.resident.keySet().stream()
                        .anyMatch(s -> m.table.classOf(s) == c && !m.leases.containsKey(s));
                var victim = m.policy.fallbackVictim(m.table, c, CLASSES.get(c).slotCount());
                assertThat(victim.isPresent()).as("a victim iff the class has an unleased resident slot")
                        .isEqualTo(candidate);
                victim.ifPresent(v -> {
                    assertThat(m.table.classOf(v.slot())).isEqualTo(c);
                    assertThat(m.resident.get(v.slot())).as("victim slot %d holds a resident image", v.slot())
                            .isEqualTo(v.imageId());
                    assertThat(m.leases).doesNotContainKey(v.slot());
                });
            }));
        }
    }

    /** A lookup that raced with retirement: pinning an image id the slot no longer holds fails. */
    static final class PinStale implements Action.Independent<Model> {
        @Override
        public Arbitrary<Transformer<Model>> transformer() {
            return Arbitraries.integers().between(0, 9).map(slot -> Transformer.mutate("pin stale " + slot, m -> {
                Long current = m.resident.get(slot);
                long stale = current == null ? m.lastImageId + 1 : current - 1_000_000;
                assertThat(m.table.pin(slot, stale)).isFalse();
            }));
        }
    }

    /** A publish answered "already resident": a use for LRU, no lease. */
    static final class Republish extends OnSlot {
        Map<Integer, ?> slots(Model m) { return m.resident; }

        String name() { return "republish"; }

        void apply(Model m, int slot) {
            assertThat(m.table.touch(slot, m.resident.get(slot))).isTrue();
            m.used(slot);
        }
    }

    /**
     * The bound's victim within a window of the least recent: the first unleased one, else the
     * least recent even if leased; the image it names is the slot's resident one.
     */
    static final class BoundVictim implements Action.Independent<Model> {
        @Override
        public Arbitrary<Transformer<Model>> transformer() {
            return Arbitraries.integers().between(1, 6).map(window -> Transformer.mutate("bound victim, window " + window, m -> {
                Integer expected = m.recency.stream().limit(window).filter(s -> !m.leases.containsKey(s)).findFirst()
                        .orElse(m.recency.isEmpty() ? null : m.recency.getFirst());
                var victim = m.policy.boundVictim(m.table, window);
                assertThat(victim.map(EvictionPolicy.Victim::slot).orElse(null)).isEqualTo(expected);
                victim.ifPresent(v -> assertThat(v.imageId()).isEqualTo(m.resident.get(v.slot())));
            }));
        }
    }

    /** A class's victim: the least recent unleased image of the class within the window, never a leased one. */
    static final class ClassVictim implements Action.Independent<Model> {
        @Override
        public Arbitrary<Transformer<Model>> transformer() {
            return Arbitraries.integers().between(0, CLASSES.size() - 1).flatMap(c -> Arbitraries.integers().between(1, 6)
                    .map(window -> Transformer.<Model>mutate("class " + c + " victim, window " + window, m -> {
                        Integer expected = m.recency.stream().limit(window)
                                .filter(s -> m.table.classOf(s) == c && !m.leases.containsKey(s)).findFirst().orElse(null);
                        var victim = m.policy.classVictim(m.table, c, window);
                        assertThat(victim.map(EvictionPolicy.Victim::slot).orElse(null)).isEqualTo(expected);
                        victim.ifPresent(v -> {
                            assertThat(m.leases).as("a leased image is never a class victim").doesNotContainKey(v.slot());
                            assertThat(v.imageId()).isEqualTo(m.resident.get(v.slot()));
                        });
                    })));
        }
    }

    /**
     * Passes every call to an {@link LruPolicy} and checks the event contract on the way: an
     * insert or removal per resident period, pins and unpins only between them, each first lease
     * and last release exactly once.
     */
    static final class EventCheck implements EvictionPolicy {
        final LruPolicy delegate;
        final java.util.Set<Integer> inserted = new java.util.HashSet<>();
        final java.util.Set<Integer> pinned = new java.util.HashSet<>();

        EventCheck(LruPolicy delegate) {
            this.delegate = delegate;
        }

        @Override
        public com.github.benmanes.caffeine.cache.Cache<PageKey, ResidentImage> newIndex(
                SlotTable slots, long maxWeightBytes,
                java.util.function.BiConsumer<PageKey, ResidentImage> onEvicted) {
            return delegate.newIndex(slots, maxWeightBytes, onEvicted);
        }

        @Override
        public boolean indexEnforcesBound() {
            return delegate.indexEnforcesBound();
        }

        @Override
        public void onInsert(int slot) {
            assertThat(inserted.add(slot)).as("insert of resident slot %d", slot).isTrue();
            delegate.onInsert(slot);
        }

        @Override
        public void onAccess(int slot) {
            assertThat(inserted).as("access of slot %d", slot).contains(slot);
            delegate.onAccess(slot);
        }

        @Override
        public void onRepublish(int slot) {
            assertThat(inserted).as("republish of slot %d", slot).contains(slot);
            delegate.onRepublish(slot);
        }

        @Override
        public void hint(int slot, long imageId, ValueHint value) {
            assertThat(inserted).as("hint of slot %d", slot).contains(slot);
            delegate.hint(slot, imageId, value);
        }

        @Override
        public void onPin(int slot) {
            assertThat(inserted).as("pin of slot %d", slot).contains(slot);
            assertThat(pinned.add(slot)).as("second first-lease of slot %d", slot).isTrue();
            delegate.onPin(slot);
        }

        @Override
        public void onUnpin(int slot) {
            assertThat(inserted).as("unpin of slot %d", slot).contains(slot);
            assertThat(pinned.remove(slot)).as("unpin of unpinned slot %d", slot).isTrue();
            delegate.onUnpin(slot);
        }

        @Override
        public void onRemove(int slot) {
            assertThat(inserted.remove(slot)).as("removal of slot %d", slot).isTrue();
            pinned.remove(slot); // its leases may outlive it: no unpin event follows
            delegate.onRemove(slot);
        }

        @Override
        public java.util.Optional<Victim> boundVictim(SlotTable slots, int maxSlots) {
            return delegate.boundVictim(slots, maxSlots);
        }

        @Override
        public java.util.Optional<Victim> classVictim(SlotTable slots, int classIndex, int maxSlots) {
            return delegate.classVictim(slots, classIndex, maxSlots);
        }

        @Override
        public java.util.Optional<Victim> fallbackVictim(SlotTable slots, int classIndex, int maxSlots) {
            return delegate.fallbackVictim(slots, classIndex, maxSlots);
        }
    }
}
