package io.orbitkv.bench.ttft;

import io.orbitkv.engine.FullAttention;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.ManagerLauncher;
import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.PrefixLookup;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;

import io.orbitkv.testkit.ManagerProcess;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Runs the workload on one engine through every arm and collects the samples.
 *
 * <p>Owns two Manager processes for the duration of {@link #run}: {@code dram-arm} stays up (the
 * DRAM arm publishes and hits there; the miss arm queries it under its own namespace), and
 * {@code ssd-arm} is stopped and started again before every SSD-arm request, so each of those
 * requests finds its pages only in the SSD store (write-through) and has them staged; and the
 * {@link CrossHostArm} (an etcd and a two-Manager cluster whose second host is new for every
 * request). Thread model: single-threaded.
 *
 * <p>Invariants: every arm keeps its own conversation history (its own generated answers), so a
 * hit arm's next prompt contains exactly the tokens it published; all arms' prompts have the same
 * lengths. The five paired arms run back to back for each request in an order that rotates by
 * one per request (so no arm always follows a Manager restart or always runs first); the
 * full-prefix DRAM request runs right after the DRAM arm.
 *
 * <p>Design note: requests go turn-major (turn 1 of every session, then turn 2, ...), so sessions
 * interleave and turn 1 of sessions 2..N already hits the shared system prompt. A warm-up
 * workload with other texts runs first through every arm and is discarded (JIT, Jlama's Vector
 * API intrinsics, the client's code paths). Manager restarts are outside the timed interval, and
 * each restarted SSD-arm Manager first serves one untimed request for the warm-up's pages (staged
 * from SSD too): without it the SSD arm measured the new Manager JVM's interpreted first query
 * (80-240 ms on the CI model against 30 ms DRAM hits) more than the SSD read.
 */
final class TtftRun {

    /** What one engine's run produced. */
    record Result(String engine, List<Sample> samples, long stepNanos, int stepContextTokens,
                  double copyBytesPerSecond, long pageBytes, int pageTokens, int managerRestarts, long missQueries,
                  long lookupNanos, int lookupPages, long missLookupNanos, int crossHosts, long crossMissedPrimers) {
    }

    private final TtftEngine engine;
    private final List<Sample> discarded = new ArrayList<>();
    private final Path dir;
    private final PrintStream log;
    private final List<Arm> paired;
    private CrossHostArm cross;
    private ManagerProcess ssdManager;
    private OrbitKvPageStore ssdStore;
    private long ssdEpoch;
    private int restarts;
    /** A warm-up prompt whose pages the SSD arm's Manager holds (empty until the warm-up's first SSD request). */
    private int[] ssdPrimer = new int[0];

    private TtftRun(TtftEngine engine, Path dir, PrintStream log, List<Arm> paired) {
        this.engine = engine;
        this.dir = dir;
        this.log = log;
        this.paired = paired;
    }

    /**
     * Runs {@code workload} (after its warm-up) on {@code engine} with Managers under {@code dir},
     * through the {@code paired} arms (a subset of {@link Arm#PAIRED} in its order).
     */
    static Result run(TtftEngine engine, Workload workload, Path dir, PrintStream log, List<Arm> paired)
            throws IOException, InterruptedException {
        return new TtftRun(engine, dir, log, paired).run(workload);
    }

    private Result run(Workload workload) throws IOException, InterruptedException {
        Path dramDir = dir.resolve(slug() + "-dram-arm");
        try (ManagerProcess dram = ManagerLauncher.start(dramDir, engine.pageBytes());
             OrbitKvPageStore dramStore = OrbitKvPageStore.connect(dram.socket(), slug() + "-dram", 1, engine.namespace());
             QueryOnlyStore missStore = new QueryOnlyStore(
                     OrbitKvPageStore.connect(dram.socket(), slug() + "-miss", 1, engine.missNamespace()))) {
            ssdManager = ManagerLauncher.start(dir.resolve(slug() + "-ssd-arm"), engine.pageBytes());
            ssdStore = OrbitKvPageStore.connect(ssdManager.socket(), slug() + "-ssd", ++ssdEpoch, engine.namespace());
            try {
                if (paired.contains(Arm.CROSS)) cross = CrossHostArm.start(engine, dir.resolve(slug() + "-cross-arm"));
                TtftEngine.Runner cold = engine.runner(engine.namespace(), KvPageStore.cold());
                TtftEngine.Runner miss = engine.runner(engine.missNamespace(), missStore);
                TtftEngine.Runner warm = engine.runner(engine.namespace(), dramStore);
                log.printf("ttft: %s warm-up (%s)%n", engine.name(), workload.warmup());
                conversation(workload.warmup(), cold, miss, warm, discarded);
                warmLookupPath(dramStore, lastTurnSizedPrompt(workload));
                restarts = 0;
                int warmupHosts = cross == null ? 0 : cross.hostsStarted();
                List<Sample> samples = new ArrayList<>();
                log.printf("ttft: %s measured run (%s)%n", engine.name(), workload);
                conversation(workload, cold, miss, warm, samples);
                int[] stepContext = workload.systemPrompt();
                int stepAt = medianFullHitPrompt(samples);
                int[] context = new int[stepAt];
                for (int i = 0; i < stepAt; i++) context[i] = stepContext[i % stepContext.length];
                long step = engine.stepNanos(context);
                log.printf("ttft: %s minimum compute step after %d tokens: %.2f ms%n", engine.name(), stepAt, step / 1e6);
                double copy = CopyBandwidth.measure(engine.pageBytes());
                log.printf("ttft: MemorySegment.copy of %d-byte pages: %.2f GB/s%n", engine.pageBytes(), copy / 1e9);
                int[] lookupTokens = Workload.fullHitPrefix(context, engine.pageTokens(), engine.minPrefillTokens());
                int lookupPages = lookupTokens.length / engine.pageTokens();
                long lookup = lookupNanos(dramStore, lookupTokens, lookupPages);
                long missLookup = missLookupNanos(missStore, lastTurnSizedPrompt(workload));
                log.printf("ttft: %s miss-path QUERY of the last turn's %d page keys, alone: %.3f ms%n", engine.name(),
                        (lastTurnSizedPrompt(workload).length - 1) / engine.pageTokens(), missLookup / 1e6);
                log.printf("ttft: %s QUERY + lease mapping + RELEASE of %d resident pages: %.2f ms%n", engine.name(),
                        lookupPages, lookup / 1e6);
                return new Result(engine.name(), List.copyOf(samples), step, stepAt, copy, engine.pageBytes(),
                        engine.pageTokens(), restarts, missStore.queries(), lookup, lookupPages, missLookup,
                        cross == null ? 0 : cross.hostsStarted() - warmupHosts, cross == null ? 0 : cross.missedPrimers());
            } finally {
                if (cross != null) cross.close();
                ssdStore.close();
                ssdManager.close();
            }
        }
    }

    private void conversation(Workload w, TtftEngine.Runner cold, TtftEngine.Runner miss, TtftEngine.Runner warm,
                              List<Sample> out) throws IOException, InterruptedException {
        int[][][] history = new int[Arm.values().length][w.sessions()][0];
        int request = 0;
        for (int turn = 0; turn < w.turns(); turn++) {
            for (int s = 0; s < w.sessions(); s++) {
                for (int k = 0; k < paired.size(); k++) {
                    Arm arm = paired.get((request + k) % paired.size());
                    int[] prompt = w.prompt(history[arm.ordinal()][s], s, turn);
                    if (arm == Arm.CROSS) {
                        CrossHostArm.Served served = cross.serve(prompt, w.answerTokens());
                        out.add(Sample.of(engine.name(), arm, s, turn, served.onB()));
                        history[arm.ordinal()][s] = Workload.concat(prompt, served.answerOnA());
                        continue;
                    }
                    TtftEngine.Runner runner = switch (arm) {
                        case COLD -> cold;
                        case MISS -> miss;
                        case DRAM, DRAM_FULL -> warm;
                        case SSD -> restartedSsdRunner(ssdPrimer.length > 0);
                        case CROSS -> throw new IllegalStateException("served above");
                    };
                    RequestReport r = runner.run(prompt, w.answerTokens(), System.nanoTime());
                    out.add(Sample.of(engine.name(), arm, s, turn, r));
                    if (arm == Arm.SSD && ssdPrimer.length == 0) ssdPrimer = prompt;
                    history[arm.ordinal()][s] = Workload.concat(prompt, r.generated());
                    if (arm == Arm.DRAM) {
                        int[] full = Workload.fullHitPrefix(prompt, engine.pageTokens(), engine.minPrefillTokens());
                        out.add(Sample.of(engine.name(), Arm.DRAM_FULL, s, turn, warm.run(full, 1, System.nanoTime())));
                    }
                }
                request++;
                log.printf("ttft: %s turn %d session %d: prompt %d tokens%n", engine.name(), turn + 1, s + 1,
                        history[Arm.COLD.ordinal()][s].length - w.answerTokens());
            }
        }
    }

    /**
     * Stops the SSD arm's Manager, starts it again on the same store, reconnects at a new epoch;
     * when {@code primed}, serves the warm-up conversation's first prompt once (untimed) so the
     * new Manager JVM has run its query and staging paths on other pages before the timed request.
     */
    private TtftEngine.Runner restartedSsdRunner(boolean primed) throws IOException, InterruptedException {
        ssdStore.close();
        Path ssdDir = dir.resolve(slug() + "-ssd-arm");
        int exit = ssdManager.terminate();
        if (exit != 0) throw new IOException("the SSD arm's Manager exited " + exit + ": " + ssdManager.stderr());
        ssdManager = ManagerLauncher.start(ssdDir, engine.pageBytes());
        ssdStore = OrbitKvPageStore.connect(ssdManager.socket(), slug() + "-ssd", ++ssdEpoch, engine.namespace());
        restarts++;
        TtftEngine.Runner runner = engine.runner(engine.namespace(), ssdStore);
        if (primed) runner.run(ssdPrimer, 1, System.nanoTime());
        return runner;
    }

    /**
     * Median time of the Manager part of a hit, without the engine: publish {@code pages} pages of
     * {@code tokens} (untimed, zero images), then QUERY them, map the leases and RELEASE,
     * {@link TtftEngine#STEP_REPEATS} times.
     */
    private long lookupNanos(OrbitKvPageStore store, int[] tokens, int pages) {
        List<StateKey> keys = pageKeys(tokens, pages);
        store.publish(keys, engine.pageBytes(), (index, slot) -> slot.fill((byte) 0));
        long[] nanos = new long[TtftEngine.STEP_REPEATS];
        for (int r = 0; r < nanos.length; r++) {
            long t0 = System.nanoTime();
            switch (store.lookupPrefix(keys, tokens.length)) {
                case PrefixLookup.Hit hit -> hit.close();
                case PrefixLookup.Miss miss -> throw new IllegalStateException("pages just published missed: " + miss.why());
            }
            nanos[r] = System.nanoTime() - t0;
        }
        return TtftEngine.median(nanos);
    }

    /** Untimed lookups that warm the cache client's code, hits then misses; see {@link #warmLookupPath}. */
    static final int CLIENT_WARMUP_HITS = 5_000;
    static final int CLIENT_WARMUP_MISSES = 2_000;

    /**
     * Brings the cache client's lookup path (QUERY, lease mapping, RELEASE; and the miss path) to
     * compiled code, as a long-running engine has it after its first few thousand requests: the
     * measured run serves 12 requests per arm, and without this their lookups ran before the JIT
     * had warmed them (1.2-2.2 ms for 22 pages instead of 0.3-0.5 ms warmed, docs/performance.md). Pages
     * of the last turn's prompt reversed (so that no measured request hits them) are published once
     * (zero images) and looked up {@value #CLIENT_WARMUP_HITS} times; another prompt, never
     * published, {@value #CLIENT_WARMUP_MISSES} times.
     */
    private void warmLookupPath(OrbitKvPageStore store, int[] prompt) {
        int pages = (prompt.length - 1) / engine.pageTokens();
        int[] reversed = new int[prompt.length];
        int[] other = new int[prompt.length];
        for (int i = 0; i < prompt.length; i++) {
            reversed[i] = prompt[prompt.length - 1 - i];
            other[i] = reversed[i] ^ 1;
        }
        List<StateKey> hits = pageKeys(reversed, pages);     // shares no page with the workload's prompts
        List<StateKey> misses = pageKeys(other, pages);
        store.publish(hits, engine.pageBytes(), (index, slot) -> slot.fill((byte) 0));
        for (int i = 0; i < CLIENT_WARMUP_HITS; i++) {
            if (store.lookupPrefix(hits, prompt.length) instanceof PrefixLookup.Hit hit) hit.close();
        }
        for (int i = 0; i < CLIENT_WARMUP_MISSES; i++) store.lookupPrefix(misses, prompt.length);
        log.printf("ttft: %s cache client warmed: %d lookups of %d resident pages, %d missing%n", engine.name(),
                CLIENT_WARMUP_HITS, pages, CLIENT_WARMUP_MISSES);
    }

    private List<StateKey> pageKeys(int[] tokens, int pages) {
        return StateKeys.forTokens(engine.namespace().digest(), FullAttention.GROUP,
                Arrays.copyOf(tokens, pages * engine.pageTokens()), engine.pageTokens(), new byte[0]);
    }

    /**
     * Median time of the miss path's added work alone: the QUERY (and RELEASE) that the miss arm
     * sends for {@code prompt}'s page keys, which all miss.
     */
    private long missLookupNanos(QueryOnlyStore store, int[] prompt) {
        int pages = (prompt.length - 1) / engine.pageTokens();
        List<StateKey> keys = StateKeys.forTokens(engine.missNamespace().digest(), FullAttention.GROUP,
                Arrays.copyOf(prompt, pages * engine.pageTokens()), engine.pageTokens(), new byte[0]);
        long[] nanos = new long[TtftEngine.STEP_REPEATS];
        for (int r = 0; r < nanos.length; r++) {
            long t0 = System.nanoTime();
            store.lookupPrefix(keys, prompt.length);
            nanos[r] = System.nanoTime() - t0;
        }
        return TtftEngine.median(nanos);
    }

    /** A prompt as long as the workload's last one (the system prompt repeated). */
    private static int[] lastTurnSizedPrompt(Workload workload) {
        int[] system = workload.systemPrompt();
        int[] out = new int[workload.lastPromptTokens()];
        for (int i = 0; i < out.length; i++) out[i] = system[i % system.length];
        return out;
    }

    private static int medianFullHitPrompt(List<Sample> samples) {
        int[] lengths = samples.stream().filter(s -> s.arm() == Arm.DRAM_FULL).mapToInt(Sample::promptTokens).sorted()
                .toArray();
        return lengths[lengths.length / 2];
    }

    private String slug() {
        return engine.name().replace(".", "").toLowerCase(java.util.Locale.ROOT);
    }
}
