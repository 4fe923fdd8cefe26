package io.orbitkv.reliability.crash;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.reliability.manager.CampaignEngine;
import io.orbitkv.reliability.manager.DerivedPages;
import io.orbitkv.reliability.manager.HeldResources;
import io.orbitkv.reliability.manager.ManagerNode;
import io.orbitkv.state.unix.FileTrees;
import io.orbitkv.testkit.TestSeed;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Part {@code crash} of the reliability campaign: two loops of SIGKILLs against real Manager
 * processes, driven through the real Java client.
 *
 * <ol>
 *   <li><b>Manager kills.</b> One Manager (SSD tier, {@code write-through}) takes heavy publishing
 *       from {@code --publishers} clients; at a seeded moment it is SIGKILLed, restarted on the same
 *       SSD directory, and every page published in the round (plus a sample of older rounds) is
 *       asked for and each byte of what is served is compared with the page its name derives
 *       ({@link DerivedPages}). A page absent after the crash is fine (write-through is queued);
 *       a served page with a wrong byte fails the run.
 *   <li><b>Client kills.</b> A second Manager holds preloaded pages (more than its DRAM, so reads
 *       stage from SSD); each round a {@link CrashClient} process is started in one of three modes
 *       (mid-publish, mid-lease, mid-restore, in turn), SIGKILLed at a seeded moment once its work
 *       holds something, and then the Manager must come back to holding nothing for it (sessions,
 *       operations, leases, reservations, regions, staging, SSD pins: {@link HeldResources}) within
 *       {@code --drain-timeout-ms}; it must still serve the preloaded pages byte-exact.
 * </ol>
 *
 * <p>Thread model: the loops run on the calling thread; publishers and read-back workers are
 * threads of their own, joined before the next step. Everything random comes from {@code --seed}.
 */
@Command(name = "crash", mixinStandardHelpOptions = true,
        description = "SIGKILL the Manager under write-through publishing, and clients mid-operation; check what is served and what is held")
public final class CrashLoops implements Callable<Integer> {

    @Option(names = "--rounds", defaultValue = "100", description = "Manager SIGKILL rounds (default ${DEFAULT-VALUE})")
    int rounds;

    @Option(names = "--client-rounds", defaultValue = "-1", description = "client SIGKILL rounds (default: --rounds)")
    int clientRounds;

    @Option(names = "--seed", description = "seed of every random choice (default: -Dorbitkv.seed or a fresh one)")
    Long seed;

    @Option(names = "--dir", description = "working directory (default: a new temporary directory, removed after a pass)")
    Path dir;

    @Option(names = "--publishers", defaultValue = "4", description = "publishing clients in a Manager round (default ${DEFAULT-VALUE})")
    int publishers;

    @Option(names = "--kill-after-ms", defaultValue = "0..1500", split = "\\.\\.",
            description = "range the SIGKILL moment is drawn from, after the first sealed batch (default ${DEFAULT-VALUE})")
    long[] killAfterMs;

    @Option(names = "--sample-older", defaultValue = "256", description = "pages of earlier rounds read back each round (default ${DEFAULT-VALUE})")
    int sampleOlder;

    @Option(names = "--preload", defaultValue = "768", description = "pages preloaded for the client loop, ~24 MiB (default ${DEFAULT-VALUE})")
    int preload;

    @Option(names = "--drain-timeout-ms", defaultValue = "30000", description = "deadline for the Manager to hold nothing after a client kill (default ${DEFAULT-VALUE})")
    long drainTimeoutMs;

    /** Manager options: a 16 MiB DRAM tier (so rounds reach SSD at once) and write-through SSD admission. */
    static final List<String> MANAGER_OPTIONS = List.of("--dram-bytes", "16m", "--ssd-bytes", "192m",
            "--ssd-policy", "write-through", "--set", "dramSlotBytes=64k");
    /** Most names one publisher invents in a round: bounds the read-back (about 5 s of publishing here). */
    private static final int MAX_NAMES_PER_PUBLISHER = 8192;
    /** Names of earlier rounds kept to sample from (a reservoir). */
    private static final int OLDER_RESERVOIR = 65_536;

    /** What the loops found. */
    public record Result(int managerRounds, long pagesPublished, long pagesAcknowledged, long pagesAsked, long pagesServed,
                         long corruptPages, long extentsDropped, int clientRounds, int leaks, List<String> failures) {

        public Result {
            failures = List.copyOf(failures);
        }

        public boolean passed() {
            return corruptPages == 0 && leaks == 0 && failures.isEmpty();
        }
    }

    /** {@code bin/reliability crash [options]}: the exit status (0: no corrupt page, no leak). */
    public static int run(String[] args) {
        return new CommandLine(new CrashLoops()).execute(args);
    }

    @Override
    public Integer call() throws Exception {
        if (rounds < 0 || publishers < 1 || killAfterMs.length != 2 || killAfterMs[0] < 0 || killAfterMs[1] < killAfterMs[0]) {
            throw new CommandLine.ParameterException(new CommandLine(this), "bad --rounds, --publishers or --kill-after-ms");
        }
        long s = seed != null ? seed : TestSeed.get();
        boolean temporary = dir == null;
        Path work = temporary ? Files.createTempDirectory("orbitkv-crash-") : dir;
        System.out.printf("crash loops: %d Manager rounds, %d client rounds, seed %d, dir %s%n",
                rounds, clientRounds < 0 ? rounds : clientRounds, s, work);
        Result r = loops(work, s);
        print(r, s);
        if (temporary && r.passed()) FileTrees.delete(work);
        return r.passed() ? 0 : 1;
    }

    /** Both loops over {@code work} with {@code seed}. */
    Result loops(Path work, long seed) throws IOException, InterruptedException {
        SplittableRandom random = new SplittableRandom(seed);
        Path shm = Path.of("/dev/shm", "orbitkv-crash-" + ProcessHandle.current().pid());
        List<String> failures = new ArrayList<>();
        try {
            ManagerRounds m = managerRounds(work.resolve("manager-kills"), shm.resolve("a"), random.split(), failures);
            int[] leaks = {0};
            long[] clientPages = {0, 0, 0};
            int done = clientRounds(work.resolve("client-kills"), shm.resolve("b"), random.split(), failures, leaks, clientPages);
            return new Result(m.rounds, m.published, m.acknowledged, m.reads.asked.get() + clientPages[0],
                    m.reads.served.get() + clientPages[1], m.reads.corrupt.get() + clientPages[2], m.dropped, done, leaks[0], failures);
        } finally {
            FileTrees.delete(shm);
        }
    }

    private static final class ManagerRounds {
        int rounds;
        long published;
        long acknowledged;
        long dropped;
        final ServedPages reads = new ServedPages();
    }

    private ManagerRounds managerRounds(Path dir, Path shm, SplittableRandom random, List<String> failures)
            throws IOException, InterruptedException {
        ManagerRounds out = new ManagerRounds();
        List<byte[]> older = new ArrayList<>();
        long olderSeen = 0;
        List<byte[]> previous = List.of();
        ManagerNode manager = ManagerNode.start(dir, shm, "192m", MANAGER_OPTIONS);
        for (int round = 0; round <= rounds; round++) {
            // read back what the previous round published (and a sample of older rounds), from a Manager that just recovered
            List<byte[]> ask = new ArrayList<>(previous);
            for (int i = 0; i < Math.min(sampleOlder, older.size()); i++) ask.add(older.get(random.nextInt(older.size())));
            try (OrbitKvClient reader = CampaignEngine.connect(manager.socket(), "reader", 1, Duration.ofSeconds(30))) {
                long corruptBefore = out.reads.corrupt.get();
                out.reads.check(reader, ask, 4);
                if (out.reads.corrupt.get() > corruptBefore) {
                    failures.add("round " + round + ": " + (out.reads.corrupt.get() - corruptBefore) + " corrupt pages, "
                            + out.reads.firstCorrupt.get());
                }
            }
            for (byte[] n : previous) {
                olderSeen++;
                if (older.size() < OLDER_RESERVOIR) older.add(n);
                else if (random.nextLong(olderSeen) < OLDER_RESERVOIR) older.set(random.nextInt(OLDER_RESERVOIR), n);
            }
            if (round == rounds) break;

            List<byte[]> attempted = Collections.synchronizedList(new ArrayList<>());
            AtomicLong acknowledged = new AtomicLong();
            List<Thread> publishing = new ArrayList<>();
            Path socket = manager.socket();
            for (int p = 0; p < publishers; p++) {
                long stream = (long) round * publishers + p + 1;
                int index = p;
                publishing.add(Thread.ofPlatform().name("publisher-" + p).start(() ->
                        publishUntilKilled(socket, "publisher-" + index, stream, attempted, acknowledged)));
            }
            long killAfter = killAfterMs[0] + random.nextLong(killAfterMs[1] - killAfterMs[0] + 1);
            // the kill moment counts from the first sealed batch, so a cold start never eats the round
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (acknowledged.get() == 0 && System.nanoTime() < deadline && publishing.stream().anyMatch(Thread::isAlive)) {
                Thread.sleep(1);
            }
            Thread.sleep(killAfter);
            manager.kill();
            for (Thread t : publishing) t.join(TimeUnit.SECONDS.toMillis(60));
            out.published += attempted.size();
            out.acknowledged += acknowledged.get();
            out.rounds++;
            previous = new ArrayList<>(attempted);

            manager = ManagerNode.start(dir, shm, "192m", MANAGER_OPTIONS);
            out.dropped = (long) ManagerNode.sum(manager.metrics(), "orbitkv_ssd_corrupt_dropped_total") + out.dropped;
            System.out.printf("  manager round %3d: SIGKILL after %4d ms, %5d pages published (%5d acknowledged), restarted;"
                    + " so far %d pages served after restarts, %d corrupt%n", round, killAfter, attempted.size(), acknowledged.get(),
                    out.reads.served.get(), out.reads.corrupt.get());
        }
        int exit = manager.terminate();
        if (exit != 0) failures.add("the last Manager of the kill loop exited " + exit + " on SIGTERM: " + manager.logTail());
        return out;
    }

    /** One publisher: batches of 8 pages of its own stream until the Manager dies (or its name budget is spent). */
    private static void publishUntilKilled(Path socket, String instance, long stream, List<byte[]> attempted, AtomicLong acked) {
        try (OrbitKvClient c = CampaignEngine.connect(socket, instance, 1, Duration.ofSeconds(10))) {
            for (long next = 0; next < MAX_NAMES_PER_PUBLISHER; ) {
                List<byte[]> batch = new ArrayList<>(8);
                for (int i = 0; i < 8; i++) batch.add(DerivedPages.name(stream, next++));
                // recorded before the call: a page may be sealed (and written through) before its reply is lost
                attempted.addAll(batch);
                for (PublishOutcome o : c.publish(CampaignEngine.pages(batch))) if (o == PublishOutcome.SEALED) acked.incrementAndGet();
            }
        } catch (RuntimeException | IOException e) {
            // the Manager was killed under it: the expected end of a publisher
        }
    }

    private int clientRounds(Path dir, Path shm, SplittableRandom random, List<String> failures, int[] leaks, long[] pages)
            throws IOException, InterruptedException {
        int total = clientRounds < 0 ? rounds : clientRounds;
        ManagerNode manager = ManagerNode.start(dir, shm, "192m", MANAGER_OPTIONS);
        List<byte[]> preloaded = new ArrayList<>();
        for (int i = 0; i < preload; i++) preloaded.add(DerivedPages.name(0, i));
        try (OrbitKvClient c = CampaignEngine.connect(manager.socket(), "preload", 1, Duration.ofSeconds(30))) {
            c.publish(CampaignEngine.pages(preloaded));
        }
        ServedPages control = new ServedPages();
        int done = 0;
        for (int round = 0; round < total; round++) {
            CrashClient.Mode mode = CrashClient.Mode.values()[round % CrashClient.Mode.values().length];
            Process child = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "--enable-native-access=ALL-UNNAMED", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx96m",
                    "-cp", System.getProperty("java.class.path"), CrashClient.class.getName(), manager.socket().toString(),
                    mode.name(), Long.toString(random.nextLong()), Integer.toString(preload), dir.toString())
                    .redirectErrorStream(true).start();
            String line = firstLine(child, 60);
            if (!"ACTIVE".equals(line)) {
                child.destroyForcibly().waitFor();
                failures.add("client round " + round + " (" + mode + "): the client never became active: " + line);
                continue;
            }
            Thread.sleep(random.nextLong(200));
            HeldResources held = HeldResources.of(manager);
            child.destroyForcibly();
            child.waitFor();
            HeldResources after = HeldResources.awaitNone(manager, drainTimeoutMs);
            if (!after.none()) {
                leaks[0]++;
                failures.add("client round " + round + " (" + mode + "): still held " + drainTimeoutMs + " ms after the kill: "
                        + after.held());
            }
            // the Manager still serves the preloaded pages, byte-exact
            try (OrbitKvClient c = CampaignEngine.connect(manager.socket(), "control", round + 1, Duration.ofSeconds(30))) {
                List<byte[]> sample = new ArrayList<>();
                for (int i = 0; i < 8; i++) sample.add(preloaded.get(random.nextInt(preloaded.size())));
                control.check(c, sample, 2);
            }
            done++;
            System.out.printf("  client round %3d: %-7s held at kill: %s; after: %s%n", round, mode, held.held(), after.held());
        }
        if (control.corrupt.get() > 0) failures.add(control.corrupt.get() + " corrupt preloaded pages: " + control.firstCorrupt.get());
        pages[0] = control.asked.get();
        pages[1] = control.served.get();
        pages[2] = control.corrupt.get();
        int exit = manager.terminate();
        if (exit != 0) failures.add("the client-loop Manager exited " + exit + " on SIGTERM: " + manager.logTail());
        return done;
    }

    /** The child's first output line, or a description of why there was none within {@code seconds}. */
    private static String firstLine(Process child, long seconds) throws InterruptedException {
        BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        CompletableFuture<String> line = CompletableFuture.supplyAsync(() -> {
            try {
                StringBuilder seen = new StringBuilder();
                for (String l; (l = out.readLine()) != null; ) {
                    if (l.equals("ACTIVE")) return l;
                    if (seen.length() < 4096) seen.append(l).append('\n');
                }
                return "(exited " + child.waitFor() + ") " + seen;
            } catch (IOException | InterruptedException e) {
                return e.toString();
            }
        });
        try {
            return line.get(seconds, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            return "(no ACTIVE within " + seconds + " s)";
        }
    }

    private static void print(Result r, long seed) {
        System.out.println();
        System.out.println("| loop | rounds | checked | result |");
        System.out.println("|------|--------|---------|--------|");
        System.out.printf("| Manager SIGKILL under write-through publish | %d | %d pages published (%d acknowledged); %d asked after restarts, %d served | %d corrupt pages served; %d damaged extents dropped at recovery |%n",
                r.managerRounds(), r.pagesPublished(), r.pagesAcknowledged(), r.pagesAsked(), r.pagesServed(), r.corruptPages(),
                r.extentsDropped());
        System.out.printf("| client SIGKILL mid-publish / mid-lease / mid-restore | %d | sessions, operations, leases, reservations, regions, staging, SSD pins | %d leaked |%n",
                r.clientRounds(), r.leaks());
        for (String f : r.failures()) System.out.println("FAILED: " + f);
        System.out.println(r.passed() ? "crash loops: PASS (seed " + seed + ")" : "crash loops: FAIL (seed " + seed + ")");
    }
}
