package io.orbitkv.reliability.soak;

import io.orbitkv.reliability.manager.HeldResources;
import io.orbitkv.reliability.manager.ManagerNode;
import io.orbitkv.state.unix.FileTrees;
import io.orbitkv.testkit.TestSeed;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Part {@code soak} of the reliability campaign: one Manager process and {@code --clients}
 * {@link SoakClient} threads mixing query, restore, publish, cancel and disconnect/reconnect for
 * {@code --minutes}, seeded. Every {@code --sample-seconds} (a minute by default) it samples the
 * Manager's live heap ({@link ClassHistogram}: a full collection and the bytes of the
 * objects that survived it, not the allocation sawtooth), its resident set
 * ({@code VmRSS}) and the period's QUERY and RESTORE p99 (HdrHistogram interval histograms).
 *
 * <p>Rules, checked at the end (exit 1 if one fails): the first {@code --warmup-periods} (1) periods
 * are warm-up; of the periods after it, the lowest heap (and RSS) sample of the last third exceeds
 * the lowest of the first third by at most {@code --max-growth-percent} (5); the last period's p99
 * of QUERY and of RESTORE is at most {@code --p99-factor} (2) times the first period's after warm-up,
 * that reference floored at 1 ms (below it a p99 on two shared cores is scheduler noise); no
 * restored or leased byte is wrong, no client error other than BUSY; and after the clients stop
 * the Manager holds nothing ({@link HeldResources}) and exits 0 on SIGTERM.
 *
 * <p>Design note: the floor of a window rather than one sample, because a sample of 16 busy
 * clients' Manager also holds what is in flight at that instant; a leak raises the floor, noise
 * does not.
 *
 * <p>Thread model: the sampler is the calling thread; each client has its own.
 */
@Command(name = "soak", mixinStandardHelpOptions = true,
        description = "many clients mixing every operation against one Manager; heap, RSS and p99 each period")
public final class Soak implements Callable<Integer> {

    @Option(names = "--minutes", defaultValue = "30", description = "length of the run (default ${DEFAULT-VALUE})")
    int minutes;

    @Option(names = "--clients", defaultValue = "16", description = "client threads (default ${DEFAULT-VALUE})")
    int clients;

    @Option(names = "--sample-seconds", defaultValue = "60", description = "sample period; the first one is warm-up (default ${DEFAULT-VALUE})")
    int sampleSeconds;

    @Option(names = "--warmup-periods", defaultValue = "1", description = "sample periods of warm-up (default ${DEFAULT-VALUE})")
    int warmupPeriods;

    @Option(names = "--max-growth-percent", defaultValue = "5", description = "heap and RSS growth allowed after warm-up (default ${DEFAULT-VALUE})")
    double maxGrowthPercent;

    @Option(names = "--p99-factor", defaultValue = "2", description = "last period's p99 at most this times the second's (default ${DEFAULT-VALUE})")
    double p99Factor;

    @Option(names = "--seed", description = "seed of the clients' mix (default: -Dorbitkv.seed or a fresh one)")
    Long seed;

    @Option(names = "--dir", description = "working directory (default: a new temporary directory, removed after a pass)")
    Path dir;

    /** 64 MiB DRAM, 256 MiB SSD: both full within the first period, so growth after it is not filling a tier. */
    static final List<String> MANAGER_OPTIONS = List.of("--dram-bytes", "64m", "--ssd-bytes", "256m",
            "--ssd-policy", "write-through", "--set", "dramSlotBytes=64k");
    private static final double P99_FLOOR_NANOS = 1_000_000;

    /** One sample period. */
    public record Period(int index, long endMillis, long heapBytes, long rssBytes, long queries, long queryP99Nanos,
                         long restores, long restoreP99Nanos, long publishes, long cancels, long reconnects, long busy) {}

    /** What a soak found. */
    public record Result(List<Period> periods, double heapGrowthPercent, double rssGrowthPercent, long bytesChecked,
                         long wrongPages, long errors, List<String> failures) {

        public Result {
            periods = List.copyOf(periods);
            failures = List.copyOf(failures);
        }

        public boolean passed() {
            return failures.isEmpty();
        }
    }

    /** {@code bin/reliability soak [options]}: the exit status (0: every rule held). */
    public static int run(String[] args) {
        return new CommandLine(new Soak()).execute(args);
    }

    @Override
    public Integer call() throws Exception {
        if (minutes < 1 || clients < 1 || sampleSeconds < 1 || warmupPeriods < 1
                || (long) minutes * 60 / sampleSeconds < warmupPeriods + 2) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--minutes, --clients, --sample-seconds and "
                    + "--warmup-periods must be >= 1, with at least 2 sample periods after warm-up");
        }
        long s = seed != null ? seed : TestSeed.get();
        boolean temporary = dir == null;
        Path work = temporary ? Files.createTempDirectory("orbitkv-soak-") : dir;
        System.out.printf("soak: %d min, %d clients, %d s periods, seed %d, dir %s%n", minutes, clients, sampleSeconds, s, work);
        Result r = soak(work, s);
        if (temporary && r.passed()) FileTrees.delete(work);
        return r.passed() ? 0 : 1;
    }

    Result soak(Path work, long seed) throws IOException, InterruptedException {
        Path shm = Path.of("/dev/shm", "orbitkv-soak-" + ProcessHandle.current().pid());
        SplittableRandom random = new SplittableRandom(seed);
        ManagerNode manager = ManagerNode.start(work.resolve("manager"), shm, "256m", MANAGER_OPTIONS);
        SoakClient.Counters counters = new SoakClient.Counters();
        List<SoakClient> all = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            SoakClient c = new SoakClient(i, clients, manager.socket(), work.resolve("region-" + i), random.split(), counters);
            all.add(c);
            threads.add(Thread.ofPlatform().name("soak-client-" + i).start(c));
        }
        List<Period> periods = new ArrayList<>();
        List<String> failures = new ArrayList<>();
        int count = (int) ((long) minutes * 60 / sampleSeconds);
        long start = System.nanoTime();
        Histogram query = null;
        Histogram restore = null;
        long[] last = new long[4];
        ClassHistogram firstAfterWarmup = null;
        ClassHistogram lastHistogram = null;
        System.out.println("| period | end s | live heap MiB | RSS MiB | queries | QUERY p99 ms | restores | RESTORE p99 ms | publishes | cancels | reconnects | busy |");
        System.out.println("|-------:|------:|------------------:|--------:|--------:|-------------:|---------:|---------------:|----------:|--------:|-----------:|-----:|");
        try {
            for (int p = 1; p <= count; p++) {
                long due = start + TimeUnit.SECONDS.toNanos((long) p * sampleSeconds);
                long wait = due - System.nanoTime();
                if (wait > 0) TimeUnit.NANOSECONDS.sleep(wait);
                query = counters.query.getIntervalHistogram(query);
                restore = counters.restore.getIntervalHistogram(restore);
                ClassHistogram histogram = ClassHistogram.of(manager.pid());
                if (p == warmupPeriods + 1) firstAfterWarmup = histogram;
                lastHistogram = histogram;
                long heap = histogram.liveBytes();
                long rss = manager.rssBytes();
                long[] now = {counters.publishes.sum(), counters.cancels.sum(), counters.reconnects.sum(), counters.busy.sum()};
                Period period = new Period(p, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start), heap, rss,
                        query.getTotalCount(), query.getValueAtPercentile(99), restore.getTotalCount(),
                        restore.getValueAtPercentile(99), now[0] - last[0], now[1] - last[1], now[2] - last[2], now[3] - last[3]);
                last = now;
                periods.add(period);
                System.out.printf("| %d%s | %.0f | %.1f | %.1f | %d | %.2f | %d | %.2f | %d | %d | %d | %d |%n", p,
                        p <= warmupPeriods ? " (warm-up)" : "", period.endMillis() / 1000.0, mib(heap), mib(rss), period.queries(),
                        period.queryP99Nanos() / 1e6, period.restores(), period.restoreP99Nanos() / 1e6, period.publishes(),
                        period.cancels(), period.reconnects(), period.busy());
                if (!manager.isAlive()) {
                    failures.add("the Manager died: " + manager.logTail());
                    break;
                }
            }
        } finally {
            for (SoakClient c : all) c.stop();
            for (Thread t : threads) t.join(TimeUnit.SECONDS.toMillis(60));
        }
        if (firstAfterWarmup != null && lastHistogram != firstAfterWarmup) printGrowth(firstAfterWarmup, lastHistogram);
        Result r = judge(periods, counters, failures, manager);
        FileTrees.delete(shm);
        return r;
    }

    private Result judge(List<Period> periods, SoakClient.Counters counters, List<String> failures, ManagerNode manager)
            throws IOException, InterruptedException {
        double heapGrowth = Double.NaN;
        double rssGrowth = Double.NaN;
        List<Period> after = periods.size() > warmupPeriods ? periods.subList(warmupPeriods, periods.size()) : List.of();
        if (after.size() >= 2) {
            // the floor of each window: a sample also holds whatever 16 clients have in flight at that instant
            int window = (after.size() + 2) / 3;
            List<Period> early = after.subList(0, window);
            List<Period> late = after.subList(after.size() - window, after.size());
            heapGrowth = growth(floor(early, Period::heapBytes), floor(late, Period::heapBytes));
            rssGrowth = growth(floor(early, Period::rssBytes), floor(late, Period::rssBytes));
            if (heapGrowth > maxGrowthPercent) failures.add(String.format("heap grew %.1f %% after warm-up (limit %.1f %%)", heapGrowth, maxGrowthPercent));
            if (rssGrowth > maxGrowthPercent) failures.add(String.format("RSS grew %.1f %% after warm-up (limit %.1f %%)", rssGrowth, maxGrowthPercent));
            Period reference = after.getFirst();
            Period end = after.getLast();
            steady("QUERY", reference.queryP99Nanos(), end.queryP99Nanos(), end.queries(), failures);
            steady("RESTORE", reference.restoreP99Nanos(), end.restoreP99Nanos(), end.restores(), failures);
        } else if (failures.isEmpty()) {
            failures.add("fewer than 2 sample periods after warm-up");
        }
        if (counters.wrongPages.sum() > 0) failures.add(counters.wrongPages.sum() + " pages with a wrong byte: " + counters.firstProblem.get());
        if (counters.errors.sum() > 0) failures.add(counters.errors.sum() + " client errors: " + counters.firstProblem.get());
        HeldResources held = HeldResources.awaitNone(manager, 30_000);
        if (!held.none()) failures.add("30 s after the clients stopped the Manager still held " + held.held());
        int exit = manager.terminate();
        if (exit != 0) failures.add("the Manager exited " + exit + " on SIGTERM: " + manager.logTail());
        System.out.printf("heap growth after warm-up %.1f %%, RSS growth %.1f %% (limit %.1f %%); %d MiB of served pages checked, %d wrong; %d client errors%n",
                heapGrowth, rssGrowth, maxGrowthPercent, counters.bytesChecked.sum() >> 20, counters.wrongPages.sum(),
                counters.errors.sum());
        for (String f : failures) System.out.println("FAILED: " + f);
        System.out.println(failures.isEmpty() ? "soak: PASS" : "soak: FAIL");
        return new Result(periods, heapGrowth, rssGrowth, counters.bytesChecked.sum(), counters.wrongPages.sum(),
                counters.errors.sum(), failures);
    }

    private void steady(String what, long secondNanos, long lastNanos, long lastCount, List<String> failures) {
        if (lastCount == 0) {
            failures.add("no " + what + " completed in the last period");
            return;
        }
        double limit = p99Factor * Math.max(secondNanos, P99_FLOOR_NANOS);
        if (lastNanos > limit) {
            failures.add(String.format("%s p99 %.2f ms in the last period, over %.1f x the first period's after warm-up, %.2f ms", what,
                    lastNanos / 1e6, p99Factor, secondNanos / 1e6));
        }
    }

    /** Where the live heap grew between two samples: the classes that account for it, for a leak hunt. */
    private static void printGrowth(ClassHistogram from, ClassHistogram to) {
        System.out.printf("live heap %.1f -> %.1f MiB from the first sample after warm-up to the last; grown most:%n",
                mib(from.liveBytes()), mib(to.liveBytes()));
        for (var e : to.grownSince(from, 12)) System.out.printf("  %+10d B  %s%n", e.getValue(), e.getKey());
    }

    private static long floor(List<Period> window, java.util.function.ToLongFunction<Period> value) {
        return window.stream().mapToLong(value).min().orElseThrow();
    }

    private static double growth(long from, long to) {
        return 100.0 * (to - from) / from;
    }

    private static double mib(long bytes) {
        return bytes / 1048576.0;
    }
}
