package io.orbitkv.core.catalog;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent.Kind;
import io.orbitkv.core.storage.residency.ResidencyEvent.Medium;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * Rebuild by snapshot + delta replay equals the live state, and the whole source → owner →
 * requester path answers exactly what the sources hold once caught up (Unknown before, never a
 * false Absent). A key may be held by two namespaces on one node (two images, each with its own
 * ADDED and REMOVED): the node is a holder while either image is. jqwik prints the seed of a failing run; rerun with {@code @Property(seed = ...)}.
 */
class CatalogProperties {

    static final int KEY_SPACE = 24;

    /** One residency change: key index, medium, added or removed, in namespace 0 or 1. */
    record Op(int key, Medium medium, boolean added, int namespace) {
        /** The image this op adds or removes. */
        String image() {
            return key + "/" + medium + "/" + namespace;
        }
    }

    @Provide
    Arbitrary<Op> op() {
        return Combinators.combine(Arbitraries.integers().between(0, KEY_SPACE - 1), Arbitraries.of(Medium.class),
                Arbitraries.of(true, true, false), Arbitraries.of(0, 0, 0, 1)).as(Op::new);
    }

    /**
     * Turns ops into a consistent event stream as the tiers write it: one ADDED per image (an image
     * already resident is not added again), a remove only of what is resident, each image with its
     * own generation.
     */
    static List<ResidencyEvent> events(List<Op> ops) {
        Map<String, Long> resident = new HashMap<>();
        List<ResidencyEvent> out = new ArrayList<>();
        for (Op op : ops) {
            if (op.added() == resident.containsKey(op.image())) continue;
            long generation = op.added() ? out.size() + 1 : resident.remove(op.image());
            if (op.added()) resident.put(op.image(), generation);
            out.add(new ResidencyEvent(out.size() + 1, Keys.key(op.key()), op.medium(), op.added() ? Kind.ADDED : Kind.REMOVED,
                    generation));
        }
        return out;
    }

    static final Member SRC = new Member("src", "x:1", 2);
    static final Member OWNER = new Member("own", "x:2", 9);
    static final List<Member> LIVE = List.of(OWNER, SRC);

    @Property(tries = 200)
    void snapshotThenReplayEqualsTheLiveState(@ForAll @Size(max = 120) List<@net.jqwik.api.From("op") Op> ops,
                                              @ForAll @IntRange(min = 0, max = 120) int cut,
                                              @ForAll @IntRange(min = 1, max = 7) int batchSize) {
        List<ResidencyEvent> events = events(ops);
        int at = Math.min(cut, events.size());
        ResidencyMirror live = new ResidencyMirror();
        events.forEach(live::apply);
        ResidencyMirror before = new ResidencyMirror();
        events.subList(0, at).forEach(before::apply);

        ShardState rebuilt = new ShardState("own", 9, new ShardState.Budgets(4, 1000), new SimpleMeterRegistry());
        long digest = MembershipView.digest(LIVE);
        rebuilt.apply(new PushBatch("own", 9, 9, 1, true, true, digest, List.of()));
        rebuilt.apply(new PushBatch("src", 2, 9, 1, true, true, digest, before.snapshot(k -> true)));
        long batch = 2;
        // what the publisher forwards after the snapshot: a key's first image added, its last removed
        List<ResidencyEvent> rest = events.subList(at, events.size()).stream().filter(before::apply).toList();
        for (int i = 0; i < rest.size(); i += batchSize) {
            var r = rebuilt.apply(new PushBatch("src", 2, 9, batch++, false, false, digest,
                    rest.subList(i, Math.min(rest.size(), i + batchSize))));
            assertThat(r.result()).isEqualTo(PushBatch.Result.APPLIED);
        }
        List<StateKey> keys = new ArrayList<>();
        for (int k = 0; k < KEY_SPACE; k++) keys.add(Keys.key(k));
        List<KeyLocation> answers = rebuilt.lookup(keys, LIVE, digest);
        for (int k = 0; k < KEY_SPACE; k++) {
            Set<Medium> expected = new HashSet<>();
            for (Medium m : Medium.values()) if (live.holds(Keys.key(k), m)) expected.add(m);
            KeyLocation got = answers.get(k);
            if (expected.isEmpty()) {
                assertThat(got).isEqualTo(new KeyLocation.Absent());
            } else {
                assertThat(got).isInstanceOf(KeyLocation.Present.class);
                assertThat(((KeyLocation.Present) got).holders()).extracting(Holder::medium).containsExactlyInAnyOrderElementsOf(expected);
            }
        }
    }

    /** Three nodes each publishing; an owner restarts mid-run; lookups never say a false Absent. */
    @Property(tries = 40)
    void publishersShardOwnersAndLookupsAgreeThroughAnOwnerRestart(
            @ForAll @Size(max = 90) List<@net.jqwik.api.From("op") Op> ops,
            @ForAll @IntRange(min = 0, max = 2) int writerSeed,
            @ForAll @IntRange(min = 0, max = 90) int restartAt,
            @ForAll @IntRange(min = 0, max = 2) int restarted) {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        InMemoryTransport transport = new InMemoryTransport();
        List<Member> members = new ArrayList<>(List.of(new Member("n0", "x:0", 1), new Member("n1", "x:1", 1), new Member("n2", "x:2", 1)));
        for (Member m : members) transport.owners.put(m.nodeId(), new ShardState(m.nodeId(), m.incarnation(), new ShardState.Budgets(8, 1000), registry));
        AtomicReference<MembershipView> view = new AtomicReference<>(MembershipView.valid(members, 1));
        List<ResidencyStream> streams = new ArrayList<>();
        List<CatalogPublisher> publishers = new ArrayList<>();
        List<Map<StateKey, Map<String, Long>>> models = new ArrayList<>();
        CatalogPublisher.Budgets budgets = new CatalogPublisher.Budgets(5, 16, 100, 1000, 7);
        for (Member m : members) {
            ResidencyStream s = new ResidencyStream(32);
            streams.add(s);
            Map<StateKey, Map<String, Long>> model = new HashMap<>();
            models.add(model);
            publishers.add(new CatalogPublisher(m.nodeId(), m.incarnation(), s, med -> residentKeys(model, med), transport,
                    budgets, registry));
        }
        CatalogLookups lookups = new CatalogLookups(view::get, transport, Duration.ofMillis(1), 1, registry);
        int i = 0;
        for (Op op : ops) {
            int node = (op.key() + writerSeed) % 3;
            // images of the key on this node: "medium/namespace" -> generation
            Map<String, Long> held = models.get(node).computeIfAbsent(Keys.key(op.key()), k -> new HashMap<>());
            String image = op.medium() + "/" + op.namespace();
            if (op.added() != held.containsKey(image)) {
                long generation = op.added() ? i + 1 : held.remove(image);
                if (op.added()) held.put(image, generation);
                streams.get(node).append(Keys.key(op.key()), op.medium(), op.added() ? Kind.ADDED : Kind.REMOVED, generation);
            }
            if (i++ == restartAt) {
                Member old = members.get(restarted);
                Member fresh = new Member(old.nodeId(), old.endpoint(), old.incarnation() + 1);
                members.set(restarted, fresh);
                transport.owners.put(fresh.nodeId(), new ShardState(fresh.nodeId(), fresh.incarnation(), new ShardState.Budgets(8, 1000), registry));
                // the whole Manager restarts: a new shard state and a new publisher incarnation, which
                // resynchronises from the tiers (its stream's sequences continue: the tiers survived)
                Map<StateKey, Map<String, Long>> model = models.get(restarted);
                publishers.set(restarted, new CatalogPublisher(fresh.nodeId(), fresh.incarnation(), streams.get(restarted),
                        med -> residentKeys(model, med), transport, budgets, registry));
                view.set(MembershipView.valid(members, 2));
                checkNoFalseAbsent(lookups, models);
            }
            if (i % 3 == 0) {
                long now = i * 1_000_000_000L; // one second per round: past any push backoff (none fail here)
                publishers.forEach(p -> p.pump(view.get(), now));
            }
        }
        // pump until every publisher says idle: its stream read to the end and every owner acked
        boolean idle = false;
        for (int round = 0; round < 50 && !idle; round++) {
            idle = true;
            for (CatalogPublisher p : publishers) idle &= p.pump(view.get(), (i + round) * 1_000_000_000L);
        }
        assertThat(idle).as("publishers caught up within 500 pump rounds").isTrue();
        lookups.invalidateCandidates();
        List<StateKey> keys = new ArrayList<>();
        for (int k = 0; k < KEY_SPACE; k++) keys.add(Keys.key(k));
        Map<StateKey, KeyLocation> answers = lookups.lookup(keys, Duration.ofSeconds(1)).join();
        for (StateKey k : keys) {
            Set<String> expected = new HashSet<>();
            for (int n = 0; n < 3; n++) {
                for (Medium m : media(models.get(n).getOrDefault(k, Map.of()))) expected.add("n" + n + "/" + m);
            }
            KeyLocation got = answers.get(k);
            if (expected.isEmpty()) {
                assertThat(got).isEqualTo(new KeyLocation.Absent());
            } else {
                assertThat(got).isInstanceOf(KeyLocation.Present.class);
                assertThat(((KeyLocation.Present) got).holders()).extracting(h -> h.nodeId() + "/" + h.medium())
                        .containsExactlyInAnyOrderElementsOf(expected);
            }
        }
    }

    /** The media some image of a key is on, given its images ("medium/namespace" -> generation). */
    static Set<Medium> media(Map<String, Long> images) {
        Set<Medium> out = new HashSet<>();
        for (String image : images.keySet()) out.add(Medium.valueOf(image.substring(0, image.indexOf('/'))));
        return out;
    }

    /** One key per image on {@code medium}, as the tiers list them. */
    static List<StateKey> residentKeys(Map<StateKey, Map<String, Long>> model, Medium medium) {
        List<StateKey> out = new ArrayList<>();
        for (var e : model.entrySet()) {
            for (String image : e.getValue().keySet()) if (image.startsWith(medium + "/")) out.add(e.getKey());
        }
        return out;
    }

    /**
     * R = 2 over four members, three of them publishing: a fourth member joins or leaves mid-run
     * (handoff to the survivors, a snapshot to a joiner); after every pump round no held key is
     * Absent, and at the end every answer is exactly the model's holders, or Absent.
     */
    @Property(tries = 30)
    void replicatedOwnersAgreeThroughAMemberJoiningOrLeaving(
            @ForAll @Size(max = 90) List<@net.jqwik.api.From("op") Op> ops,
            @ForAll @IntRange(min = 0, max = 90) int changeAt,
            @ForAll boolean joins) {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        InMemoryTransport transport = new InMemoryTransport();
        List<Member> all = List.of(new Member("n0", "x:0", 1), new Member("n1", "x:1", 1), new Member("n2", "x:2", 1),
                new Member("n3", "x:3", 1));
        AtomicReference<MembershipView> view = new AtomicReference<>(MembershipView.valid(joins ? all.subList(0, 3) : all, 1));
        for (Member m : all) transport.owners.put(m.nodeId(), new ShardState(m.nodeId(), 1, new ShardState.Budgets(8, 1000), registry, view::get));
        List<ResidencyStream> streams = new ArrayList<>();
        Map<String, CatalogPublisher> publishers = new java.util.TreeMap<>();
        List<Map<StateKey, Set<Medium>>> models = new ArrayList<>();
        // batches of 1, one per owner per pump: handoffs span pumps, and their middle is looked at
        CatalogPublisher.Budgets budgets = new CatalogPublisher.Budgets(1, 64, 1, 1000, 7);
        for (Member m : all) {
            ResidencyStream s = new ResidencyStream(32);
            streams.add(s);
            Map<StateKey, Set<Medium>> model = new HashMap<>();
            models.add(model);
            publishers.put(m.nodeId(), new CatalogPublisher(m.nodeId(), 1, s, med -> residentKeysOn(model, med), transport,
                    budgets, 2, registry, new java.util.SplittableRandom(1)));
        }
        CatalogLookups lookups = new CatalogLookups(view::get, transport, Duration.ofMillis(1), 1, 2, 64, registry);
        List<Map<StateKey, Set<Medium>>> writers = models.subList(0, 3); // n3 holds nothing: its leaving loses no page
        int i = 0;
        long clock = 1; // the publishers' clock, in seconds: past any push backoff at each pump
        for (Op op : ops) {
            int node = op.key() % 3;
            Set<Medium> held = models.get(node).computeIfAbsent(Keys.key(op.key()), k -> new HashSet<>());
            // as the tiers do: one ADDED per image, and a REMOVED only of an image that is there
            if (op.added() != held.contains(op.medium())) {
                if (op.added()) held.add(op.medium()); else held.remove(op.medium());
                streams.get(node).append(Keys.key(op.key()), op.medium(), op.added() ? Kind.ADDED : Kind.REMOVED, 0);
            }
            if (i++ == changeAt) {
                // everything acknowledged first: what the owners knew must stay findable through the change
                for (int round = 0; round < 500 && !pumpAll(publishers, view.get(), clock++); round++) { }
                if (!joins) {
                    transport.down.add("n3");
                    publishers.remove("n3");
                }
                view.set(MembershipView.valid(joins ? all : all.subList(0, 3), 2));
                boolean done = false;
                for (int round = 0; round < 500 && !done; round++) {
                    done = pumpAll(publishers, view.get(), clock++);
                    checkNoFalseAbsent(lookups, writers);
                    checkNoOwnerSaysAbsent(transport, view.get(), writers);
                }
                assertThat(done).as("the membership change settled").isTrue();
            }
            if (i % 3 == 0) pumpAll(publishers, view.get(), clock++);
        }
        boolean idle = false;
        for (int round = 0; round < 50 && !idle; round++) {
            idle = true;
            idle = pumpAll(publishers, view.get(), clock++);
        }
        assertThat(idle).as("publishers caught up within 500 pump rounds").isTrue();
        lookups.invalidateCandidates();
        List<StateKey> keys = new ArrayList<>();
        for (int k = 0; k < KEY_SPACE; k++) keys.add(Keys.key(k));
        Map<StateKey, KeyLocation> answers = lookups.lookup(keys, Duration.ofSeconds(1)).join();
        for (StateKey k : keys) {
            Set<String> expected = new HashSet<>();
            for (int n = 0; n < 3; n++) {
                for (Medium m : models.get(n).getOrDefault(k, Set.of())) expected.add("n" + n + "/" + m);
            }
            KeyLocation got = answers.get(k);
            if (expected.isEmpty()) {
                assertThat(got).isEqualTo(new KeyLocation.Absent());
            } else {
                assertThat(got).isInstanceOf(KeyLocation.Present.class);
                assertThat(((KeyLocation.Present) got).holders()).extracting(h -> h.nodeId() + "/" + h.medium())
                        .containsExactlyInAnyOrderElementsOf(expected);
            }
        }
    }

    /** One pump of every publisher at {@code nowSeconds}; true when all are idle. */
    private static boolean pumpAll(Map<String, CatalogPublisher> publishers, MembershipView v, long nowSeconds) {
        boolean idle = true;
        for (CatalogPublisher p : publishers.values()) idle &= p.pump(v, nowSeconds * 1_000_000_000L);
        return idle;
    }

    /** Each live owner of a held key, asked alone under the current view: never Absent (mid-handoff too). */
    private static void checkNoOwnerSaysAbsent(InMemoryTransport transport, MembershipView v, List<Map<StateKey, Set<Medium>>> models) {
        for (int k = 0; k < KEY_SPACE; k++) {
            StateKey key = Keys.key(k);
            if (models.stream().allMatch(m -> m.getOrDefault(key, Set.of()).isEmpty())) continue;
            for (Member owner : Rendezvous.owners(key, v.live(), 2)) {
                assertThat(transport.owners.get(owner.nodeId()).lookup(List.of(key), v.live(), v.digest()).getFirst())
                        .as("owner %s of held key %d", owner.nodeId(), k).isNotEqualTo(new KeyLocation.Absent());
            }
        }
    }

    static List<StateKey> residentKeysOn(Map<StateKey, Set<Medium>> model, Medium medium) {
        return model.entrySet().stream().filter(e -> e.getValue().contains(medium)).map(Map.Entry::getKey).toList();
    }

    /**
     * A key some node holds must not be Absent (right after an owner restart nothing has been
     * resent; mid-handoff). {@code models}: per node, a key's images (a map of them, or a set of
     * media); empty = not held.
     */
    private static void checkNoFalseAbsent(CatalogLookups lookups, List<? extends Map<StateKey, ?>> models) {
        lookups.invalidateCandidates();
        List<StateKey> keys = new ArrayList<>();
        for (int k = 0; k < KEY_SPACE; k++) keys.add(Keys.key(k));
        Map<StateKey, KeyLocation> answers = lookups.lookup(keys, Duration.ofSeconds(1)).join();
        for (StateKey k : keys) {
            boolean held = models.stream().anyMatch(m -> switch (m.get(k)) {
                case Map<?, ?> images -> !images.isEmpty();
                case java.util.Collection<?> media -> !media.isEmpty();
                case null, default -> false;
            });
            if (held) assertThat(answers.get(k)).isNotEqualTo(new KeyLocation.Absent());
        }
    }
}
