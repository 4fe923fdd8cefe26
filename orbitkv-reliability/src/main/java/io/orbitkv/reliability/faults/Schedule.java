package io.orbitkv.reliability.faults;

import io.orbitkv.state.StateKeys;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.state.protocol.SettleOutcome;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * One seeded schedule against the real Manager core: three simulated engines (two namespaces)
 * publish, query, cancel, release, die, re-register with a higher epoch, restore into their
 * registered regions (which they may truncate, or die while the copies run), while the driver
 * evicts pages from DRAM and restarts the core over the same SSD files, and the SSD device faults
 * per the schedule's {@link FaultPlan}.
 *
 * <p>A third of the schedules are clustered ({@link SimPeers}): a second Manager, the peer, has two
 * engines of its own that publish prompts the first Manager never sees, and queries of those
 * prompts read them over the peer transport, which drops, delays, resets and corrupts per the
 * plan ({@link FaultyTransport}); the peer restarts (sometimes dying in the middle of a transfer)
 * and evicts pages its catalog entry still names.
 *
 * <p>Checks: every answer against the {@link ReferenceModel} (no wrong byte, no page of another
 * namespace, no hit on a page never sealed, every restored byte right); the RESTORE variants as
 * {@link RegionRestores} states them. A query still PENDING past its bound (its peer wait plus
 * {@link #PENDING_GRACE_NANOS}) fails the schedule too. At the end every client leaves and
 * neither core, nor the peer routes, may hold anything ({@link SimManager#leftovers},
 * {@link SimPeers#leftovers}).
 *
 * <p>Determinism: the driver is one thread, waits after every step until the store is idle, and
 * the store has one SSD worker; the schedule's actions come from {@code SplittableRandom(seed)},
 * the device's faults from (seed, call number) and the transport's from (seed, what the call is
 * about). Thread timing can still reorder work the
 * core does on its own threads within a step, so a failure reproduces by its seed except where
 * it needs such a race, which the report would show as a failure that does not repeat.
 */
final class Schedule {

    /** How one schedule ended. {@code failure} is empty when every check held. */
    record Result(long seed, int steps, Optional<String> failure, Map<FaultKind, Long> faults) {}

    private static final int CLIENTS = 3;
    private static final int PROMPTS = 5;
    /** Prompts {@code PROMPTS .. PROMPTS + PEER_PROMPTS - 1}: published on the peer only. */
    private static final int PEER_PROMPTS = 3;
    private static final int MAX_PAGES = 6;
    static final long STEP_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(10);
    /** The peer wait of a query that reads from the peer (the engine's bound, protocol QUERY). */
    private static final int PEER_WAIT_MILLIS = 2_000;
    /**
     * A peer wait that ends before a dropped call's deadline ({@link FaultyTransport#DEADLINE_NANOS})
     * but long after the catalog lookup's answer (microseconds here), so whether fetches start
     * does not depend on the machine's load.
     */
    private static final int SHORT_PEER_WAIT_MILLIS = 10;
    /** How long past its peer wait a query may stay PENDING: its peer fetches' deadline plus scheduling. */
    static final long PENDING_GRACE_NANOS = TimeUnit.SECONDS.toNanos(2);

    private final long seed;
    private final SplittableRandom rng;
    private final FaultPlan plan;
    private final Path dir;
    private final ReferenceModel model = new ReferenceModel();
    private final RegionRestores restores;
    private final SimClient[] clients = new SimClient[CLIENTS];
    private final long[] epochs = new long[CLIENTS];
    private final List<ArrayDeque<Long>> heldOps = new ArrayList<>();
    private final ArrayDeque<String> trail = new ArrayDeque<>();
    private long nextOp = 1;
    /** The prompt evicted last (-1: none): queries pick it often, so the SSD read path and its faults are reached. */
    private long evictedPrompt = -1;
    private int step;
    private SimManager sim;
    /** The peer Manager and the cluster around both (null when the schedule is not clustered). */
    private final boolean clustered;
    private SimPeers peers;
    private SimManager peer;
    private final SimClient[] peerClients = new SimClient[2];
    private final AtomicLong skewNanos = new AtomicLong();
    private Optional<UserPrincipal> user = Optional.empty();

    Schedule(long seed, Path dir) {
        this.seed = seed;
        this.rng = new SplittableRandom(seed);
        // A fifth of the schedules run on a clean device: client faults alone, and a baseline.
        double[] rates = {0, 0.02, 0.05, 0.1, 0.2};
        double deviceRate = rates[rng.nextInt(rates.length)];
        this.clustered = rng.nextInt(3) == 0;
        // and a quarter of the clustered ones on a clean network
        double[] peerRates = {0, 0.1, 0.25, 0.5};
        this.plan = new FaultPlan(seed, deviceRate, clustered ? peerRates[rng.nextInt(peerRates.length)] : 0);
        this.dir = dir;
        this.restores = new RegionRestores(model, plan, dir.resolve("regions"));
        for (int i = 0; i < CLIENTS; i++) heldOps.add(new ArrayDeque<>());
    }

    /** Whether the schedule of {@code seed} is clustered with a faulty network (the constructor's first draws). */
    static boolean clusteredWithPeerFaults(long seed) {
        Schedule s = new Schedule(seed, Path.of("unused"));
        return s.clustered && s.plan.peerFaultRate() > 0;
    }

    Result run() {
        int steps = 8 + rng.nextInt(24);
        Optional<String> failure = Optional.empty();
        try {
            user = SimClient.user(Files.createDirectories(dir.resolve("regions")));
            try {
                if (clustered) {
                    peers = new SimPeers(plan);
                    peer = new SimManager(dir.resolve("peer"), null, skewNanos, peers.source);
                    sim = new SimManager(dir, plan, skewNanos, peers.requester);
                    for (int k = 0; k < peerClients.length; k++) peerClients[k] = connectPeer(k);
                } else {
                    sim = new SimManager(dir, plan, skewNanos, SimManager.Wiring.NONE);
                }
                for (int i = 0; i < CLIENTS; i++) {
                    epochs[i] = 1;
                    clients[i] = connect(i);
                }
                for (step = 0; step < steps; step++) {
                    act();
                    settle();
                }
                quiesce();
            } finally {
                // the transport's timer first: nothing held may call into a core that closed
                if (peers != null) peers.close();
                for (SimClient c : clients) if (c != null) c.close();
                for (SimClient c : peerClients) if (c != null) c.close();
                if (sim != null) sim.close();
                if (peer != null) peer.close();
            }
        } catch (Violation v) {
            failure = Optional.of("step " + step + ": " + v.getMessage() + "; last steps " + trail);
        } catch (IOException | RuntimeException e) {
            failure = Optional.of("step " + step + ": " + e + " at " + Arrays.toString(Arrays.copyOf(e.getStackTrace(), 4))
                    + "; last steps " + trail);
        }
        return new Result(seed, steps, failure, plan.counts());
    }

    private void note(String action) {
        trail.addLast(step + ":" + action);
        if (trail.size() > 8) trail.removeFirst();
    }

    private void act() throws IOException {
        int c = rng.nextInt(CLIENTS);
        int a = rng.nextInt(100);
        if (a < 17) publish(c);
        else if (a < 35) query(c, false);
        else if (a < 39) query(c, true);
        else if (a < 44) die(c);
        else if (a < 47) bumpEpoch(c);
        else if (a < 57) evict();
        else if (a < 59) restart();
        else if (a < 65) releaseHeld(c);
        else if (a < 76) restore(c);
        else if (!clustered) query(c, false);
        else if (a < 84) peerPublish();
        else if (a < 93) peerQuery(c);
        else if (a < 97) staleCatalog(c);
        else peerRestart(c);
    }

    /**
     * After a step: both stores and the peer routes idle, both cores ticked (as their tick
     * threads would: quarantine, ticket windows, release retries, membership changes), the peer's
     * residency streamed to the catalog.
     */
    private void settle() {
        awaitIdle();
        if (!clustered) return;
        sim.core.onTick(sim.now());
        peer.core.onTick(peer.now());
        if (!peers.pump()) throw new Violation("the peer's catalog publisher never caught up");
        awaitIdle();
    }

    private void awaitIdle() {
        long deadline = System.nanoTime() + STEP_TIMEOUT_NANOS;
        while (!(sim.idle() && (!clustered || peer.idle() && peers.idle()))) {
            if (System.nanoTime() > deadline) {
                throw new Violation(!sim.idle() ? "the store never became idle"
                        : !peer.idle() ? "the peer's store never became idle" : "peer work never ended: " + peers.leftovers());
            }
            LockSupport.parkNanos(20_000);
        }
    }

    private SimClient connect(int i) {
        Optional<SimClient> c = SimClient.connect(sim.core, "e" + i, i % 2, epochs[i], user, null);
        if (c.isEmpty()) throw new Violation("REGISTER of e" + i + " epoch " + epochs[i] + " was refused");
        heldOps.get(i).clear();
        return c.get();
    }

    private SimClient connectPeer(int k) {
        Optional<SimClient> c = SimClient.connect(peer.core, "p" + k, k, 1);
        if (c.isEmpty()) throw new Violation("REGISTER of the peer's engine p" + k + " was refused");
        return c.get();
    }

    private void publish(int i) {
        long prompt = rng.nextInt(PROMPTS);
        int count = 1 + rng.nextInt(MAX_PAGES);
        note("publish e" + i + " p" + prompt + "x" + count);
        publish(clients[i], prompt, count, i);
    }

    /**
     * PUBLISH_RESERVE, write, PUBLISH_COMMIT of {@code prompt}'s first {@code count} pages on
     * {@code c}; what was SEALED (or DISCARDED: already there) joins the model. With
     * {@code client >= 0} (the first Manager's client of that index) one publish in ten dies
     * between reserve and commit instead.
     */
    private void publish(SimClient c, long prompt, int count, int client) {
        Reply.Reserved reserved = c.reserve(prompt, 0, count);
        if (reserved == null) return;
        List<Long> ids = new ArrayList<>();
        List<Long> pages = new ArrayList<>();
        for (int k = 0; k < count; k++) {
            if (reserved.outcomes().get(k) instanceof Reply.Granted g) {
                ids.add(g.reservationId());
                pages.add((long) k);
            }
        }
        if (ids.isEmpty()) return;
        if (client >= 0 && rng.nextInt(10) == 0) {
            // Death between reserve and commit: the reservations must be quarantined, then freed.
            plan.count(FaultKind.SESSION_DEATH);
            note("die before commit e" + client);
            clients[client].close();
            clients[client] = connect(client);
            return;
        }
        if (!(c.send(new Request.PublishCommit(ids)) instanceof Reply.Committed committed)) return;
        for (int k = 0; k < ids.size(); k++) {
            SettleOutcome o = committed.outcomes().get(k);
            if (o == SettleOutcome.SEALED || o == SettleOutcome.DISCARDED) {
                model.sealed(c.namespaceIndex, prompt, pages.get(k));
            }
        }
    }

    /** A prompt to ask for: often the one evicted last (so reads go to SSD, or to the peer). */
    private long pickPrompt() {
        return evictedPrompt >= 0 && rng.nextBoolean() ? evictedPrompt : rng.nextInt(clustered ? PROMPTS + PEER_PROMPTS : PROMPTS);
    }

    private void query(int i, boolean cancel) {
        long prompt = pickPrompt();
        query(i, cancel, prompt, prompt >= PROMPTS ? PEER_WAIT_MILLIS : 0);
    }

    private void query(int i, boolean cancel, long prompt, int peerWaitMillis) {
        int pages = 1 + rng.nextInt(MAX_PAGES + 1);
        long op = nextOp++;
        SimClient c = clients[i];
        note((cancel ? "cancel-query e" : "query e") + i + " p" + prompt + "x" + pages + " op" + op
                + (peerWaitMillis > 0 ? " wait" + peerWaitMillis : ""));
        if (cancel) {
            Reply.QueryResult first = c.query(op, prompt, pages, CompletionTarget.HOST_READY, peerWaitMillis);
            if (first == null) return; // refused (BUSY, NO_SPACE): nothing held
            plan.count(FaultKind.CANCEL);
            c.send(new Request.Cancel(op));
            if (rng.nextBoolean()) c.send(new Request.Release(op));
            return;
        }
        Reply.QueryResult fin = settledQuery(c, op, prompt, pages, CompletionTarget.HOST_READY, peerWaitMillis);
        if (fin == null) return;
        model.checkQuery(c, prompt, pages, fin);
        if (fin.hit() && rng.nextInt(4) == 0) heldOps.get(i).addLast(op); // released later, or by a death
        else c.send(new Request.Release(op));
    }

    /**
     * QUERY, then (if PENDING) its QUERY_SETTLED within its bound and QUERY_POLL: the FINAL
     * result, or null when the QUERY was refused (BUSY, NO_SPACE: nothing held).
     */
    private Reply.QueryResult settledQuery(SimClient c, long op, long prompt, int pages, CompletionTarget target,
                                           int peerWaitMillis) {
        Reply.QueryResult first = c.query(op, prompt, pages, target, peerWaitMillis);
        if (first == null) return null;
        if (first.status() != QueryStatus.PENDING) return first;
        long bound = peerWaitMillis > 0 ? TimeUnit.MILLISECONDS.toNanos(peerWaitMillis) + PENDING_GRACE_NANOS : STEP_TIMEOUT_NANOS;
        if (!c.awaitSettled(op, bound)) {
            throw new Violation("query op" + op + " stayed PENDING past its bound of " + bound / 1_000_000 + " ms");
        }
        if (!(c.send(new Request.QueryPoll(op, 0)) instanceof Reply.QueryResult polled)) {
            throw new Violation("QUERY_POLL of a settled op" + op + " was not a result");
        }
        if (polled.status() != QueryStatus.FINAL) throw new Violation("settled op" + op + " polled " + polled.status());
        return polled;
    }

    private void die(int i) {
        plan.count(FaultKind.SESSION_DEATH);
        note("die e" + i + " holding " + heldOps.get(i).size());
        clients[i].close();
        if (rng.nextBoolean()) epochs[i]++;
        clients[i] = connect(i);
    }

    private void bumpEpoch(int i) {
        plan.count(FaultKind.EPOCH_BUMP);
        note("epoch bump e" + i + " to " + (epochs[i] + 1));
        SimClient old = clients[i];
        epochs[i]++;
        clients[i] = connect(i); // fences the old incarnation; REGISTER waits for its drain
        if (!old.fenced()) throw new Violation("the old incarnation of e" + i + " was not fenced");
        old.close(); // the transport closes a fenced connection
    }

    private void evict() {
        int ns = rng.nextInt(2);
        long prompt = rng.nextInt(clustered ? PROMPTS + PEER_PROMPTS : PROMPTS);
        note("evict ns" + ns + " p" + prompt);
        evictPages(sim, ns, prompt, rng.nextBoolean());
        evictedPrompt = prompt;
    }

    /** Evicts {@code prompt}'s pages of namespace {@code ns} from {@code m}'s DRAM: all, or each with probability 1/2. */
    private void evictPages(SimManager m, int ns, long prompt, boolean all) {
        byte[] digest = SimClient.namespace(ns).digest();
        for (long p = 0; p <= MAX_PAGES; p++) {
            if (all || rng.nextBoolean()) m.store.dram().evict(StateKeys.forBlockHash(digest, 0, SimClient.hash(prompt, p)));
        }
    }

    /**
     * ENGINE_RESTORE: QUERY, then RESTORE of every RESIDENT page into the client's region
     * ({@link RegionRestores}). One restore in four truncates the region's file first, one in
     * four dies with its copies in flight; the others check every restored byte against the model.
     */
    private void restore(int i) {
        SimClient c = clients[i];
        long prompt = pickPrompt();
        int pages = 1 + rng.nextInt(MAX_PAGES + 1);
        long op = nextOp++;
        int variant = rng.nextInt(4);
        String what = variant == 0 ? "truncate-restore e" : variant == 1 ? "die-restore e" : "restore e";
        note(what + i + " p" + prompt + "x" + pages + " op" + op);
        Reply.QueryResult fin = settledQuery(c, op, prompt, pages, CompletionTarget.ENGINE_RESTORE,
                prompt >= PROMPTS ? PEER_WAIT_MILLIS : 0);
        if (fin == null) return;
        model.checkQuery(c, prompt, pages, fin);
        if (!fin.hit()) {
            c.send(new Request.Release(op));
            return;
        }
        switch (variant) {
            case 0 -> restores.intoTruncatedRegion(c, op, fin);
            case 1 -> {
                restores.beforeDeath(c, op, fin);
                clients[i].close();
                clients[i] = connect(i);
            }
            default -> {
                restores.intoSoundRegion(c, op, prompt, fin);
                if (rng.nextInt(4) == 0) heldOps.get(i).addLast(op);
                else c.send(new Request.Release(op));
            }
        }
    }

    /** One of the peer's engines publishes pages of a prompt only the peer holds. */
    private void peerPublish() {
        int k = rng.nextInt(peerClients.length);
        long prompt = PROMPTS + rng.nextInt(PEER_PROMPTS);
        int count = 1 + rng.nextInt(MAX_PAGES);
        note("peer publish p" + k + " p" + prompt + "x" + count);
        publish(peerClients[k], prompt, count, -1);
    }

    /**
     * A query of a prompt only the peer published, its local copies evicted first (mostly), with
     * a peer wait: usually 2 s, one in eight {@link #SHORT_PEER_WAIT_MILLIS} (shorter than a
     * dropped call's deadline, so the wait expires with fetches in flight, which must be given up
     * and released when they land).
     */
    private void peerQuery(int i) {
        long prompt = PROMPTS + rng.nextInt(PEER_PROMPTS);
        if (rng.nextInt(4) != 0) evictPages(sim, clients[i].namespaceIndex, prompt, true);
        query(i, false, prompt, rng.nextInt(8) == 0 ? SHORT_PEER_WAIT_MILLIS : PEER_WAIT_MILLIS);
    }

    /** The peer evicts a prompt from DRAM and, before its catalog entry is updated, the first Manager reads it. */
    private void staleCatalog(int i) {
        int ns = clients[i].namespaceIndex;
        long prompt = PROMPTS + rng.nextInt(PEER_PROMPTS);
        plan.count(FaultKind.STALE_CATALOG);
        note("stale catalog ns" + ns + " p" + prompt);
        evictPages(peer, ns, prompt, true);
        evictPages(sim, ns, prompt, true);
        query(i, false, prompt, PEER_WAIT_MILLIS);
    }

    /**
     * The peer restarts (new incarnation, DRAM lost, SSD recovered): half the time it dies in the
     * middle of a transfer of a peer query first. Its engines reconnect to the new life.
     */
    private void peerRestart(int i) throws IOException {
        plan.count(FaultKind.PEER_RESTART);
        boolean midRead = rng.nextBoolean();
        note(midRead ? "peer dies mid-read" : "peer restart");
        if (midRead) {
            peers.transport.dieDuringNextTransfer(peers::down);
            long prompt = PROMPTS + rng.nextInt(PEER_PROMPTS);
            evictPages(sim, clients[i].namespaceIndex, prompt, true);
            query(i, false, prompt, PEER_WAIT_MILLIS);
            peers.transport.dieDuringNextTransfer(null); // no transfer came: the peer dies between steps instead
            awaitIdle();
        }
        for (int k = 0; k < peerClients.length; k++) peerClients[k].close();
        peer.restart();
        for (int k = 0; k < peerClients.length; k++) peerClients[k] = connectPeer(k);
    }

    private void restart() throws IOException {
        plan.count(FaultKind.RESTART);
        note("restart");
        for (int i = 0; i < CLIENTS; i++) clients[i].close();
        sim.restart();
        for (int i = 0; i < CLIENTS; i++) clients[i] = connect(i);
    }

    private void releaseHeld(int i) {
        note("release e" + i + " " + heldOps.get(i));
        for (Long op : heldOps.get(i)) clients[i].send(new Request.Release(op));
        heldOps.get(i).clear();
    }

    /**
     * Every client leaves; then nothing may be held, within a bound (session drains are
     * asynchronous). The clock moves past the publish quarantine and, when clustered, past the
     * ticket window, and both cores tick: a ticket whose release was lost is freed by its window,
     * a release that failed is retried.
     */
    private void quiesce() {
        step = -1;
        note("quiesce");
        for (int i = 0; i < CLIENTS; i++) {
            clients[i].close();
            clients[i] = null;
        }
        for (int k = 0; k < peerClients.length; k++) {
            if (peerClients[k] != null) peerClients[k].close();
            peerClients[k] = null;
        }
        long deadline = System.nanoTime() + STEP_TIMEOUT_NANOS;
        List<String> held = leftovers();
        while (!held.isEmpty() && System.nanoTime() < deadline) {
            LockSupport.parkNanos(200_000);
            held = leftovers();
        }
        if (!held.isEmpty()) throw new Violation("held at quiescence: " + held);
    }

    private List<String> leftovers() {
        if (!clustered) return sim.leftovers();
        sim.advance(SimPeers.TICKET_WINDOW_NANOS);
        List<String> held = new ArrayList<>();
        for (String h : sim.leftovers()) held.add("a " + h);
        for (String h : peer.leftovers()) held.add("peer " + h);
        held.addAll(peers.leftovers());
        return held;
    }
}
