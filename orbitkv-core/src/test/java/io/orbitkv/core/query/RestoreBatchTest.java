package io.orbitkv.core.query;

import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.transfer.EngineRegion;
import io.orbitkv.state.Namespace;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * {@link RestoreBatch#copyShared}: the calling thread and one helper take pages from one counter;
 * the caller reports once, on its own thread, only after a helper still copying has ended, and a
 * helper that starts after the caller is done copies nothing.
 */
@org.junit.jupiter.api.Timeout(60)
class RestoreBatchTest {

    static final Namespace NS = QueryKit.namespace("restore-batch");
    static final int PAGES = 6;
    static final Duration WAIT = Duration.ofSeconds(10);

    @TempDir
    Path dir;
    QueryKit kit;
    EngineRegion region;
    final List<PageSlot> sources = new ArrayList<>();
    final List<MemorySegment> targets = new ArrayList<>();
    /** What onCopied got, and on which thread. */
    final List<RestoreBatch.Copied> reports = new CopyOnWriteArrayList<>();
    final List<Thread> reportedOn = new CopyOnWriteArrayList<>();

    @BeforeEach
    void open() throws Exception {
        kit = new QueryKit(dir);
        SessionScope scope = kit.scope(NS, 1, QueryKit.FULL);
        region = QueryKit.region(dir.resolve("region"), QueryKit.SLOT, PAGES);
        for (int p = 0; p < PAGES; p++) {
            kit.publish(scope, 7, 0, p);
            Lease lease = (Lease) kit.store.acquire(QueryKit.key(NS, 7, 0, p), scope.namespaceId());
            sources.add(PageSlot.resident(0, p, lease));
            targets.add(region.page(p, QueryKit.PAGE_BYTES));
        }
    }

    @AfterEach
    void close() {
        for (PageSlot s : sources) s.lease.release();
        region.close();
        kit.close();
    }

    private RestoreBatch batch(BooleanSupplier stopped) {
        return new RestoreBatch(sources, targets, region, stopped, copied -> {
            reports.add(copied);
            reportedOn.add(Thread.currentThread());
        });
    }

    private void assertEveryPageCopiedOnce() {
        assertThat(reports).hasSize(1);
        assertThat(reports.getFirst().bytes()).isEqualTo((long) PAGES * QueryKit.PAGE_BYTES);
        assertThat(reports.getFirst().failed()).isFalse();
        for (int p = 0; p < PAGES; p++) {
            byte[] got = targets.get(p).toArray(ValueLayout.JAVA_BYTE);
            assertThat(got).as("page %d", p).isEqualTo(QueryKit.image(QueryKit.key(NS, 7, 0, p)));
        }
    }

    @Test
    void theCallerWaitsForAHelperStillCopyingThenReportsOnItsOwnThread() throws Exception {
        CountDownLatch helperHoldsAPage = new CountDownLatch(1);
        CountDownLatch letHelperGo = new CountDownLatch(1);
        Thread[] caller = new Thread[1];
        // The stop check runs once per page taken: the helper stops there holding its first page;
        // the caller does not copy its first page until the helper holds one.
        BooleanSupplier stopped = () -> {
            try {
                if (Thread.currentThread().getName().equals("helper") && helperHoldsAPage.getCount() > 0) {
                    helperHoldsAPage.countDown();
                    assertThat(letHelperGo.await(WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
                } else if (Thread.currentThread() == caller[0]) {
                    assertThat(helperHoldsAPage.await(WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
                }
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
            return false;
        };
        RestoreBatch batch = batch(stopped);
        caller[0] = Thread.ofPlatform().name("caller").unstarted(() -> batch.copyShared(task -> {
            Thread.ofPlatform().name("helper").start(task);
            return true;
        }));
        caller[0].start();
        // The caller copied every other page and now waits for the helper's one (parked on it).
        await().atMost(WAIT).until(() -> LockSupport.getBlocker(caller[0]) != null
                && LockSupport.getBlocker(caller[0]).getClass().getSimpleName().equals("Helper"));
        assertThat(reports).as("no report while the helper still copies").isEmpty();
        letHelperGo.countDown();
        caller[0].join(WAIT.toMillis());
        assertThat(caller[0].isAlive()).isFalse();
        assertEveryPageCopiedOnce();
        assertThat(reportedOn).containsExactly(caller[0]);
    }

    @Test
    void aHelperEndedByAnErrorFailsTheBatchAndReleasesTheCaller() throws Exception {
        CountDownLatch helperFailing = new CountDownLatch(1);
        BooleanSupplier stopped = () -> {
            try {
                if (Thread.currentThread().getName().equals("helper")) {
                    helperFailing.countDown();
                    throw new AssertionError("a copy thread ended by an Error");
                }
                assertThat(helperFailing.await(WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
            return false;
        };
        RestoreBatch batch = batch(stopped);
        Thread caller = Thread.ofPlatform().name("caller").start(() -> batch.copyShared(task -> {
            Thread.ofPlatform().name("helper").uncaughtExceptionHandler((t, e) -> { }).start(task);
            return true;
        }));
        caller.join(WAIT.toMillis());
        assertThat(caller.isAlive()).as("the caller is not left waiting").isFalse();
        assertThat(reports).hasSize(1);
        assertThat(reports.getFirst().failed()).isTrue();
        assertThat(reportedOn).containsExactly(caller);
    }

    @Test
    void aHelperThatStartsAfterTheCallerIsDoneCopiesNothing() {
        Runnable[] offered = new Runnable[1];
        RestoreBatch batch = batch(() -> false);
        batch.copyShared(task -> {
            offered[0] = task;
            return true;
        });
        assertEveryPageCopiedOnce();
        assertThat(reportedOn).containsExactly(Thread.currentThread());
        targets.forEach(t -> t.fill((byte) 0));
        offered[0].run(); // late: closed by the caller, so it neither copies nor reports
        assertThat(reports).hasSize(1);
        assertThat(targets.getFirst().get(ValueLayout.JAVA_BYTE, 0)).isZero();
        assertThat(targets.getLast().get(ValueLayout.JAVA_BYTE, QueryKit.PAGE_BYTES - 1)).isZero();
    }
}
