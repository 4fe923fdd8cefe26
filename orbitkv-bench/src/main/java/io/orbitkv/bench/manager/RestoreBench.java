package io.orbitkv.bench.manager;

import io.orbitkv.bench.Throughput;
import io.orbitkv.bench.manager.ManagerBench.Options;
import io.orbitkv.bench.manager.ManagerBench.Prefix;
import io.orbitkv.bench.storage.BenchRow;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.Region;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static io.orbitkv.bench.manager.ManagerBench.BIG_PAGE_BYTES;
import static io.orbitkv.bench.manager.ManagerBench.log;

/**
 * The restore row of {@link ManagerBench}: ENGINE_RESTORE of {@code pages} × 2 MiB resident pages
 * into a registered region, as an engine restores a hit (QUERY and RESTORE pipelined in one round
 * trip, the Manager's copy, a RELEASE it does not wait for), against {@code MemorySegment.copy}
 * of the same arena pages into the same region on one thread (the target's baseline) and on every
 * core. Before timing, the restore path alone must produce the bytes; after it, the Manager's
 * {@code restore_bytes} counter must equal what the restores asked for.
 *
 * <p>Thread model: the caller's thread runs the restores and the one-thread copy; the parallel
 * copy runs on a fixed pool of one platform thread per core. Rounds are paired and alternate
 * ({@link Throughput#pairedRoundsAgainstEach}), with the CPU time and run-queue wait of both
 * processes per restore ({@link Schedstat}) logged beside. A restore of at most 16 MiB also gets
 * a row at an engine's cadence: one restore, then one copy, each after a 200 ms idle pause.
 */
final class RestoreBench {

    /**
     * Untimed restores (each followed by a one-thread copy) before the paired rounds. The restore
     * path is first run here, so the Manager's C2 compiles it now: after the 32 of before, C2 was
     * still compiling through the timed rounds (300 compilations, 1.7 s of the Manager's CPU over
     * 12 s, 28 % of its samples; 2026-12-06). A restore of more than 16 MiB warms with fewer (16 GiB
     * restored at most, at least one round's worth). Override with {@code -Dbench.restoreWarmUps=N}.
     */
    static final int WARM_UP_RESTORES = Integer.getInteger("bench.restoreWarmUps", 1_000);

    private RestoreBench() {
    }

    /** Idle pause before each paced restore and copy: an engine restores one hit per request. */
    static final long PACED_PAUSE_MILLIS = 200;
    static final int PACED_SAMPLES = 20;
    /** Paced rows only for restores the connection's thread copies (the default inline bound). */
    static final long PACED_MAX_BYTES = 16L << 20;

    static List<BenchRow> restore(OrbitKvClient client, Prefix big, int pages, Options o, long managerPid)
            throws IOException {
        long bytes = (long) pages * BIG_PAGE_BYTES;
        Path regionFile = o.shmDir().resolve("region-" + pages);
        Files.deleteIfExists(regionFile);
        Region region = client.registerRegion(regionFile, BIG_PAGE_BYTES, pages);
        // The baseline copies from the same arena pages (a HOST_READY lease) into the same region.
        Reply.QueryResult held = client.awaitSettled(client.query(big.query(3, CompletionTarget.HOST_READY, pages)));
        List<MemorySegment> sources = new ArrayList<>();
        for (Reply.GroupResult g : held.groups()) {
            for (Reply.Span s : g.spans()) {
                for (Reply.PageResult p : s.pages()) {
                    if (p instanceof Reply.Resident(Reply.Lease lease)) sources.add(client.readLease(lease));
                }
            }
        }
        if (sources.size() != pages) throw new IllegalStateException("only " + sources.size() + " of " + pages + " resident");
        Request.Query query = big.query(4, CompletionTarget.ENGINE_RESTORE, pages);
        List<Request.RestorePage> mapping = new ArrayList<>(pages);
        for (int i = 0; i < pages; i++) mapping.add(new Request.RestorePage(0, i, i));
        long[] restores = new long[1];
        List<java.util.concurrent.CompletableFuture<Reply.Released>> lastRelease =
                new ArrayList<>(List.of(java.util.concurrent.CompletableFuture.completedFuture(new Reply.Released(4, true, 0))));
        // What an engine does per hit: QUERY and RESTORE pipelined (one round trip), the copy, and a
        // RELEASE it does not wait for (the next QUERY on the connection is handled after it).
        java.util.function.LongSupplier subject = () -> {
            OrbitKvClient.Restored r = client.queryAndRestore(query, region, mapping);
            if (!r.restoredOk()) throw new IllegalStateException("restore: " + r.completion());
            lastRelease.set(0, client.releaseAsync(4));
            restores[0]++;
            return bytes;
        };
        // The restore path alone must produce the bytes (the baseline writes the same ones later).
        region.mapping().fill((byte) 0);
        long copiedBefore = client.stats().get("restore_bytes");
        subject.getAsLong();
        for (int i = 0; i < pages; i++) {
            if (region.page(i).mismatch(sources.get(i)) != -1) throw new IllegalStateException("restored page " + i + " differs");
        }
        java.util.function.LongSupplier oneThread = () -> {
            for (int i = 0; i < pages; i++) MemorySegment.copy(sources.get(i), 0, region.page(i), 0, BIG_PAGE_BYTES);
            return bytes;
        };
        int opsPerRound = (int) Math.max(2, (512L << 20) / bytes);
        int threads = Runtime.getRuntime().availableProcessors();
        List<Throughput.Paired> p;
        try (ExecutorService pool = Executors.newFixedThreadPool(threads)) {
            java.util.function.DoubleSupplier parallelRound = () -> {
                long t0 = System.nanoTime();
                for (int op = 0; op < opsPerRound; op++) {
                    List<Future<?>> parts = new ArrayList<>();
                    for (int t = 0; t < threads; t++) {
                        int first = t;
                        parts.add(pool.submit(() -> {
                            for (int i = first; i < pages; i += threads) {
                                MemorySegment.copy(sources.get(i), 0, region.page(i), 0, BIG_PAGE_BYTES);
                            }
                        }));
                    }
                    for (Future<?> f : parts) {
                        try {
                            f.get();
                        } catch (Exception e) {
                            throw new IllegalStateException(e);
                        }
                    }
                }
                return (double) bytes * opsPerRound / (System.nanoTime() - t0);
            };
            for (long i = Math.max(opsPerRound, Math.min(WARM_UP_RESTORES, (16L << 30) / bytes)); i > 0; i--) {
                subject.getAsLong();
                oneThread.getAsLong();
            }
            // Where a restore's wall time goes: CPU of both processes and their run-queue wait, per
            // restore and per one-thread copy, over the timed rounds (schedstat).
            Schedstat[] restoreTime = {Schedstat.ZERO, Schedstat.ZERO};
            Schedstat[] copyTime = {Schedstat.ZERO};
            long self = ProcessHandle.current().pid();
            p = Throughput.pairedRoundsAgainstEach(() -> {
                Schedstat bench0 = Schedstat.of(self);
                Schedstat manager0 = Schedstat.of(managerPid);
                double r = rate(subject, opsPerRound);
                restoreTime[0] = restoreTime[0].plus(Schedstat.of(self).minus(bench0));
                restoreTime[1] = restoreTime[1].plus(Schedstat.of(managerPid).minus(manager0));
                return r;
            }, List.of(() -> {
                Schedstat bench0 = Schedstat.of(self);
                double r = rate(oneThread, opsPerRound);
                copyTime[0] = copyTime[0].plus(Schedstat.of(self).minus(bench0));
                return r;
            }, parallelRound), o.rounds());
            double ops = (double) opsPerRound * o.rounds();
            log(String.format(java.util.Locale.ROOT, "restore %d × 2 MiB, per restore: CPU Manager %.1f µs, bench JVM"
                            + " %.1f µs, run-queue wait Manager %.1f µs, bench JVM %.1f µs; per one-thread copy: CPU %.1f"
                            + " µs, wait %.1f µs", pages, restoreTime[1].runNanos() / 1e3 / ops,
                    restoreTime[0].runNanos() / 1e3 / ops, restoreTime[1].waitNanos() / 1e3 / ops,
                    restoreTime[0].waitNanos() / 1e3 / ops, copyTime[0].runNanos() / 1e3 / ops,
                    copyTime[0].waitNanos() / 1e3 / ops));
        }
        BenchRow paced = bytes <= PACED_MAX_BYTES ? paced(subject, oneThread, pages, bytes) : null;
        lastRelease.get(0).join();
        long copied = client.stats().get("restore_bytes") - copiedBefore;
        if (copied != restores[0] * bytes) {
            throw new IllegalStateException("the Manager copied " + copied + " B for " + restores[0] + " restores of " + bytes);
        }
        client.release(3);
        Throughput.Paired single = p.get(0);
        Throughput.Paired parallel = p.get(1);
        log("restore " + pages + " × 2 MiB: " + BenchRow.fmt(single.subjectRate(), 2) + " GB/s vs copy "
                + BenchRow.fmt(single.baselineRate(), 2) + " GB/s (1 thread) → " + BenchRow.fmt(single.ratio(), 3)
                + ", vs " + BenchRow.fmt(parallel.baselineRate(), 2) + " GB/s (" + threads + " threads) → "
                + BenchRow.fmt(parallel.ratio(), 3));
        BenchRow row = new BenchRow("Restore " + pages + " × 2 MiB pages (QUERY + RESTORE pipelined → COMPLETION; RELEASE not awaited)",
                BenchRow.fmt(single.subjectRate(), 2) + " GB/s",
                BenchRow.fmt(single.baselineRate(), 2) + " GB/s (MemorySegment.copy, same pages, 1 thread; on "
                        + threads + " threads " + BenchRow.fmt(parallel.baselineRate(), 2) + " GB/s, ratio "
                        + BenchRow.fmt(parallel.ratio(), 3) + ")",
                single.ratio(), BenchRow.Target.atLeast(0.9));
        return paced == null ? List.of(row) : List.of(row, paced);
    }

    /**
     * {@value #PACED_SAMPLES} restores and as many one-thread copies, each after
     * {@value #PACED_PAUSE_MILLIS} ms of idleness, alternating: the ratio of their p50 times (copy
     * over restore, so above 1 is faster than the copy).
     */
    private static BenchRow paced(java.util.function.LongSupplier restore, java.util.function.LongSupplier copy,
                                  int pages, long bytes) {
        org.HdrHistogram.Histogram r = ManagerBench.histogram();
        org.HdrHistogram.Histogram c = ManagerBench.histogram();
        try {
            for (int i = 0; i < PACED_SAMPLES; i++) {
                Thread.sleep(PACED_PAUSE_MILLIS);
                long t0 = System.nanoTime();
                restore.getAsLong();
                r.recordValue(System.nanoTime() - t0);
                Thread.sleep(PACED_PAUSE_MILLIS);
                long t1 = System.nanoTime();
                copy.getAsLong();
                c.recordValue(System.nanoTime() - t1);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
        double ratio = (double) c.getValueAtPercentile(50) / r.getValueAtPercentile(50);
        String name = "Restore " + pages + " × 2 MiB after a " + PACED_PAUSE_MILLIS + " ms idle pause, p50 (an engine's cadence; "
                + PACED_SAMPLES + " samples)";
        log(name + ": " + ManagerBench.p50p99(r) + " vs copy " + ManagerBench.p50p99(c) + " → " + BenchRow.fmt(ratio, 3)
                + " (" + BenchRow.fmt(bytes / (double) r.getValueAtPercentile(50), 2) + " against "
                + BenchRow.fmt(bytes / (double) c.getValueAtPercentile(50), 2) + " GB/s)");
        return new BenchRow(name, ManagerBench.p50p99(r), ManagerBench.p50p99(c)
                + " (MemorySegment.copy of the same pages on one thread after the same pause)", ratio,
                BenchRow.Target.atLeast(0.9));
    }

    /** GB/s of {@code ops} calls of {@code op}, each returning the bytes it moved. */
    private static double rate(java.util.function.LongSupplier op, int ops) {
        long t0 = System.nanoTime();
        long moved = 0;
        for (int i = 0; i < ops; i++) moved += op.getAsLong();
        return (double) moved / (System.nanoTime() - t0);
    }
}
