package io.orbitkv.bench.route;

import io.orbitkv.bench.trace.TraceReader;
import io.orbitkv.bench.trace.TraceRequest;
import io.orbitkv.router.Policy;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;

/**
 * {@code bin/bench-route}: replays a Mooncake-format trace over N simulated workers for each
 * routing policy ({@link RouteSimulation}) and reports TTFT p50/p99, prefix-hit ratio, load
 * imbalance and bytes moved between hosts per policy, worker count and trace part. Writes
 * {@code table.md}, {@code results.csv} and {@code ttft.png} to {@code --out} and prints the table.
 *
 * <p>Trace parts: {@code first} (the first half of the requests: the only part looked at while
 * choosing defaults), {@code second} (the held-out half) and {@code whole}. Each part is replayed on
 * its own, from empty caches, at the time scale that gives its cold prefill work the load
 * {@code --load} on the workers (or at {@code --speedup}).
 *
 * <p>Single-threaded. Exits 0 after printing, 2 on bad arguments or a bad trace.
 */
public final class RouteBench {

    static final String USAGE = """
            usage: bench-route [--trace=FILE] [options]
              --workers=4,8            worker counts (1..64)
              --policies=joint,load,overlap
              --parts=first,second,whole  trace halves (first = tuning half, second = held out) and the whole
              --requests=N             use the first N requests of the file only
              --dram-blocks=B          host DRAM capacity per worker in blocks (default 4096 = 16 GiB of 4 MiB blocks)
              --ssd-blocks=B           host SSD capacity per worker in blocks (default 0: no SSD tier)
              --eviction=w-tinylfu|lru host cache eviction (default w-tinylfu, the tables' setting; lru is the Manager's default)
              --load=U                 cold prefill work / worker capacity (default 0.8); or
              --speedup=X              X times faster than the trace's clock (overrides --load)
              --event-delay-ms=D       residency change to router (default 2, the Manager's publish period)
              --no-peer                workers cannot read prefixes from other hosts
              cost constants (RouteCosts: this machine's measured figures):
              --block-tokens=512 --kv-bytes-per-token=8192 --prefill-rate=1037 (tokens/s)
              --dram-gbps=12.6 --ssd-gbps=1.001 --peer-gbps=0.57 --peer-fixed-ms=12.5
              --out=DIR                results directory (default bench-results/route)
            """;

    private static final Set<String> FLAGS = Set.of("no-peer", "help");
    private static final Set<String> KNOWN = Set.of("trace", "workers", "policies", "parts", "requests", "dram-blocks",
            "ssd-blocks", "eviction", "load", "speedup", "event-delay-ms", "no-peer", "block-tokens", "kv-bytes-per-token",
            "prefill-rate", "dram-gbps", "ssd-gbps", "peer-gbps", "peer-fixed-ms", "out", "help");

    /** One table row: a policy's result on one part at one worker count. */
    public record Row(String part, double timeScale, RouteSimulation.Result result) {
    }

    private RouteBench() {}

    public static void main(String[] args) throws Exception {
        try {
            Map<String, String> opts = parse(args);
            if (opts.containsKey("help")) {
                System.out.print(USAGE);
                return;
            }
            List<Row> rows = run(opts);
            System.out.print(table(rows));
        } catch (IllegalArgumentException e) {
            System.err.println("bench-route: " + e.getMessage());
            System.exit(2);
        } catch (TraceReader.TraceFormatException e) {
            System.err.println("bench-route: bad trace: " + e.getMessage());
            System.exit(2);
        }
    }

    /** Runs every part × worker count × policy; writes the result files; returns the rows. */
    public static List<Row> run(Map<String, String> opts) throws IOException {
        Path traceFile = Path.of(opts.getOrDefault("trace", "../shared/traces/conversation_trace.jsonl"));
        int maxRequests = Integer.parseInt(opts.getOrDefault("requests", String.valueOf(Integer.MAX_VALUE)));
        List<TraceRequest> trace = TraceReader.read(traceFile, 0, maxRequests);
        RouteCosts m = RouteCosts.MEASURED;
        RouteCosts costs = new RouteCosts(intOpt(opts, "block-tokens", m.blockTokens()),
                Long.parseLong(opts.getOrDefault("kv-bytes-per-token", String.valueOf(m.kvBytesPerToken()))),
                dbl(opts, "prefill-rate", m.prefillTokensPerSecond()), dbl(opts, "dram-gbps", m.dramBytesPerSecond() / 1e9) * 1e9,
                dbl(opts, "ssd-gbps", m.ssdBytesPerSecond() / 1e9) * 1e9, dbl(opts, "peer-gbps", m.peerBytesPerSecond() / 1e9) * 1e9,
                dbl(opts, "peer-fixed-ms", m.peerFixedSeconds() * 1e3) / 1e3);
        List<Integer> workerCounts = new ArrayList<>();
        for (String w : opts.getOrDefault("workers", "4,8").split(",")) workerCounts.add(Integer.parseInt(w.strip()));
        List<Policy> policies = new ArrayList<>();
        for (String p : opts.getOrDefault("policies", "joint,load,overlap").split(",")) policies.add(Policy.named(p.strip()));
        int dram = intOpt(opts, "dram-blocks", 4096);
        int ssd = intOpt(opts, "ssd-blocks", 0);
        String eviction = opts.getOrDefault("eviction", "w-tinylfu");
        double load = dbl(opts, "load", 0.8);
        Double speedup = opts.containsKey("speedup") ? Double.parseDouble(opts.get("speedup")) : null;
        if (speedup != null && !(speedup > 0)) throw new IllegalArgumentException("--speedup must be > 0: " + speedup);
        long delay = (long) (dbl(opts, "event-delay-ms", 2) * 1e6);
        boolean peer = !opts.containsKey("no-peer");
        Path out = Path.of(opts.getOrDefault("out", "bench-results/route"));

        Map<String, List<TraceRequest>> parts = new LinkedHashMap<>();
        int half = trace.size() / 2;
        for (String p : opts.getOrDefault("parts", "first,second,whole").split(",")) {
            switch (p.strip()) {
                case "first" -> parts.put("first half", trace.subList(0, Math.max(1, half)));
                case "second" -> parts.put("second half", trace.subList(Math.min(half, trace.size() - 1), trace.size()));
                case "whole" -> parts.put("whole", trace);
                default -> throw new IllegalArgumentException("unknown part '" + p + "' (first, second, whole)");
            }
        }
        List<Row> rows = new ArrayList<>();
        for (var part : parts.entrySet()) {
            for (int workers : workerCounts) {
                double scale = speedup != null ? 1 / speedup
                        : RouteSimulation.timeScaleForLoad(part.getValue(), workers, load, costs);
                RouteSimulation.Config cfg = new RouteSimulation.Config(workers, dram, ssd, eviction, costs, scale, delay, peer);
                for (Policy p : policies) {
                    long t = System.nanoTime();
                    RouteSimulation.Result r = RouteSimulation.run(part.getValue(), p, cfg);
                    System.err.printf(Locale.ROOT, "bench-route: %s, %d workers, %s: p50 %.0f ms, p99 %.0f ms (%.1f s)%n",
                            part.getKey(), workers, p.name(), r.ttftP50Ms(), r.ttftP99Ms(), (System.nanoTime() - t) / 1e9);
                    rows.add(new Row(part.getKey(), scale, r));
                }
            }
        }
        Files.createDirectories(out);
        Files.writeString(out.resolve("table.md"), header(traceFile, trace.size(), dram, ssd, eviction, load, speedup, delay,
                peer, costs) + table(rows), StandardCharsets.UTF_8);
        Files.write(out.resolve("results.csv"), csv(rows), StandardCharsets.UTF_8);
        chart(rows, out.resolve("ttft.png"));
        System.err.println("bench-route: wrote " + out.resolve("table.md") + ", results.csv, ttft.png");
        return rows;
    }

    static String header(Path trace, int requests, int dram, int ssd, String eviction, double load, Double speedup,
                         long delayNanos, boolean peer, RouteCosts c) {
        return String.format(Locale.ROOT, """
                Trace %s (%d requests). Per worker: %d DRAM blocks, %d SSD blocks, %s; %s; events %.1f ms late; peer reads %s.
                Costs: %d tokens/block, %d B/token (%.1f MiB/block), prefill %.0f tokens/s, DRAM %.2f GB/s, SSD %.3f GB/s, \
                peer %.2f GB/s + %.1f ms.

                """, trace.getFileName(), requests, dram, ssd, eviction,
                speedup != null ? "speedup " + speedup : "cold prefill load " + load, delayNanos / 1e6, peer ? "on" : "off",
                c.blockTokens(), c.kvBytesPerToken(), c.bytesPerBlock() / 1048576.0, c.prefillTokensPerSecond(),
                c.dramBytesPerSecond() / 1e9, c.ssdBytesPerSecond() / 1e9, c.peerBytesPerSecond() / 1e9, c.peerFixedSeconds() * 1e3);
    }

    /** The Markdown table; the best p50 and p99 of each (part, workers) group in bold. */
    public static String table(List<Row> rows) {
        StringBuilder sb = new StringBuilder();
        sb.append("| part | workers | policy | TTFT p50 s | TTFT p99 s | mean s | prefix-hit ratio | local share of hits "
                + "| work imbalance (max/mean) | request imbalance | GB between hosts | utilization | time scale |\n");
        sb.append("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for (Row row : rows) {
            RouteSimulation.Result r = row.result();
            double bestP50 = Double.MAX_VALUE, bestP99 = Double.MAX_VALUE;
            for (Row o : rows) {
                if (o.part().equals(row.part()) && o.result().workers() == r.workers()) {
                    bestP50 = Math.min(bestP50, o.result().ttftP50Ms());
                    bestP99 = Math.min(bestP99, o.result().ttftP99Ms());
                }
            }
            sb.append(String.format(Locale.ROOT, "| %s | %d | %s | %s | %s | %.2f | %.3f | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f |%n",
                    row.part(), r.workers(), r.policy(), bold(r.ttftP50Ms() / 1e3, r.ttftP50Ms() == bestP50),
                    bold(r.ttftP99Ms() / 1e3, r.ttftP99Ms() == bestP99), r.ttftMeanMs() / 1e3, r.hitRatio(), r.localHitRatio(),
                    r.workImbalance(), r.requestImbalance(), r.bytesBetweenHosts() / 1e9, r.utilization(), row.timeScale()));
        }
        return sb.toString();
    }

    private static String bold(double v, boolean best) {
        String s = String.format(Locale.ROOT, "%.2f", v);
        return best ? "**" + s + "**" : s;
    }

    static List<String> csv(List<Row> rows) {
        List<String> out = new ArrayList<>();
        out.add("part,workers,policy,requests,ttft_p50_ms,ttft_p99_ms,ttft_mean_ms,hit_ratio,local_hit_share,work_imbalance,"
                + "request_imbalance,bytes_between_hosts,utilization,fallback_decisions,time_scale");
        for (Row row : rows) {
            RouteSimulation.Result r = row.result();
            out.add(String.format(Locale.ROOT, "%s,%d,%s,%d,%.3f,%.3f,%.3f,%.5f,%.5f,%.4f,%.4f,%d,%.4f,%d,%.5f", row.part(),
                    r.workers(), r.policy(), r.requests(), r.ttftP50Ms(), r.ttftP99Ms(), r.ttftMeanMs(), r.hitRatio(),
                    r.localHitRatio(), r.workImbalance(), r.requestImbalance(), r.bytesBetweenHosts(), r.utilization(),
                    r.fallbackDecisions(), row.timeScale()));
        }
        return out;
    }

    /** Grouped bars: p50 and p99 TTFT per (part, workers) group, one series per policy and percentile. */
    static void chart(List<Row> rows, Path file) throws IOException {
        List<String> groups = new ArrayList<>();
        List<String> policies = new ArrayList<>();
        for (Row r : rows) {
            String g = r.part() + ", " + r.result().workers() + " w";
            if (!groups.contains(g)) groups.add(g);
            if (!policies.contains(r.result().policy())) policies.add(r.result().policy());
        }
        CategoryChart chart = new CategoryChartBuilder().width(1100).height(560)
                .title("Routing policies: TTFT p50 and p99 (simulated, s, log scale)").xAxisTitle("trace part, workers")
                .yAxisTitle("TTFT s").build();
        chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.OutsideE);
        // a policy that herds onto one worker is 100-1000x slower: a linear axis would flatten the
        // others; xchart draws bars from zero, which a log axis cannot show, so markers
        chart.getStyler().setYAxisLogarithmic(true);
        chart.getStyler().setDefaultSeriesRenderStyle(org.knowm.xchart.CategorySeries.CategorySeriesRenderStyle.Scatter);
        for (String pct : List.of("p50", "p99")) {
            for (String p : policies) {
                List<Double> ys = new ArrayList<>();
                for (String g : groups) {
                    double y = Double.NaN;
                    for (Row r : rows) {
                        if ((r.part() + ", " + r.result().workers() + " w").equals(g) && r.result().policy().equals(p)) {
                            y = (pct.equals("p50") ? r.result().ttftP50Ms() : r.result().ttftP99Ms()) / 1e3;
                        }
                    }
                    ys.add(y);
                }
                chart.addSeries(p + " " + pct, groups, ys);
            }
        }
        String name = file.toString();
        BitmapEncoder.saveBitmap(chart, name.substring(0, name.length() - 4), BitmapEncoder.BitmapFormat.PNG);
    }

    static Map<String, String> parse(String[] args) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String a : args) {
            if (a.equals("-h")) a = "--help";
            if (!a.startsWith("--")) throw new IllegalArgumentException("unexpected argument " + a + " (try --help)");
            String key = a.substring(2);
            String value = "true";
            int eq = key.indexOf('=');
            if (eq >= 0) {
                value = key.substring(eq + 1);
                key = key.substring(0, eq);
            } else if (!FLAGS.contains(key)) {
                throw new IllegalArgumentException("option --" + key + " needs a value (--" + key + "=V)");
            }
            if (!KNOWN.contains(key)) throw new IllegalArgumentException("unknown option --" + key + " (try --help)");
            out.put(key, value);
        }
        return out;
    }

    private static int intOpt(Map<String, String> o, String k, int def) {
        return o.containsKey(k) ? Integer.parseInt(o.get(k)) : def;
    }

    private static double dbl(Map<String, String> o, String k, double def) {
        return o.containsKey(k) ? Double.parseDouble(o.get(k)) : def;
    }
}
