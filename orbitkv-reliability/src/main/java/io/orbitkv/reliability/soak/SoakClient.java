package io.orbitkv.reliability.soak;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.client.Region;
import io.orbitkv.reliability.manager.CampaignEngine;
import io.orbitkv.reliability.manager.DerivedPages;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import org.HdrHistogram.Recorder;

/**
 * One soak client: a thread with its own connection and engine instance, looping over a seeded
 * mix until told to stop: QUERY (HOST_READY; every leased byte checked, then RELEASE), RESTORE
 * (ENGINE_RESTORE into its region; every restored byte checked), PUBLISH (a run of 8 pages),
 * CANCEL (a query cancelled at once) and, rarely, a disconnect and a reconnect at the next epoch.
 *
 * <p>Names: stream {@code 1..clients}, index {@code 0..}{@value #INDEXES}, published in runs of 8,
 * so the key space (16 x 4,096 pages of 4..60 KiB, ~2 GiB) is much larger than the Manager's tiers
 * and the cache churns all the time, while every table the Manager keeps per key stays bounded by
 * its capacity. Queries name runs of any client, so clients read each other's pages.
 *
 * <p>Thread model: {@link #run} on the client's own thread; the counters are shared
 * ({@link LongAdder}, {@link Recorder}) and read by the sampler.
 */
final class SoakClient implements Runnable {

    static final int INDEXES = 4096;
    private static final int RUN = 8;
    private static final int REGION_PAGES = RUN;

    /** The counters every client adds to. */
    static final class Counters {
        final Recorder query = new Recorder(3);
        final Recorder restore = new Recorder(3);
        final LongAdder publishes = new LongAdder();
        final LongAdder cancels = new LongAdder();
        final LongAdder reconnects = new LongAdder();
        final LongAdder busy = new LongAdder();
        final LongAdder bytesChecked = new LongAdder();
        final LongAdder wrongPages = new LongAdder();
        final LongAdder errors = new LongAdder();
        final AtomicReference<String> firstProblem = new AtomicReference<>();

        void problem(String what) {
            firstProblem.compareAndSet(null, what);
        }
    }

    private final int index;
    private final int clients;
    private final Path socket;
    private final Path regionFile;
    private final SplittableRandom random;
    private final Counters counters;
    private volatile boolean stop;

    SoakClient(int index, int clients, Path socket, Path regionFile, SplittableRandom random, Counters counters) {
        this.index = index;
        this.clients = clients;
        this.socket = socket;
        this.regionFile = regionFile;
        this.random = random;
        this.counters = counters;
    }

    void stop() {
        stop = true;
    }

    @Override
    public void run() {
        long epoch = 1;
        long op = 0;
        while (!stop) {
            try (OrbitKvClient c = CampaignEngine.connect(socket, "soak-" + index, epoch++, Duration.ofSeconds(30))) {
                Region region = c.registerRegion(regionFile, CampaignEngine.MAX_PAGE_BYTES, REGION_PAGES);
                while (!stop) {
                    int pick = random.nextInt(100);
                    try {
                        if (pick < 35) query(c, ++op);
                        else if (pick < 60) restore(c, region, ++op);
                        else if (pick < 85) publish(c);
                        else if (pick < 98) cancel(c, ++op);
                        else break; // disconnect; the next connection registers at the next epoch
                    } catch (OrbitKvException e) {
                        if (e.code() != ErrorCode.BUSY) throw e;
                        counters.busy.increment();
                    }
                }
                counters.reconnects.increment();
            } catch (RuntimeException | IOException e) {
                if (stop) return;
                counters.errors.increment();
                counters.problem("client " + index + ": " + e);
            }
        }
    }

    private List<byte[]> run(int pages) {
        long stream = 1 + random.nextInt(clients);
        int first = RUN * random.nextInt(INDEXES / RUN);
        List<byte[]> names = new ArrayList<>(pages);
        for (int i = 0; i < pages; i++) names.add(DerivedPages.name(stream, first + i));
        return names;
    }

    private void query(OrbitKvClient c, long op) {
        List<byte[]> names = run(1 + random.nextInt(RUN));
        long start = System.nanoTime();
        // a QUERY refused BUSY had no effect (nothing to release); the caller counts it
        Reply.QueryResult r = c.awaitSettled(c.query(CampaignEngine.query(op, 0, CompletionTarget.HOST_READY, names)));
        counters.query.recordValue(System.nanoTime() - start);
        try {
            for (CampaignEngine.Leased l : CampaignEngine.leased(r)) {
                check(names.get((int) l.page()), c.readLease(l.lease()), "leased");
            }
        } finally {
            c.release(op);
        }
    }

    private void restore(OrbitKvClient c, Region region, long op) {
        List<byte[]> names = run(1 + random.nextInt(RUN));
        Reply.QueryResult r = c.awaitSettled(c.query(CampaignEngine.query(op, 0, CompletionTarget.ENGINE_RESTORE, names)));
        try {
            List<Request.RestorePage> mapping = OrbitKvClient.residentPages(r, 0);
            if (mapping.isEmpty()) return;
            long start = System.nanoTime();
            Reply.Completion done = c.restore(op, region, mapping);
            counters.restore.recordValue(System.nanoTime() - start);
            if (done.outcome() != Reply.Settled.OK) {
                counters.errors.increment();
                counters.problem("client " + index + ": RESTORE ended " + done.outcome());
                return;
            }
            for (Request.RestorePage p : mapping) {
                byte[] name = names.get((int) p.sourcePage());
                int length = CampaignEngine.lengthBytes(name);
                check(name, region.page(p.destinationPage()).asSlice(0, length), "restored");
            }
        } finally {
            c.release(op);
        }
    }

    private void publish(OrbitKvClient c) {
        c.publish(CampaignEngine.pages(run(RUN)));
        counters.publishes.increment();
    }

    private void cancel(OrbitKvClient c, long op) {
        c.query(CampaignEngine.query(op, 0, CompletionTarget.HOST_READY, run(1 + random.nextInt(RUN))));
        c.cancel(op);
        counters.cancels.increment();
    }

    private void check(byte[] name, java.lang.foreign.MemorySegment served, String how) {
        long wrong = CampaignEngine.firstWrongByte(name, served);
        counters.bytesChecked.add(served.byteSize());
        if (wrong >= 0) {
            counters.wrongPages.increment();
            counters.problem("client " + index + ": a " + how + " page " + java.util.HexFormat.of().formatHex(name)
                    + " has a wrong byte at " + wrong);
        }
    }
}
