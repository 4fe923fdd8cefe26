package io.orbitkv.reliability.faults;

import io.orbitkv.state.StateKeys;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.state.protocol.SettleOutcome;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * One seeded schedule against the real Manager core: three simulated engines (two namespaces)
 * publish, query, cancel, release, die, re-register with a higher epoch, while the driver evicts
 * pages from DRAM and restarts the core over the same SSD files, and the SSD device faults per
 * the schedule's {@link FaultPlan}.
 *
 * <p>Reference model: the pages SEALED (or DISCARDED, already present) per namespace. After every
 * query, every RESIDENT page must hold exactly the bytes its namespace's publisher wrote for it
 * ({@link SimClient#image}) and must be in the model: a wrong byte, a page served to another
 * namespace, or a hit on a page never sealed fails the schedule. At the end every client leaves
 * and the core must hold nothing ({@link SimManager#leftovers}).
 *
 * <p>Determinism: the driver is one thread, waits after every step until the store is idle, and
 * the store has one SSD worker; the schedule's actions come from {@code SplittableRandom(seed)}
 * and the device's faults from (seed, call number). Thread timing can still reorder work the
 * core does on its own threads within a step, so a failure reproduces by its seed except where
 * it needs such a race, which the report would show as a failure that does not repeat.
 */
final class Schedule {

    /** How one schedule ended. {@code failure} is empty when every check held. */
    record Result(long seed, int steps, Optional<String> failure, Map<FaultKind, Long> faults) {}

    private static final int CLIENTS = 3;
    private static final int PROMPTS = 5;
    private static final int MAX_PAGES = 6;
    private static final long STEP_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(10);

    /** A failed check: the message says what and where; the campaign adds the seed. */
    static final class Violation extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Violation(String message) {
            super(message, null, false, false);
        }
    }

    private final long seed;
    private final SplittableRandom rng;
    private final FaultPlan plan;
    private final Path dir;
    private final List<Set<Long>> sealed = List.of(new HashSet<>(), new HashSet<>());
    private final SimClient[] clients = new SimClient[CLIENTS];
    private final long[] epochs = new long[CLIENTS];
    private final List<ArrayDeque<Long>> heldOps = new ArrayList<>();
    private final ArrayDeque<String> trail = new ArrayDeque<>();
    private long nextOp = 1;
    /** The prompt evicted last (-1: none): queries pick it often, so the SSD read path and its faults are reached. */
    private long evictedPrompt = -1;
    private int step;
    private SimManager sim;

    Schedule(long seed, Path dir) {
        this.seed = seed;
        this.rng = new SplittableRandom(seed);
        // A fifth of the schedules run on a clean device: client faults alone, and a baseline.
        double[] rates = {0, 0.02, 0.05, 0.1, 0.2};
        this.plan = new FaultPlan(seed, rates[rng.nextInt(rates.length)]);
        this.dir = dir;
        for (int i = 0; i < CLIENTS; i++) heldOps.add(new ArrayDeque<>());
    }

    Result run() {
        int steps = 8 + rng.nextInt(24);
        Optional<String> failure = Optional.empty();
        try {
            sim = new SimManager(dir, plan);
            try {
                for (int i = 0; i < CLIENTS; i++) {
                    epochs[i] = 1;
                    clients[i] = connect(i);
                }
                for (step = 0; step < steps; step++) {
                    act();
                    if (!sim.awaitIdle(STEP_TIMEOUT_NANOS)) throw new Violation("the store never became idle");
                }
                quiesce();
            } finally {
                for (SimClient c : clients) if (c != null) c.close();
                sim.close();
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
        if (a < 25) publish(c);
        else if (a < 55) query(c, false);
        else if (a < 61) query(c, true);
        else if (a < 67) die(c);
        else if (a < 71) bumpEpoch(c);
        else if (a < 87) evict();
        else if (a < 90) restart();
        else releaseHeld(c);
    }

    private SimClient connect(int i) {
        Optional<SimClient> c = SimClient.connect(sim.core, "e" + i, i % 2, epochs[i]);
        if (c.isEmpty()) throw new Violation("REGISTER of e" + i + " epoch " + epochs[i] + " was refused");
        heldOps.get(i).clear();
        return c.get();
    }

    private void publish(int i) {
        long prompt = rng.nextInt(PROMPTS);
        int count = 1 + rng.nextInt(MAX_PAGES);
        note("publish e" + i + " p" + prompt + "x" + count);
        Reply.Reserved reserved = clients[i].reserve(prompt, 0, count);
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
        if (rng.nextInt(10) == 0) {
            // Death between reserve and commit: the reservations must be quarantined, then freed.
            plan.count(FaultKind.SESSION_DEATH);
            note("die before commit e" + i);
            clients[i].close();
            clients[i] = connect(i);
            return;
        }
        if (!(clients[i].send(new Request.PublishCommit(ids)) instanceof Reply.Committed committed)) return;
        for (int k = 0; k < ids.size(); k++) {
            SettleOutcome o = committed.outcomes().get(k);
            if (o == SettleOutcome.SEALED || o == SettleOutcome.DISCARDED) {
                sealed.get(clients[i].namespaceIndex).add(prompt * 1000 + pages.get(k));
            }
        }
    }

    private void query(int i, boolean cancel) {
        long prompt = evictedPrompt >= 0 && rng.nextBoolean() ? evictedPrompt : rng.nextInt(PROMPTS);
        int pages = 1 + rng.nextInt(MAX_PAGES + 1);
        long op = nextOp++;
        SimClient c = clients[i];
        note((cancel ? "cancel-query e" : "query e") + i + " p" + prompt + "x" + pages + " op" + op);
        Reply.QueryResult first = c.query(op, prompt, pages);
        if (first == null) return; // refused (BUSY, NO_SPACE): nothing held
        if (cancel) {
            plan.count(FaultKind.CANCEL);
            c.send(new Request.Cancel(op));
            if (rng.nextBoolean()) c.send(new Request.Release(op));
            return;
        }
        Reply.QueryResult fin = first;
        if (first.status() == QueryStatus.PENDING) {
            if (!c.awaitSettled(op, STEP_TIMEOUT_NANOS)) throw new Violation("query op" + op + " never settled");
            if (!(c.send(new Request.QueryPoll(op, 0)) instanceof Reply.QueryResult polled)) {
                throw new Violation("QUERY_POLL of a settled op" + op + " was not a result");
            }
            fin = polled;
        }
        if (fin.status() != QueryStatus.FINAL) throw new Violation("settled op" + op + " polled " + fin.status());
        check(c, prompt, pages, fin);
        if (fin.hit() && rng.nextInt(4) == 0) heldOps.get(i).addLast(op); // released later, or by a death
        else c.send(new Request.Release(op));
    }

    /** The reference model's check of one FINAL result. */
    private void check(SimClient c, long prompt, int pages, Reply.QueryResult r) {
        if (r.boundaryTokens() > (long) pages * SimManager.PAGE_TOKENS) {
            throw new Violation("boundary " + r.boundaryTokens() + " past the prompt's " + pages + " pages");
        }
        if (!r.hit()) return;
        Set<Long> model = sealed.get(c.namespaceIndex);
        for (Reply.GroupResult g : r.groups()) {
            for (Reply.Span s : g.spans()) {
                for (int k = 0; k < s.pages().size(); k++) {
                    long page = s.firstPage() + k;
                    if (!(s.pages().get(k) instanceof Reply.Resident(Reply.Lease lease))) {
                        throw new Violation("a FINAL hit with an unleased page " + page);
                    }
                    if (!model.contains(prompt * 1000 + page)) {
                        throw new Violation("hit on page " + page + " of prompt " + prompt + " never sealed in namespace "
                                + c.namespaceIndex);
                    }
                    if (!Arrays.equals(c.read(lease), SimClient.image(c.namespaceIndex, prompt, page))) {
                        throw new Violation("WRONG BYTES served for page " + page + " of prompt " + prompt
                                + " in namespace " + c.namespaceIndex);
                    }
                }
            }
        }
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
        long prompt = rng.nextInt(PROMPTS);
        note("evict ns" + ns + " p" + prompt);
        byte[] digest = SimClient.namespace(ns).digest();
        boolean all = rng.nextBoolean();
        for (long p = 0; p <= MAX_PAGES; p++) {
            if (all || rng.nextBoolean()) sim.store.dram().evict(StateKeys.forBlockHash(digest, 0, SimClient.hash(prompt, p)));
        }
        evictedPrompt = prompt;
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

    /** Every client leaves; then nothing may be held, within a bound (session drains are asynchronous). */
    private void quiesce() {
        step = -1;
        note("quiesce");
        for (int i = 0; i < CLIENTS; i++) {
            clients[i].close();
            clients[i] = null;
        }
        long deadline = System.nanoTime() + STEP_TIMEOUT_NANOS;
        List<String> held = sim.leftovers();
        while (!held.isEmpty() && System.nanoTime() < deadline) {
            java.util.concurrent.locks.LockSupport.parkNanos(200_000);
            held = sim.leftovers();
        }
        if (!held.isEmpty()) throw new Violation("held at quiescence: " + held);
    }
}
