package io.orbitkv.bench.serve;

import io.orbitkv.bench.ttft.TtftBench;
import io.orbitkv.bench.ttft.TtftStats;
import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.engine.ManagerLauncher;
import io.orbitkv.llamacpp.LlamaCppEngine;
import io.orbitkv.llamacpp.LlamaCppNamespace;
import io.orbitkv.llamacpp.LlamaCppSessionRunner;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.unix.FileTrees;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Entry point of {@code bin/bench-serve --routed}: the KV-aware router end to end. A pool of
 * llama.cpp engine processes, one clustered Manager per engine (etcd membership, peer reads on,
 * KV events on), and one router daemon following the Managers' event streams; a seeded open-loop
 * workload of multi-turn sessions sharing system prompts, each request routed by {@code POST
 * /route} (its token ids) at its arrival, served on the chosen engine and reported back with
 * {@code POST /complete}. Once per policy (joint, load, overlap) and run, on fresh Managers and a
 * fresh router. Writes {@code routed.md} and {@code routed-requests.csv} to {@code --out}.
 *
 * <pre>
 *   java -cp orbitkv-bench-ttft.jar io.orbitkv.bench.serve.RoutedServeBench [--out=bench-results/routed]
 *        [--work=var/routed] [--model=ci|bench] [--engines=3] [--policies=joint,load,overlap] [--runs=1]
 *        [--sessions=24] [--turns=3] [--rate=20] [--seed=N]
 * </pre>
 *
 * <p>Thread model: the calling thread drives; {@link EnginePool} runs one thread per engine. The
 * run starts with a cold pass (the engines without a cache, dispatched by session) that gives every
 * request's reference logits and the engines' measured prefill rate, which the routers assume until
 * their workers report their own. In every routed cell each served request's logits must equal the
 * cold pass's, and the Managers' leases and reservations must return to 0 (10 s deadline): either
 * failing makes the run exit 1.
 *
 * <p>Design note: the policies run in an order rotated per run, so the machine's drift (2 shared
 * cores) does not always favour the same one; ranges over runs are what the report compares.
 */
public final class RoutedServeBench {

    private static final Set<String> OPTIONS = Set.of("out", "work", "model", "engines", "policies", "runs", "sessions",
            "turns", "rate", "seed", "threads");
    static final int PAGE_TOKENS = 16;

    private RoutedServeBench() {
    }

    /** Everything a run needs; {@code rate} is arrivals per second. */
    record Config(Path out, Path work, TinyLlamaSpec spec, int engines, List<String> policies, int runs,
                  ServeWorkload.Shape shape, double rate, int threads) {
        Config {
            if (engines < 2 || engines > 8) throw new IllegalArgumentException("--engines must be 2..8");
            if (runs < 1) throw new IllegalArgumentException("--runs must be >= 1");
            if (!(rate > 0)) throw new IllegalArgumentException("--rate must be > 0");
            for (String p : policies) io.orbitkv.router.Policy.named(p);
        }
    }

    /** One policy's cell of one run. */
    record Cell(int run, String policy, List<EnginePool.Result> results, Map<Integer, RoutedCluster.Route> routes,
                long[] hitTokens, long fallbackRoutes, long leasesAfter, long routerOutstandingAfter, int compared,
                int mismatched, double wallSeconds) {

        double ttftPercentileMs(double p) {
            double[] v = results.stream().filter(EnginePool.Result::served).mapToDouble(r -> r.ttftNanos() / 1e6).toArray();
            return v.length == 0 ? Double.NaN : TtftStats.percentile(v, p);
        }

        /** Routes whose chosen worker held a local prefix of the request. */
        long routedToLocalPrefix() {
            return routes.values().stream().filter(r -> r.localPrefixBlocks() > 0).count();
        }

        long restoredTokens() {
            return results.stream().filter(EnginePool.Result::served).mapToLong(EnginePool.Result::restoredTokens).sum();
        }
    }

    /** What a run produced: the cells, and the cold pass's measured prefill rate. */
    record Outcome(List<Cell> cells, double coldPrefillTokensPerSecond, int requests) {
        boolean passed() {
            return cells.stream().allMatch(c -> c.mismatched() == 0 && c.leasesAfter() == 0);
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> o = TtftBench.options(args, OPTIONS, "routed");
        Config config;
        try {
            config = config(o);
        } catch (IllegalArgumentException e) {
            System.err.println("routed: " + e.getMessage());
            System.exit(2);
            return;
        }
        if (!EtcdServer.installed()) {
            System.err.println("routed: needs etcd at " + EtcdServer.BINARY + " (Debian package etcd-server)");
            System.exit(2);
        }
        String loadStart = TtftBench.loadAverage();
        long t0 = System.nanoTime();
        Outcome outcome = run(config, System.err);
        String md = report(config, outcome, loadStart, TtftBench.loadAverage(), (System.nanoTime() - t0) / 1_000_000_000L);
        Files.createDirectories(config.out());
        Files.writeString(config.out().resolve("routed.md"), md);
        writeCsv(config.out().resolve("routed-requests.csv"), outcome);
        System.out.print(md);
        System.exit(outcome.passed() ? 0 : 1);
    }

    static Config config(Map<String, String> o) {
        TinyLlamaSpec spec = switch (o.getOrDefault("model", "ci")) {
            case "bench" -> TinyLlamaSpec.bench();
            case "ci" -> TinyLlamaSpec.ci();
            default -> throw new IllegalArgumentException("--model is ci or bench");
        };
        long seed = Long.parseLong(o.getOrDefault("seed", "20261202"));
        boolean ci = spec.context() < 4096;
        // the CI model's 256 positions hold 3 turns of a 96-token system prompt; the bench model takes longer texts
        ServeWorkload.Shape shape = new ServeWorkload.Shape("routed", ci ? 4 : 6, Integer.parseInt(o.getOrDefault("sessions", "24")),
                Integer.parseInt(o.getOrDefault("turns", "3")), ci ? 96 : 256, ci ? 24 : 48, ci ? 16 : 32, 4, 0.2, 0.05, seed);
        if (shape.maxContextTokens() > spec.context()) {
            throw new IllegalArgumentException("the workload needs " + shape.maxContextTokens() + " positions; the model has "
                    + spec.context() + " (fewer --turns)");
        }
        return new Config(Path.of(o.getOrDefault("out", "bench-results/routed")), Path.of(o.getOrDefault("work", "var/routed")),
                spec, Integer.parseInt(o.getOrDefault("engines", "3")),
                List.of(o.getOrDefault("policies", "joint,load,overlap").split(",")), Integer.parseInt(o.getOrDefault("runs", "1")),
                shape, Double.parseDouble(o.getOrDefault("rate", "20")), Integer.parseInt(o.getOrDefault("threads", "1")));
    }

    /** The engine pool's model and arguments, made under {@code work}. */
    record Engines(TinyLlamaModel model, Namespace namespace, long pageBytes, List<String> args) {
    }

    static Engines engines(TinyLlamaSpec spec, Path work, int contextTokens, int threads) throws IOException {
        TinyLlamaModel model = TinyLlamaModel.generate(spec, work.resolve("model"));
        Namespace ns;
        long pageBytes;
        try (LlamaCppEngine probe = LlamaCppEngine.load(model.ggufFile(), new LlamaCppEngine.Settings(contextTokens, 1))) {
            io.orbitkv.llamacpp.LlamaCppKvPageLayout layout = LlamaCppSessionRunner.layout(probe, PAGE_TOKENS);
            pageBytes = layout.pageBytes();
            ns = LlamaCppNamespace.of(model, layout);
        }
        List<String> args = List.of(model.dir().toString(), spec.context() >= 4096 ? "bench" : "ci", model.weightsDigestHex(),
                model.tokenizerDigestHex(), Integer.toString(PAGE_TOKENS), Integer.toString(contextTokens), Integer.toString(threads));
        return new Engines(model, ns, pageBytes, args);
    }

    static Outcome run(Config config, PrintStream log) throws IOException, InterruptedException {
        FileTrees.delete(config.work());
        Files.createDirectories(config.work());
        List<ServeRequest> requests = ServeWorkload.synthetic(config.shape());
        int context = 0;
        for (ServeRequest r : requests) context = Math.max(context, r.prompt().length + r.newTokens());
        try {
            Engines e = engines(config.spec(), config.work(), Math.min(config.spec().context(), context + PAGE_TOKENS),
                    config.threads());
            Path token = ManagerLauncher.Cluster.writeToken(config.work().resolve("cluster.token"));
            List<Cell> cells = new ArrayList<>();
            double rate;
            try (EtcdServer etcd = EtcdServer.start(config.work().resolve("etcd"));
                 EnginePool pool = EnginePool.start(config.engines(), List.of("-Xmx256m", "-XX:+UseSerialGC"), e.args(),
                         config.work().resolve("logs"))) {
                List<ServeRequest> warmup = ServeBench.warmup(PAGE_TOKENS, pool.size());
                pool.arm(i -> "COLD");
                pool.run(warmup, pool.size(), 0);
                List<EnginePool.Result> cold = pool.run(requests, pool.size(), 0);
                Map<Integer, Long> reference = new HashMap<>();
                long coldTokens = 0;
                long coldNanos = 0;
                for (EnginePool.Result r : cold) {
                    if (!r.served()) continue;
                    reference.put(r.request().id(), r.logitsHash());
                    coldTokens += r.request().prompt().length;
                    coldNanos += r.ttftNanos() - r.queueNanos();
                }
                rate = coldNanos > 0 ? coldTokens / (coldNanos / 1e9) : io.orbitkv.router.MeasuredCosts.PREFILL_TOKENS_PER_SECOND;
                log.printf(Locale.ROOT, "routed: %d requests, %d engines; cold pass: %d served, prefill %.0f tokens/s%n",
                        requests.size(), pool.size(), reference.size(), rate);
                for (int run = 0; run < config.runs(); run++) {
                    for (int k = 0; k < config.policies().size(); k++) {
                        String policy = config.policies().get((k + run) % config.policies().size());
                        Cell c = cell(config, pool, etcd.endpoint(), token, e, requests, reference, warmup, policy, run, rate);
                        cells.add(c);
                        log.printf(Locale.ROOT, "routed: run %d %-7s %3d requests in %5.1f s, TTFT p50 %.1f p95 %.1f p99 %.1f ms, "
                                        + "hit tokens dram %d ssd %d peer %d, local-prefix routes %d, fallback %d, "
                                        + "%d/%d logits differ, leases after %d%n", run + 1, policy, c.results().size(),
                                c.wallSeconds(), c.ttftPercentileMs(50), c.ttftPercentileMs(95), c.ttftPercentileMs(99),
                                c.hitTokens()[0], c.hitTokens()[1], c.hitTokens()[2], c.routedToLocalPrefix(), c.fallbackRoutes(),
                                c.mismatched(), c.compared(), c.leasesAfter());
                    }
                }
            }
            return new Outcome(List.copyOf(cells), rate, requests.size());
        } finally {
            FileTrees.delete(config.work().resolve("cells"));
            FileTrees.delete(config.work().resolve("model"));
            FileTrees.delete(config.work().resolve("etcd"));
        }
    }

    private static Cell cell(Config config, EnginePool pool, String etcd, Path token, Engines e, List<ServeRequest> requests,
                             Map<Integer, Long> reference, List<ServeRequest> warmup, String policy, int run, double rate)
            throws IOException, InterruptedException {
        String tag = "r" + (run + 1) + "-" + policy;
        Path dir = config.work().resolve("cells").resolve(tag);
        try (RoutedCluster cluster = RoutedCluster.start(dir, etcd, token, tag, pool.size(), e.pageBytes(), PAGE_TOKENS,
                e.namespace().digest(), policy, rate)) {
            try {
                pool.arm(i -> "ORBITKV " + cluster.socket(i) + " " + RoutedCluster.instance(i) + " 1");
                pool.run(warmup, pool.size(), 0);
                long[] before = cluster.hitTokens();
                long fallbackBefore = cluster.fallbackRoutes();
                Map<Integer, RoutedCluster.Route> routes = new ConcurrentHashMap<>();
                long t0 = System.nanoTime();
                // open loop: every request is admitted at its arrival, whatever is in flight
                List<EnginePool.Result> results = pool.run(requests, requests.size(), 1.0 / config.rate(), cluster.dispatcher(routes));
                double wall = (System.nanoTime() - t0) / 1e9;
                long leases = cluster.awaitDrained();
                long[] after = cluster.hitTokens();
                long[] hits = {after[0] - before[0], after[1] - before[1], after[2] - before[2]};
                int compared = 0;
                int mismatched = 0;
                for (EnginePool.Result r : results) {
                    Long expected = reference.get(r.request().id());
                    if (!r.served() || expected == null) continue;
                    compared++;
                    if (expected != r.logitsHash()) mismatched++;
                }
                return new Cell(run + 1, policy, results, Map.copyOf(routes), hits, cluster.fallbackRoutes() - fallbackBefore, leases,
                        cluster.routerOutstandingTokens(), compared, mismatched, wall);
            } finally {
                pool.arm(i -> "COLD");
            }
        } finally {
            FileTrees.delete(dir);
        }
    }

    /** The markdown report: every cell, then each policy's range over the runs. */
    static String report(Config config, Outcome outcome, String loadStart, String loadEnd, long seconds) {
        StringBuilder b = new StringBuilder();
        ServeWorkload.Shape s = config.shape();
        b.append(String.format(Locale.ROOT, "# Routed serving run%n%n%d llama.cpp engines (%s model), one clustered Manager each "
                        + "(etcd, peer reads on, KV events on), one router; %d requests: %d system prompts of %d tokens, "
                        + "%d sessions x %d turns (user %d, assistant %d tokens), %.0f %% branches, %.0f %% cancelled, "
                        + "%d new tokens; Poisson arrivals at %.1f/s; cold prefill %.0f tokens/s; %d run(s); load average %s -> %s; "
                        + "%d s.%n%n", config.engines(), config.spec().context() >= 4096 ? "bench" : "CI", outcome.requests(),
                s.groups(), s.systemTokens(), s.sessions(), s.turns(), s.userTokens(), s.assistantTokens(), s.branchShare() * 100,
                s.cancelShare() * 100, s.newTokens(), config.rate(), outcome.coldPrefillTokensPerSecond(), config.runs(),
                loadStart, loadEnd, seconds));
        b.append("| run | policy | served | TTFT p50 ms | p95 ms | p99 ms | hit tokens DRAM | SSD | peer | restored tokens "
                + "| routes to a local prefix | fallback routes | logits differ | leases after |\n");
        b.append("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for (Cell c : outcome.cells()) {
            b.append(String.format(Locale.ROOT, "| %d | %s | %d | %.1f | %.1f | %.1f | %d | %d | %d | %d | %d | %d | %d of %d | %d |%n",
                    c.run(), c.policy(), c.results().stream().filter(EnginePool.Result::served).count(), c.ttftPercentileMs(50),
                    c.ttftPercentileMs(95), c.ttftPercentileMs(99), c.hitTokens()[0], c.hitTokens()[1], c.hitTokens()[2],
                    c.restoredTokens(), c.routedToLocalPrefix(), c.fallbackRoutes(), c.mismatched(), c.compared(), c.leasesAfter()));
        }
        b.append("\n| policy | TTFT p50 ms (range over runs) | p95 ms | p99 ms | hit tokens (DRAM+SSD+peer) |\n");
        b.append("| --- | --- | --- | --- | --- |\n");
        for (String p : config.policies()) {
            List<Cell> of = outcome.cells().stream().filter(c -> c.policy().equals(p)).toList();
            if (of.isEmpty()) continue;
            b.append("| ").append(p).append(" | ").append(range(of, 50)).append(" | ").append(range(of, 95)).append(" | ")
                    .append(range(of, 99)).append(" | ");
            long lo = Long.MAX_VALUE;
            long hi = 0;
            for (Cell c : of) {
                long h = c.hitTokens()[0] + c.hitTokens()[1] + c.hitTokens()[2];
                lo = Math.min(lo, h);
                hi = Math.max(hi, h);
            }
            b.append(lo == hi ? Long.toString(lo) : lo + "–" + hi).append(" |\n");
        }
        b.append(String.format(Locale.ROOT, "%n%s%n", outcome.passed() ? "Every served request's logits equal the cold pass's; "
                + "every Manager's leases and reservations returned to 0." : "FAILED: logits differ or leases stayed held (see the table)."));
        return b.toString();
    }

    private static String range(List<Cell> cells, double p) {
        double lo = Double.POSITIVE_INFINITY;
        double hi = Double.NEGATIVE_INFINITY;
        for (Cell c : cells) {
            lo = Math.min(lo, c.ttftPercentileMs(p));
            hi = Math.max(hi, c.ttftPercentileMs(p));
        }
        return cells.size() == 1 ? String.format(Locale.ROOT, "%.1f", lo) : String.format(Locale.ROOT, "%.1f–%.1f", lo, hi);
    }

    private static void writeCsv(Path file, Outcome outcome) throws IOException {
        StringBuilder b = new StringBuilder("run,policy,request,kind,prompt_tokens,engine,outcome,ttft_ms,queue_ms,restored_tokens,"
                + "source,prefix_blocks,local_prefix_blocks,peer_blocks,fallback\n");
        for (Cell c : outcome.cells()) {
            for (EnginePool.Result r : c.results()) {
                RoutedCluster.Route route = c.routes().get(r.request().id());
                b.append(String.format(Locale.ROOT, "%d,%s,%d,%s,%d,%d,%s,%.3f,%.3f,%d,%s,%d,%d,%d,%b%n", c.run(), c.policy(),
                        r.request().id(), r.request().kind(), r.request().prompt().length, r.engine(), r.outcome(),
                        r.ttftNanos() / 1e6, r.queueNanos() / 1e6, r.restoredTokens(), r.source(), route.prefixBlocks(),
                        route.localPrefixBlocks(), route.peerBlocks(), route.fallback()));
            }
        }
        Files.writeString(file, b);
    }
}
