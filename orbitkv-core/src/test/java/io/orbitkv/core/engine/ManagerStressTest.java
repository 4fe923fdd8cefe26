package io.orbitkv.core.engine;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.StressTest;
import io.orbitkv.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Many sessions at once publish, query (DRAM hits and SSD stagings under eviction pressure),
 * check the bytes of every lease, restore hits into region files (checking them, or releasing
 * mid-copy and waiting for DRAINED), release, cancel, leave operations live, and re-register with
 * higher epochs (fencing the previous session with whatever it holds); at the end nothing is held
 * and the DRAM bytes balance.
 *
 * <p>Each thread is its own engine instance and a fenced session goes silent: an incarnation
 * that keeps writing into granted slots after it was fenced would write into slots the Manager
 * has already given back (protocol §9.6 cannot stop a zombie writer; see the report).
 */
@StressTest
class ManagerStressTest {

    static final Namespace NS = ManagerFixture.namespace("stress");
    static final int THREADS = 6;
    static final int ROUNDS = 120;
    static final int PROMPTS = 8;
    static final int PAGES = 6;

    @TempDir
    Path dir;

    @Test
    void manySessionsEndWithNothingHeldAndNeverReadWrongBytes() throws Exception {
        long seed = TestSeed.get();
        System.out.println("ManagerStressTest " + TestSeed.describe());
        try (ManagerFixture m = new ManagerFixture(dir, 40, ProtocolLimits.DEFAULTS,
                // restores of up to 3 pages are copied inline (2 or 3 shared with an idle copy thread: above a
                // sixteenth of the bound), larger ones by the copy threads: all three paths race
                ManagerBounds.DEFAULTS.withStagesPerOperation(2).withMaxLeases(200)
                        .withRestoreInlineBytes(3L * ManagerFixture.PAGE_BYTES))) {
            AtomicLong hits = new AtomicLong();
            AtomicLong pending = new AtomicLong();
            ExecutorService pool = Executors.newFixedThreadPool(THREADS);
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                SplittableRandom random = new SplittableRandom(seed + t);
                String instance = "engine-" + t;
                Path region = java.nio.file.Files.write(dir.resolve("region-" + t), new byte[PAGES * ManagerFixture.SLOT]);
                done.add(pool.submit(() -> {
                    run(m, random, instance, region, hits, pending);
                    return null;
                }));
            }
            for (Future<?> f : done) f.get(120, TimeUnit.SECONDS);
            pool.shutdown();
            m.assertNothingHeld();
            ManagerStatus s = m.core.status();
            assertThat(s.dram().leasedBytes()).isZero();
            assertThat(s.dram().freeBytes() + s.dram().usedBytes()).isEqualTo(s.dram().capacityBytes());
            assertThat(hits.get()).as("some queries hit").isPositive();
            assertThat(s.restoreBytes()).as("some restores copied").isPositive();
            assertThat(m.core.copier().helpers()).as("some inline restores shared with a copy thread").isPositive();
            System.out.println("hits " + hits + ", pending " + pending + ", busy " + s.busyRejections()
                    + ", restored bytes " + s.restoreBytes());
        }
    }

    private static final AtomicLong EPOCHS = new AtomicLong();

    private void run(ManagerFixture m, SplittableRandom random, String instance, Path region, AtomicLong hits,
                     AtomicLong pending) throws IOException {
        Client c = connect(m, instance, region);
        long op = 1;
        for (int round = 0; round < ROUNDS; round++) {
            int prompt = random.nextInt(PROMPTS);
            switch (random.nextInt(10)) {
                case 0 -> {
                    // A restarted engine: the higher epoch fences the old session, which may still hold
                    // live operations and stagings; the old one then goes silent, as a dead process would.
                    Client next = connect(m, instance, region);
                    assertThat(c.sink.fenced).isEqualTo(io.orbitkv.state.protocol.ErrorCode.STALE_EPOCH);
                    c.close();
                    c = next;
                }
                case 1, 2 -> {
                    if (c.sink.fenced == null) c.publish(prompt, 0, 0, 1, 2, 3, 4, 5);
                }
                case 3 -> m.store.dram().evict(Client.key(NS, prompt, 0, random.nextInt(PAGES)));
                default -> {
                    boolean restore = random.nextInt(3) == 0;
                    Reply r = c.send(Client.query(op, 0, restore ? CompletionTarget.ENGINE_RESTORE : CompletionTarget.HOST_READY,
                            PAGES * 16 + 1, 0, prompt, new int[] {0}, PAGES));
                    if (r instanceof Reply.QueryResult q) {
                        if (q.status() == QueryStatus.PENDING) {
                            pending.incrementAndGet();
                            if (random.nextBoolean()) {
                                c.send(new Request.Cancel(op));
                                op++;
                                continue;
                            }
                            long id = op;
                            Client me = c;
                            org.awaitility.Awaitility.await().atMost(RecordingSink.WAIT).until(() ->
                                    me.sink.fenced != null || me.sink.find(id, CompletionEvent.QUERY_SETTLED).isPresent());
                            Reply polled = c.send(new Request.QueryPoll(op, 0));
                            if (polled instanceof Reply.QueryResult p) q = p;
                        }
                        if (q.status() == QueryStatus.FINAL && q.hit()) {
                            hits.incrementAndGet();
                            c.assertBytes(q, prompt);
                            if (restore && !restoreAndCheck(c, op, q, prompt, region, random)) {
                                op++;
                                continue;
                            }
                        }
                        if (random.nextInt(4) > 0) c.send(new Request.Release(op)); // else left for the fence or close
                    }
                    op++;
                }
            }
        }
        c.close();
    }

    /** Registers with a fresh epoch and registers the thread's region file as region 0. */
    private Client connect(ManagerFixture m, String instance, Path region) {
        Client c = m.connect();
        c.registerOk(instance, EPOCHS.incrementAndGet(), NS, ManagerFixture.FULL);
        assertThat(c.send(new Request.RegisterRegion(region.toString(), PAGES * ManagerFixture.SLOT,
                ManagerFixture.SLOT, PAGES))).isEqualTo(new Reply.RegionRegistered(0));
        return c;
    }

    /**
     * Restores every page of a FINAL hit into the region (page p to destination p), then either
     * checks the region's bytes after RESTORE_DONE, or releases at once and waits for DRAINED
     * before the region is used again. False when the operation was released here.
     */
    private boolean restoreAndCheck(Client c, long op, Reply.QueryResult q, long prompt, Path region,
                                    SplittableRandom random) throws IOException {
        List<Request.RestorePage> pages = new ArrayList<>();
        for (Reply.Span s : q.groups().getFirst().spans()) {
            for (int i = 0; i < s.pages().size(); i++) {
                pages.add(new Request.RestorePage(0, s.firstPage() + i, (int) (s.firstPage() + i)));
            }
        }
        if (!(c.send(new Request.Restore(op, 0, pages)) instanceof Reply.RestoreAccepted)) return true;
        if (random.nextInt(3) == 0) {
            if (c.send(new Request.Release(op)) instanceof Reply.Released rel && !rel.drained()) {
                org.awaitility.Awaitility.await().atMost(RecordingSink.WAIT).until(() ->
                        c.sink.fenced != null || c.sink.find(op, CompletionEvent.DRAINED).isPresent());
            }
            return false;
        }
        org.awaitility.Awaitility.await().atMost(RecordingSink.WAIT).until(() ->
                c.sink.fenced != null || c.sink.find(op, CompletionEvent.RESTORE_DONE).isPresent());
        if (c.sink.find(op, CompletionEvent.RESTORE_DONE).map(e -> e.outcome() == Reply.Settled.OK).orElse(false)) {
            byte[] all = java.nio.file.Files.readAllBytes(region);
            for (Request.RestorePage p : pages) {
                int at = p.destinationPage() * ManagerFixture.SLOT;
                assertThat(java.util.Arrays.copyOfRange(all, at, at + ManagerFixture.PAGE_BYTES))
                        .as("restored page %d", p.sourcePage())
                        .isEqualTo(Client.image(prompt, 0, p.sourcePage(), ManagerFixture.PAGE_BYTES));
            }
        }
        return true;
    }
}
