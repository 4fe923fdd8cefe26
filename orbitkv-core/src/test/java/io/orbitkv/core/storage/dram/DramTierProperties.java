package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterTry;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;
import net.jqwik.api.state.Transformer;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;

import static io.orbitkv.core.storage.dram.TestImages.hasCanary;
import static io.orbitkv.core.storage.dram.TestImages.writeCanary;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Action chains over a real {@link DramTier} (files, mapping, Caffeine) against a model of what
 * is resident, reserved and leased. Caffeine may evict at any step, so the model learns about
 * removals from the residency stream, which the chain therefore also checks: events must agree
 * with the commits and with what the index contains.
 *
 * <p>After every step: the byte accounting equals the model's and sums to the capacity; no two
 * live images share a slot; every held lease still reads its own key's canary (no slot reused
 * while leased); the index contains exactly the model's resident keys.
 */
class DramTierProperties {

    private static final int K4 = 4096;
    private static final int K16 = 16 * 1024;
    private static final List<SizeClass> CLASSES = List.of(new SizeClass(K4, 6), new SizeClass(K16, 4));
    private static final int KEYS = 10;

    private final List<Model> opened = new ArrayList<>();

    record Image(long imageId, SlotRef ref) {
    }

    static final class Model {
        final Path dir;
        final ResidencyStream stream = new ResidencyStream(4096);
        final DramTier tier;
        final Map<StateKey, Image> resident = new HashMap<>();
        final List<Reservation> open = new ArrayList<>();
        final List<Lease> held = new ArrayList<>();
        final Map<Long, SlotRef> refs = new HashMap<>();
        long nextEvent = 1;

        Model() {
            try {
                dir = Files.createTempDirectory("dram-props");
                tier = DramTier.open(new DramTierConfig(dir, "props", CLASSES, 2L * K16, K16, 16), stream,
                        new SimpleMeterRegistry());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        /** Applies the residency events of the last step to the model, checking each. */
        void sync(Long expectedAdded, StateKey addedKey) {
            ResidencyStream.Batch batch = stream.readFrom(nextEvent, 10_000);
            assertThat(batch.gap()).isFalse();
            boolean sawAdded = false;
            for (ResidencyEvent e : batch.events()) {
                assertThat(e.medium()).isEqualTo(ResidencyEvent.Medium.DRAM);
                switch (e.kind()) {
                    case ADDED -> {
                        assertThat(e.generation()).as("unexpected ADDED %s", e).isEqualTo(expectedAdded);
                        assertThat(e.key()).isEqualTo(addedKey);
                        assertThat(resident).doesNotContainKey(e.key());
                        resident.put(e.key(), new Image(e.generation(), refs.get(e.generation())));
                        sawAdded = true;
                    }
                    case REMOVED -> {
                        Image was = resident.remove(e.key());
                        assertThat(was).as("REMOVED of a non-resident key %s", e).isNotNull();
                        assertThat(was.imageId()).isEqualTo(e.generation());
                    }
                }
            }
            assertThat(sawAdded).isEqualTo(expectedAdded != null);
            nextEvent = batch.nextSequence();
        }

        void sync() {
            sync(null, null);
        }

        void close() {
            tier.close();
            try (Stream<Path> files = Files.walk(dir)) {
                files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    @AfterTry
    void closeTiers() {
        opened.forEach(Model::close);
        opened.clear();
    }

    @Property(tries = 150)
    void tierMatchesItsModelAfterAnySequence(@ForAll("chains") ActionChain<Model> chain) {
        chain.withInvariant("accounting", DramTierProperties::accountingMatches)
                .withInvariant("exclusive slots", DramTierProperties::liveImagesHaveDistinctSlots)
                .withInvariant("leases read their own bytes", DramTierProperties::leasesReadTheirCanary)
                .withInvariant("index", DramTierProperties::indexMatches)
                .run();
    }

    @Provide
    Arbitrary<ActionChain<Model>> chains() {
        return ActionChain.<Model>startWith(() -> {
                    Model m = new Model();
                    opened.add(m);
                    return m;
                })
                .withAction(4, new Reserve())
                .withAction(3, new Commit())
                .withAction(1, new Abort())
                .withAction(3, new Acquire())
                .withAction(2, new Release())
                .withAction(1, new Evict())
                .withMaxTransformations(60);
    }

    private static long slotBytes(SlotRef ref) {
        return CLASSES.get(ref.classIndex()).slotBytes();
    }

    static void accountingMatches(Model m) {
        DramUsage u = m.tier.usage();
        Map<Long, SlotRef> leasedImages = new HashMap<>();
        m.held.forEach(l -> leasedImages.put(l.imageId(), l.slotRef()));
        Set<Long> residentIds = new HashSet<>();
        m.resident.values().forEach(i -> residentIds.add(i.imageId()));

        assertThat(u.reservedBytes()).isEqualTo(m.open.stream().mapToLong(r -> slotBytes(r.slotRef())).sum());
        assertThat(u.usedBytes()).isEqualTo(m.resident.values().stream().mapToLong(i -> slotBytes(i.ref())).sum());
        assertThat(u.evictedLeasedBytes()).isEqualTo(leasedImages.entrySet().stream()
                .filter(e -> !residentIds.contains(e.getKey())).mapToLong(e -> slotBytes(e.getValue())).sum());
        assertThat(u.leasedBytes()).isEqualTo(leasedImages.values().stream().mapToLong(DramTierProperties::slotBytes).sum());
        assertThat(u.leases()).isEqualTo(m.held.size());
        assertThat(u.residentImages()).isEqualTo(m.resident.size());
        assertThat(u.freeBytes() + u.reservedBytes() + u.usedBytes() + u.evictedLeasedBytes())
                .isEqualTo(u.capacityBytes());
        assertThat(u.usedBytes()).isLessThanOrEqualTo(m.tier.config().indexWeightBytes());
    }

    static void liveImagesHaveDistinctSlots(Model m) {
        Map<Long, SlotRef> live = new HashMap<>();
        m.open.forEach(r -> live.put(r.imageId(), r.slotRef()));
        m.resident.values().forEach(i -> live.put(i.imageId(), i.ref()));
        m.held.forEach(l -> live.put(l.imageId(), l.slotRef()));
        Map<String, Long> bySlot = new HashMap<>();
        live.forEach((id, ref) -> {
            Long other = bySlot.put(ref.classIndex() + "@" + ref.offsetBytes(), id);
            assertThat(other).as("images %d and %d share slot %s", id, other, ref).isNull();
        });
    }

    static void leasesReadTheirCanary(Model m) {
        for (Lease l : m.held) {
            assertThat(hasCanary(l.segment(), l.key())).as("lease %s reads its own bytes", l).isTrue();
        }
    }

    static void indexMatches(Model m) {
        for (int i = 0; i < KEYS; i++) {
            StateKey k = TestImages.key(i);
            assertThat(m.tier.contains(k)).as("contains %s", k).isEqualTo(m.resident.containsKey(k));
        }
    }

    static final class Reserve implements Action.Independent<Model> {
        @Override
        public Arbitrary<Transformer<Model>> transformer() {
            return Combinators.combine(Arbitraries.integers().between(0, KEYS - 1),
                            Arbitraries.integers().between(1, K16))
                    .as((k, len) -> Transformer.mutate("reserve key " + k + " len " + len, m -> {
                        StateKey key = TestImages.key(k);
                        Image before = m.resident.get(key);
                        ReserveResult r = m.tier.reserve(key, 1, len);
                        m.sync();
                        switch (r) {
                            case Reservation res -> {
                                assertThat(before).isNull();
                                assertThat(res.slotRef().classIndex()).isEqualTo(len <= K4 ? 0 : 1);
                                writeCanary(res.segment(), key);
                                m.open.add(res);
                                m.refs.put(res.imageId(), res.slotRef());
                            }
                            case ReserveResult.AlreadyResident(long imageId) -> {
                                assertThat(before).isNotNull();
                                assertThat(imageId).isEqualTo(before.imageId());
                            }
                            case ReserveResult.Full(ReserveResult.FullReason reason) ->
                                    assertThat(reason).isNotEqualTo(ReserveResult.FullReason.NO_SIZE_CLASS);
                        }
                    }));
        }
    }

    /** Picks one element of a list (the action only runs when it is non-empty). */
    abstract static class OnElement<T> implements Action.Dependent<Model> {
        abstract List<T> elements(Model m);

        abstract String name();

        abstract void apply(Model m, T element);

        @Override
        public boolean precondition(Model m) {
            return !elements(m).isEmpty();
        }

        @Override
        public Arbitrary<Transformer<Model>> transformer(Model m) {
            return Arbitraries.integers().between(0, elements(m).size() - 1)
                    .map(i -> Transformer.mutate(name() + " #" + i, state -> apply(state, elements(state).get(i))));
        }
    }

    static final class Commit extends OnElement<Reservation> {
        List<Reservation> elements(Model m) { return m.open; }

        String name() { return "commit"; }

        void apply(Model m, Reservation r) {
            m.open.remove(r);
            Image before = m.resident.get(r.key());
            CommitResult c = m.tier.commit(r);
            if (before == null) {
                assertThat(c).isEqualTo(new CommitResult.Inserted(r.imageId()));
                m.sync(r.imageId(), r.key());
            } else {
                assertThat(c).isEqualTo(new CommitResult.Duplicate(before.imageId()));
                m.sync();
            }
            assertThat(m.tier.commit(r)).isEqualTo(new CommitResult.NotOpen());
        }
    }

    static final class Abort extends OnElement<Reservation> {
        List<Reservation> elements(Model m) { return m.open; }

        String name() { return "abort"; }

        void apply(Model m, Reservation r) {
            m.open.remove(r);
            assertThat(m.tier.abort(r)).isTrue();
            assertThat(m.tier.abort(r)).isFalse();
            m.sync();
        }
    }

    static final class Release extends OnElement<Lease> {
        List<Lease> elements(Model m) { return m.held; }

        String name() { return "release (twice)"; }

        void apply(Model m, Lease l) {
            m.held.remove(l);
            assertThat(l.release()).isEqualTo(ReleaseResult.RELEASED);
            assertThat(l.release()).isEqualTo(ReleaseResult.ALREADY_RELEASED);
            m.sync();
        }
    }

    static final class Acquire implements Action.Independent<Model> {
        @Override
        public Arbitrary<Transformer<Model>> transformer() {
            return Arbitraries.integers().between(0, KEYS - 1).map(k -> Transformer.mutate("acquire key " + k, m -> {
                StateKey key = TestImages.key(k);
                Image before = m.resident.get(key);
                AcquireResult a = m.tier.acquire(key, 1);
                m.sync();
                switch (a) {
                    case Lease l -> {
                        assertThat(before).isNotNull();
                        assertThat(l.imageId()).isEqualTo(before.imageId());
                        assertThat(l.slotRef()).isEqualTo(before.ref());
                        m.held.add(l);
                    }
                    case AcquireResult.Miss miss -> assertThat(m.resident).doesNotContainKey(miss.key());
                }
            }));
        }
    }

    static final class Evict implements Action.Independent<Model> {
        @Override
        public Arbitrary<Transformer<Model>> transformer() {
            return Arbitraries.integers().between(0, KEYS - 1).map(k -> Transformer.mutate("evict key " + k, m -> {
                StateKey key = TestImages.key(k);
                boolean wasResident = m.resident.containsKey(key);
                assertThat(m.tier.evict(key)).isEqualTo(wasResident);
                m.sync();
                assertThat(m.resident).doesNotContainKey(key);
            }));
        }
    }
}
