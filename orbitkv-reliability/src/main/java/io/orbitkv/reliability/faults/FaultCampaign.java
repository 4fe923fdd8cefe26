package io.orbitkv.reliability.faults;

import io.orbitkv.reliability.manager.ManagerNode;
import io.orbitkv.state.unix.FileTrees;
import io.orbitkv.testkit.TestSeed;

import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorCompletionService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * {@code bin/reliability faults}: runs seeded {@link Schedule}s one at a time against the real
 * Manager core, sums the faults injected per kind, and lists every failing schedule with the
 * command that replays it. Exit status 0 when every schedule held, 1 on any failure, 2 on a
 * usage error.
 *
 * <p>Schedule {@code i} of a run with base seed {@code S} has seed {@code S + i}, so
 * {@code --schedules 1 --seed <its seed>} replays exactly that one.
 */
public final class FaultCampaign {

    /** Schedules of a full run. */
    public static final int DEFAULT_SCHEDULES = 10_000;

    /** Totals of a run. */
    public record Summary(int schedules, long steps, List<Schedule.Result> failures, Map<FaultKind, Long> faults,
                          long elapsedNanos) {
        public boolean passed() {
            return failures.isEmpty();
        }
    }

    private FaultCampaign() {}

    public static int run(String[] args) {
        int schedules = DEFAULT_SCHEDULES;
        int jobs = Math.min(2, Runtime.getRuntime().availableProcessors());
        Long seed = null;
        boolean verbose = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--schedules" -> schedules = Integer.parseInt(value(args, ++i, "--schedules"));
                case "--seed" -> seed = Long.parseLong(value(args, ++i, "--seed"));
                case "--jobs" -> jobs = Integer.parseInt(value(args, ++i, "--jobs"));
                case "--verbose" -> verbose = true;
                case "-h", "--help" -> {
                    System.out.println("usage: bin/reliability faults [--schedules N (default " + DEFAULT_SCHEDULES
                            + ")] [--seed S (schedule i has seed S+i; default: " + TestSeed.PROPERTY + " or random)]"
                            + " [--jobs J (schedules run at once, each on its own core; default " + jobs + ")]"
                            + " [--verbose (keep the Manager's own warnings: thousands, one per injected fault)]");
                    return 0;
                }
                default -> {
                    System.err.println("faults: unknown option '" + args[i] + "' (--help lists them)");
                    return 2;
                }
            }
        }
        if (schedules < 1 || jobs < 1) {
            System.err.println("faults: --schedules and --jobs must be >= 1: " + schedules + ", " + jobs);
            return 2;
        }
        long base = seed != null ? seed : TestSeed.get();
        // The injected faults make the store log what it would log for a failing disk, once per fault.
        Logger orbitkv = Logger.getLogger("io.orbitkv");
        if (!verbose) orbitkv.setLevel(Level.OFF);
        Summary s = run(schedules, base, jobs, System.out);
        return s.passed() ? 0 : 1;
    }

    private static String value(String[] args, int i, String option) {
        if (i >= args.length) throw new IllegalArgumentException(option + " needs a value");
        return args[i];
    }

    /**
     * Runs {@code schedules} schedules from seed {@code base}, {@code jobs} at a time (each its own
     * core, tiers and directory; a schedule is driven by one thread), printing failures as they
     * come and the summary to {@code out}.
     */
    public static Summary run(int schedules, long base, int jobs, PrintStream out) {
        out.println("faults: " + schedules + " schedules from seed " + base + ", " + jobs + " at a time");
        long start = System.nanoTime();
        Map<FaultKind, Long> faults = new EnumMap<>(FaultKind.class);
        for (FaultKind k : FaultKind.values()) faults.put(k, 0L);
        List<Schedule.Result> failures = new ArrayList<>();
        long steps = 0;
        Path root;
        try {
            root = Files.createTempDirectory(scratchParent(), "orbitkv-faults");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        AtomicInteger next = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(jobs, r -> Thread.ofPlatform().daemon().name("faults-", 0)
                .unstarted(r));
        ExecutorCompletionService<Schedule.Result> done = new ExecutorCompletionService<>(pool);
        try {
            int submitted = 0;
            for (; submitted < Math.min(jobs * 2, schedules); submitted++) done.submit(() -> runOne(root, base, next));
            for (int finished = 0; finished < schedules; finished++) {
                Schedule.Result r = done.take().get();
                if (submitted < schedules) {
                    done.submit(() -> runOne(root, base, next));
                    submitted++;
                }
                steps += r.steps();
                r.faults().forEach((k, v) -> faults.merge(k, v, Long::sum));
                if (r.failure().isPresent()) {
                    failures.add(r);
                    out.println("FAILED seed " + r.seed() + ": " + r.failure().get());
                    out.println("  replay: bin/reliability faults --schedules 1 --seed " + r.seed());
                }
                if ((finished + 1) % 1000 == 0) {
                    out.printf("faults: %d schedules, %d failed, %.0f s%n", finished + 1, failures.size(),
                            (System.nanoTime() - start) / 1e9);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        } catch (ExecutionException e) {
            throw new IllegalStateException("a schedule's driver failed (bug in the campaign)", e.getCause());
        } finally {
            pool.shutdownNow();
            delete(root);
        }
        failures.sort(Comparator.comparingLong(Schedule.Result::seed));
        Summary summary = new Summary(schedules, steps, List.copyOf(failures), faults, System.nanoTime() - start);
        print(summary, out);
        return summary;
    }

    private static Schedule.Result runOne(Path root, long base, AtomicInteger next) {
        long seed = base + next.getAndIncrement();
        Path dir = root.resolve(Long.toUnsignedString(seed));
        try {
            return new Schedule(seed, dir).run();
        } finally {
            delete(dir);
        }
    }

    /**
     * Where schedules keep their tiers: {@code /dev/shm} when present. The device faults are
     * injected at the extent seam, above the file system, so tmpfs (buffered I/O, no O_DIRECT)
     * changes no check, and a schedule's SSD writes cost a copy instead of a device round trip
     * (a full run took 3.4× longer on the ext4 {@code /tmp} here).
     */
    private static Path scratchParent() {
        Path shm = Path.of("/dev/shm");
        return Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir"));
    }

    private static void print(Summary s, PrintStream out) {
        out.printf("faults: %d schedules (%d steps) in %.1f s, %d failed%n", s.schedules(), s.steps(),
                s.elapsedNanos() / 1e9, s.failures().size());
        StringBuilder b = new StringBuilder("faults injected:");
        s.faults().forEach((k, v) -> b.append(' ').append(k.label()).append('=').append(v));
        out.println(b);
        for (Schedule.Result r : s.failures()) {
            out.println("  failed: --schedules 1 --seed " + r.seed());
        }
    }

    private static void delete(Path dir) {
        try {
            FileTrees.delete(dir);
        } catch (IOException e) {
            throw new UncheckedIOException("could not delete " + dir, e);
        }
    }
}
