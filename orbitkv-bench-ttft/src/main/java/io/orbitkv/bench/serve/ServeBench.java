package io.orbitkv.bench.serve;

import com.fasterxml.jackson.databind.JsonNode;
import io.orbitkv.bench.BenchManager;
import io.orbitkv.bench.trace.TraceReader;
import io.orbitkv.bench.ttft.TtftBench;
import io.orbitkv.llamacpp.LlamaCppEngine;
import io.orbitkv.llamacpp.LlamaCppSessionRunner;
import io.orbitkv.state.unix.FileTrees;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testmodel.ByteFallbackVocab;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * Entry point of {@code bin/bench-serve}: a pool of llama.cpp engine processes serving an
 * open-loop workload at several concurrencies through three arms (cold, engine-local prefix
 * reuse, OrbitKV), with a working set larger than one engine's KV memory and one that fits.
 * Writes {@code serve.md}, {@code serve-cells.csv}, {@code serve-requests.csv} and
 * {@code serve-ttft-<working set>.png} to {@code --out}.
 *
 * <pre>
 *   java -cp orbitkv-bench-ttft.jar io.orbitkv.bench.serve.ServeBench [--out=bench-results/serve] [--work=var/serve]
 *        [--model=bench|ci] [--engines=4] [--concurrency=1,4,8,16] [--working-sets=large,fits]
 *        [--rate=3] [--engine-kv=6m] [--dram=12m] [--ssd=256m] [--trace=FILE --trace-requests=200 --speedup=1]
 *        [--publish=background|sync|both]
 * </pre>
 *
 * <p>{@code --publish} picks how the OrbitKV arm's engines publish: {@code background} (the
 * default; arm "OrbitKV"), {@code sync} (arm "OrbitKV sync": the engine waits for the publish
 * before its next request) or {@code both} (four arms, to compare the two in one run).
 *
 * <p>Thread model: the calling thread drives; {@link EnginePool} runs one thread per engine. For
 * every working set, concurrency and arm (in an order rotated per concurrency) it configures the
 * pool, serves an untimed warm-up of one short request per engine, then the workload; an
 * OrbitKV cell gets a fresh Manager process (nothing left from the previous cell) whose leases and
 * reservations must return to 0 after the cell (waited on, 10 s deadline, after every engine's
 * queued publishes settled: {@code FLUSH}, also after the warm-up). Exits 0 after writing
 * the report, 1 when a restored request's logits differ from the cold arm's or leases stayed held,
 * 2 on bad arguments.
 */
public final class ServeBench {

    private static final Set<String> OPTIONS = Set.of("out", "work", "shm", "model", "engines", "concurrency",
            "working-sets", "rate", "engine-kv", "dram", "ssd", "trace", "trace-requests", "speedup", "threads", "seed", "publish");
    private static final long LEASE_WAIT_NANOS = TimeUnit.SECONDS.toNanos(10);

    private ServeBench() {
    }

    /** A named workload. */
    record WorkingSet(String name, List<ServeRequest> requests, String description) {
    }

    /**
     * Everything a run needs.
     *
     * @param ratePerSlot arrivals per second per unit of concurrency (synthetic workloads; a trace keeps its clock)
     */
    record Config(Path out, Path work, Path shm, TinyLlamaSpec spec, int engines, List<Integer> concurrencies,
                  List<WorkingSet> workingSets, double ratePerSlot, long engineKvBytes, long dramBytes, long ssdBytes,
                  int pageTokens, int contextTokens, int threads, List<ServeArm> arms) {
    }

    /** One cell of the table: a working set, an arm and a concurrency. */
    record Cell(String workingSet, ServeArm arm, int concurrency, List<EnginePool.Result> results, double wallSeconds,
                long managerHitDram, long managerHitSsd, long ssdReadBytes, long ssdWriteBytes, long leasesAfter,
                long localEvictions, long publishDroppedPages) {
    }

    /** What a run produced. */
    record Outcome(List<Cell> cells, int compared, int mismatched, boolean leasesDrained, long pageBytes) {
    }

    public static void main(String[] args) throws Exception {
        System.setProperty("java.awt.headless", "true");
        Map<String, String> o = TtftBench.options(args, OPTIONS, "serve");
        Config config;
        try {
            config = config(o);
        } catch (IllegalArgumentException | IOException e) {
            System.err.println("serve: " + e.getMessage());
            System.exit(2);
            return;
        }
        String loadStart = TtftBench.loadAverage();
        long t0 = System.nanoTime();
        Outcome outcome = run(config, System.err, soFar -> ServeReport.write(config, soFar, loadStart,
                TtftBench.loadAverage(), (System.nanoTime() - t0) / 1_000_000_000L));
        String md = ServeReport.write(config, outcome, loadStart, TtftBench.loadAverage(),
                (System.nanoTime() - t0) / 1_000_000_000L);
        System.out.print(md);
        System.exit(outcome.mismatched() == 0 && outcome.leasesDrained() ? 0 : 1);
    }

    static Config config(Map<String, String> o) throws IOException {
        TinyLlamaSpec spec = switch (o.getOrDefault("model", "bench")) {
            case "bench" -> TinyLlamaSpec.bench();
            case "ci" -> TinyLlamaSpec.ci();
            default -> throw new IllegalArgumentException("--model is bench or ci");
        };
        long seed = Long.parseLong(o.getOrDefault("seed", "20261201"));
        List<WorkingSet> sets = new ArrayList<>();
        int newTokensCap = 8;
        if (o.containsKey("trace")) {
            int blockTokens = spec.context() >= 4096 ? 64 : 16;
            int maxPrompt = Math.min(spec.context() / 2, 1024);
            var records = TraceReader.read(Path.of(o.get("trace")), 0, Integer.parseInt(o.getOrDefault("trace-requests", "200")));
            sets.add(new WorkingSet("trace", ServeWorkload.trace(records, blockTokens, maxPrompt, newTokensCap,
                    Double.parseDouble(o.getOrDefault("speedup", "1")), 0.1, seed),
                    records.size() + " records of " + o.get("trace") + ", " + blockTokens + " tokens per 512-token block, prompts cut to "
                            + maxPrompt + ", timestamps / " + o.getOrDefault("speedup", "1")));
        } else {
            for (String name : o.getOrDefault("working-sets", spec.context() >= 4096 ? "large,fits" : "tiny").split(",")) {
                ServeWorkload.Shape shape = shape(name.trim(), seed);
                if (shape.maxContextTokens() > spec.context()) {
                    throw new IllegalArgumentException("working set " + name + " needs " + shape.maxContextTokens()
                            + " tokens of context; the model has " + spec.context());
                }
                sets.add(new WorkingSet(shape.name(), ServeWorkload.synthetic(shape), describe(shape)));
            }
        }
        int context = 0;
        for (WorkingSet w : sets) for (ServeRequest r : w.requests()) context = Math.max(context, r.prompt().length + r.newTokens());
        List<Integer> conc = new ArrayList<>();
        for (String c : o.getOrDefault("concurrency", "1,4,8,16").split(",")) conc.add(Integer.parseInt(c.trim()));
        Path work = Path.of(o.getOrDefault("work", "var/serve"));
        return new Config(Path.of(o.getOrDefault("out", "bench-results/serve")), work,
                Path.of(o.getOrDefault("shm", "/dev/shm/orbitkv-serve-" + ProcessHandle.current().pid())), spec,
                Integer.parseInt(o.getOrDefault("engines", "4")), List.copyOf(conc), List.copyOf(sets),
                Double.parseDouble(o.getOrDefault("rate", "3")), bytes(o.getOrDefault("engine-kv", "6m")),
                bytes(o.getOrDefault("dram", "12m")), bytes(o.getOrDefault("ssd", "256m")), 16, context + 16,
                Integer.parseInt(o.getOrDefault("threads", "1")), arms(o.getOrDefault("publish", "background")));
    }

    /** The arms of {@code --publish}: cold and engine-local always, then the OrbitKV arm(s). */
    static List<ServeArm> arms(String publish) {
        return switch (publish) {
            case "background" -> List.of(ServeArm.COLD, ServeArm.ENGINE_LOCAL, ServeArm.ORBITKV);
            case "sync" -> List.of(ServeArm.COLD, ServeArm.ENGINE_LOCAL, ServeArm.ORBITKV_SYNC);
            case "both" -> List.of(ServeArm.COLD, ServeArm.ENGINE_LOCAL, ServeArm.ORBITKV, ServeArm.ORBITKV_SYNC);
            default -> throw new IllegalArgumentException("--publish is background, sync or both");
        };
    }

    /**
     * The named synthetic shapes. {@code large}: 6 system prompts, 16 sessions x 3 turns, 4
     * sessions per engine of a 4-engine pool: ~10 MiB of sequences per engine on the bench model
     * (20 pages of 128 KiB each at the last turn), against 6 MiB of engine KV memory. {@code fits}:
     * one system prompt, 4 sessions x 4 turns, one session per engine: at most ~5.4 MiB per engine
     * (the main line and a branch). {@code tiny}: the CI model's test run.
     *
     * <p>Design note: sized so that a whole run (24 cells) stays within ~10 minutes on 2 cores
     * shared with other jobs; a first sizing (24 sessions, 256-token system prompts) took 170-300 s
     * per cell at load average 10-19.
     */
    static ServeWorkload.Shape shape(String name, long seed) {
        return switch (name) {
            case "large" -> new ServeWorkload.Shape("large", 6, 16, 3, 192, 32, 16, 8, 0.2, 0.1, seed);
            case "fits" -> new ServeWorkload.Shape("fits", 1, 4, 4, 192, 32, 16, 8, 0.2, 0.1, seed + 1);
            case "tiny" -> new ServeWorkload.Shape("tiny", 2, 4, 2, 48, 16, 8, 4, 0.3, 0.25, seed + 2);
            default -> throw new IllegalArgumentException("unknown working set " + name + " (large, fits, tiny)");
        };
    }

    private static String describe(ServeWorkload.Shape s) {
        return String.format(Locale.ROOT, "%d system prompts of %d tokens, %d sessions x %d turns (user %d, assistant %d tokens), "
                        + "%.0f %% branches, %.0f %% cancelled, %d new tokens per request", s.groups(), s.systemTokens(),
                s.sessions(), s.turns(), s.userTokens(), s.assistantTokens(), s.branchShare() * 100, s.cancelShare() * 100,
                s.newTokens());
    }

    static long bytes(String v) {
        String s = v.trim().toLowerCase(Locale.ROOT);
        long unit = s.endsWith("g") ? 1L << 30 : s.endsWith("m") ? 1L << 20 : s.endsWith("k") ? 1L << 10 : 1;
        if (unit > 1) s = s.substring(0, s.length() - 1);
        long n = Long.parseLong(s);
        if (n < 0) throw new IllegalArgumentException("negative size " + v);
        return n * unit;
    }

    /**
     * Runs every cell of {@code config}; progress lines to {@code log}, and the outcome so far to
     * {@code progress} after every cell (the report is rewritten then, so a run cut short leaves
     * its finished cells behind).
     */
    static Outcome run(Config config, PrintStream log, Progress progress) throws IOException, InterruptedException {
        FileTrees.delete(config.work());
        FileTrees.delete(config.shm());
        Files.createDirectories(config.work());
        try {
            TinyLlamaModel model = TinyLlamaModel.generate(config.spec(), config.work().resolve("model"));
            long pageBytes;
            try (LlamaCppEngine probe = LlamaCppEngine.load(model.ggufFile(), new LlamaCppEngine.Settings(config.contextTokens(), 1))) {
                pageBytes = LlamaCppSessionRunner.layout(probe, config.pageTokens()).pageBytes();
            }
            List<String> args = List.of(model.dir().toString(), config.spec().context() >= 4096 ? "bench" : "ci",
                    model.weightsDigestHex(), model.tokenizerDigestHex(), Integer.toString(config.pageTokens()),
                    Integer.toString(config.contextTokens()), Integer.toString(config.threads()));
            List<Cell> cells = new ArrayList<>();
            boolean drained = true;
            try (EnginePool pool = EnginePool.start(config.engines(), List.of("-Xmx256m", "-XX:+UseSerialGC"), args,
                    config.work().resolve("logs"))) {
                List<ServeRequest> warmup = warmup(config.pageTokens(), pool.size());
                for (WorkingSet ws : config.workingSets()) {
                    log.printf(Locale.ROOT, "serve: working set %s: %d requests, %d distinct pages (%.1f MiB)%n", ws.name(),
                            ws.requests().size(), ServeWorkload.distinctPages(ws.requests(), config.pageTokens()),
                            ServeWorkload.distinctPages(ws.requests(), config.pageTokens()) * pageBytes / 1048576.0);
                }
                // highest concurrency first, working sets interleaved: a run cut short still has the target cells
                List<Integer> order = new ArrayList<>(config.concurrencies());
                order.sort(java.util.Comparator.reverseOrder());
                for (int ci = 0; ci < order.size(); ci++) {
                    int c = order.get(ci);
                    for (WorkingSet ws : config.workingSets()) {
                        List<ServeArm> arms = config.arms();
                        for (int k = 0; k < arms.size(); k++) {
                            ServeArm arm = arms.get((k + ci) % arms.size());
                            Cell cell = cell(config, pool, ws, arm, c, warmup, pageBytes, log);
                            drained &= cell.leasesAfter() == 0;
                            cells.add(cell);
                            int[] parity = parity(cells);
                            progress.accept(new Outcome(sorted(config, cells), parity[0], parity[1], drained, pageBytes));
                        }
                    }
                }
            }
            int[] parity = parity(cells);
            return new Outcome(sorted(config, cells), parity[0], parity[1], drained, pageBytes);
        } finally {
            FileTrees.delete(config.shm());
            FileTrees.delete(config.work().resolve("managers"));
            FileTrees.delete(config.work().resolve("model"));
        }
    }

    private static Cell cell(Config config, EnginePool pool, WorkingSet ws, ServeArm arm, int concurrency,
                             List<ServeRequest> warmup, long pageBytes, PrintStream log) throws IOException, InterruptedException {
        double scale = ws.name().equals("trace") ? 1.0 : 1.0 / (config.ratePerSlot() * concurrency);
        String tag = ws.name() + "-" + arm.name().toLowerCase(Locale.ROOT) + "-c" + concurrency;
        ManagerProcess manager = null;
        try {
            switch (arm) {
                case COLD -> pool.arm(i -> "COLD");
                case ENGINE_LOCAL -> pool.arm(i -> "LOCAL " + config.engineKvBytes());
                case ORBITKV, ORBITKV_SYNC -> {
                    long slot = Math.max(4096, Long.highestOneBit(Math.max(1, pageBytes - 1)) << 1);
                    manager = BenchManager.start(config.work().resolve("managers").resolve(tag), config.shm().resolve(tag),
                            "512m", List.of("--dram-bytes", config.dramBytes() / 1024 + "k",
                                    "--ssd-bytes", config.ssdBytes() / 1024 + "k", "--ssd-policy", "write-through",
                                    "--set", "dramSlotBytes=" + slot / 1024 + "k"));
                    Path socket = manager.socket();
                    String mode = arm == ServeArm.ORBITKV ? "BACKGROUND" : "SYNC";
                    pool.arm(i -> "ORBITKV " + socket + " serve-engine-" + i + " 1 " + mode);
                }
            }
            pool.run(warmup, pool.size(), 0);
            // the warm-up's publishes are not left to compete with the cell's first requests
            if (manager != null) pool.flush();
            // the warm-up's sequences leave the engine-local caches: the cell starts with nothing cached anywhere
            if (arm == ServeArm.ENGINE_LOCAL) pool.arm(i -> "LOCAL " + config.engineKvBytes());
            JsonNode before = manager == null ? null : BenchManager.status(manager);
            String metricsBefore = manager == null ? "" : manager.metrics();
            long t0 = System.nanoTime();
            List<EnginePool.Result> results = pool.run(ws.requests(), concurrency, scale);
            double wall = (System.nanoTime() - t0) / 1e9;
            long leases = 0;
            long hitDram = 0;
            long hitSsd = 0;
            long ssdRead = 0;
            long ssdWrite = 0;
            long evictions = 0;
            long dropped = 0;
            if (manager != null) {
                // queued publishes settle before the lease check: a reservation in flight is not a leak
                dropped = pool.flush()[1];
                leases = awaitLeasesDrained(manager);
                JsonNode after = BenchManager.status(manager);
                hitDram = delta(before, after, "dram");
                hitSsd = delta(before, after, "ssd");
                String metricsAfter = manager.metrics();
                ssdRead = (long) (metric(metricsAfter, "orbitkv_ssd_read_bytes_total") - metric(metricsBefore, "orbitkv_ssd_read_bytes_total"));
                ssdWrite = (long) (metric(metricsAfter, "orbitkv_ssd_write_bytes_total") - metric(metricsBefore, "orbitkv_ssd_write_bytes_total"));
            } else if (arm == ServeArm.ENGINE_LOCAL) {
                long[] s = pool.stats();
                leases = s[0];
                evictions = s[4];
            }
            Cell cell = new Cell(ws.name(), arm, concurrency, results, wall, hitDram, hitSsd, ssdRead, ssdWrite, leases, evictions, dropped);
            log.printf(Locale.ROOT, "serve: %-6s %-12s c=%-2d %3d requests in %5.1f s, TTFT p50 %.1f ms p99 %.1f ms, leases after %d, publish drops %d%n",
                    ws.name(), arm.label, concurrency, results.size(), wall, ServeReport.ttftPercentile(cell, 50),
                    ServeReport.ttftPercentile(cell, 99), leases, dropped);
            return cell;
        } finally {
            if (manager != null) {
                // the Manager goes even when re-arming fails (a dead engine process): a bench that
                // ended on an exception used to leave its Manager process running
                try {
                    pool.arm(i -> "COLD");
                } finally {
                    manager.stop();
                }
            }
        }
    }

    /** Told the outcome so far after every cell. */
    @FunctionalInterface
    interface Progress {
        void accept(Outcome soFar) throws IOException;
    }

    /** Cells in table order: working set as configured, then arm, then concurrency. */
    private static List<Cell> sorted(Config config, List<Cell> cells) {
        List<String> names = config.workingSets().stream().map(WorkingSet::name).toList();
        List<Cell> out = new ArrayList<>(cells);
        out.sort(java.util.Comparator.<Cell>comparingInt(c -> names.indexOf(c.workingSet()))
                .thenComparing(Cell::arm).thenComparingInt(Cell::concurrency));
        return List.copyOf(out);
    }

    /** Waits until the Manager's leases and reservations are 0 (deadline 10 s); returns the leases left. */
    private static long awaitLeasesDrained(ManagerProcess manager) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + LEASE_WAIT_NANOS;
        while (true) {
            JsonNode s = BenchManager.status(manager);
            long held = s.path("leases").asLong() + s.path("reservations").asLong();
            if (held == 0 || System.nanoTime() > deadline) return held;
            Thread.sleep(20);
        }
    }

    private static long delta(JsonNode before, JsonNode after, String tier) {
        return after.path("prefixCache").path("hitTokens").path(tier).asLong()
                - before.path("prefixCache").path("hitTokens").path(tier).asLong();
    }

    /** The sum of every sample of {@code name} (all label sets) in a Prometheus text page. */
    static double metric(String page, String name) {
        double sum = 0;
        for (String line : page.split("\n")) {
            if (line.startsWith(name + "{") || line.startsWith(name + " ")) {
                sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        return sum;
    }

    /** One short request per engine (3 pages and 2 tokens of other texts), all at once. */
    static List<ServeRequest> warmup(int pageTokens, int engines) {
        List<ServeRequest> out = new ArrayList<>();
        for (int i = 0; i < engines; i++) {
            int[] prompt = ByteFallbackVocab.encode(io.orbitkv.bench.ttft.Workload.text(new SplittableRandom(-1 - i),
                    3 * pageTokens + 1));
            out.add(new ServeRequest(i, "warmup", i, prompt, 2, ServeRequest.CancelAt.NONE, 0));
        }
        return out;
    }

    /**
     * Compares every served request of the engine-local and OrbitKV cells with the cold arm's
     * logits for the same request; returns {compared, mismatched}.
     */
    static int[] parity(List<Cell> cells) {
        Map<String, Long> cold = new LinkedHashMap<>();
        for (Cell c : cells) {
            if (c.arm() != ServeArm.COLD) continue;
            for (EnginePool.Result r : c.results()) if (r.served()) cold.put(c.workingSet() + "/" + r.request().id(), r.logitsHash());
        }
        int compared = 0;
        int mismatched = 0;
        for (Cell c : cells) {
            if (c.arm() == ServeArm.COLD) continue;
            for (EnginePool.Result r : c.results()) {
                Long expected = cold.get(c.workingSet() + "/" + r.request().id());
                if (!r.served() || expected == null) continue;
                compared++;
                if (expected != r.logitsHash()) mismatched++;
            }
        }
        return new int[] {compared, mismatched};
    }
}
