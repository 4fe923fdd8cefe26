package io.orbitkv.bench.serve;

import io.orbitkv.bench.ttft.TtftReport;
import io.orbitkv.bench.ttft.TtftStats;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.lines.SeriesLines;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The serving benchmark's files: {@code serve.md} (header, one table row per cell, the targets),
 * {@code serve-cells.csv}, {@code serve-requests.csv} and one PNG per working set (TTFT p50 and p99
 * against concurrency, one line pair per arm).
 *
 * <p>Stateless functions. Percentiles are nearest-rank over the served requests (cancelled
 * requests have no first token); requests/s and tokens/s are served requests and generated tokens
 * over the cell's wall time (first arrival to last completion).
 */
final class ServeReport {

    private ServeReport() {
    }

    static double ttftPercentile(ServeBench.Cell c, double p) {
        double[] v = c.results().stream().filter(EnginePool.Result::served).mapToDouble(r -> r.ttftNanos() / 1e6).toArray();
        return v.length == 0 ? Double.NaN : TtftStats.percentile(v, p);
    }

    static double e2ePercentile(ServeBench.Cell c, double p) {
        double[] v = c.results().stream().filter(EnginePool.Result::served).mapToDouble(r -> r.e2eNanos() / 1e6).toArray();
        return v.length == 0 ? Double.NaN : TtftStats.percentile(v, p);
    }

    /** Restored tokens of the served requests by where the runner said they came from. */
    static long restored(ServeBench.Cell c, String source) {
        return c.results().stream().filter(EnginePool.Result::served).filter(r -> r.source().equals(source))
                .mapToLong(EnginePool.Result::restoredTokens).sum();
    }

    static long cancelled(ServeBench.Cell c) {
        return c.results().stream().filter(r -> !r.served()).count();
    }

    /** Writes every file and returns the Markdown. */
    static String write(ServeBench.Config config, ServeBench.Outcome outcome, String loadStart, String loadEnd, long seconds)
            throws IOException {
        Files.createDirectories(config.out());
        StringBuilder md = new StringBuilder("# OrbitKV serving benchmark\n\n");
        md.append(String.format(Locale.ROOT, "- %s, commit %s; %s, %d cores; load average at the start %s, at the end %s; %d s%n",
                Instant.now().truncatedTo(ChronoUnit.SECONDS), System.getenv().getOrDefault("ORBITKV_COMMIT", "unknown"),
                System.getProperty("java.vm.name") + " " + System.getProperty("java.version"),
                Runtime.getRuntime().availableProcessors(), loadStart, loadEnd, seconds));
        md.append(String.format(Locale.ROOT, "- model %s (%d layers, hidden %d), llama.cpp %d thread(s) per engine, %d-token pages of %d KiB; "
                        + "pool of %d engine processes, session-affine routing; engine-local KV memory %s per engine; "
                        + "OrbitKV DRAM %s, SSD %s (write-through); arrivals Poisson at %.2f requests/s per unit of concurrency%n",
                config.spec().name(), config.spec().layers(), config.spec().hidden(), config.threads(), config.pageTokens(),
                outcome.pageBytes() / 1024, config.engines(), size(config.engineKvBytes()), size(config.dramBytes()),
                size(config.ssdBytes()), config.ratePerSlot()));
        for (ServeBench.WorkingSet ws : config.workingSets()) {
            long pages = ServeWorkload.distinctPages(ws.requests(), config.pageTokens());
            md.append(String.format(Locale.ROOT, "- working set `%s`: %d requests, %d distinct pages = %.1f MiB; %s%n", ws.name(),
                    ws.requests().size(), pages, pages * outcome.pageBytes() / 1048576.0, ws.description()));
        }
        md.append(String.format(Locale.ROOT, "- parity: %d restored-arm requests compared with the cold arm's logits (FNV-1a of every bit), %d differ; "
                + "leases and reservations back to 0 after every cell: %s%n%n", outcome.compared(), outcome.mismatched(),
                outcome.leasesDrained() ? "yes" : "**no**"));
        md.append("| working set | arm | conc. | served | cancelled | TTFT p50 ms | p95 | p99 | e2e p50 ms | p95 | p99 | req/s | out tok/s "
                + "| hit tokens engine | DRAM | SSD (staged) | Manager hit tokens DRAM / SSD | SSD read / written MiB | leases after | publish drops |\n");
        md.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for (ServeBench.Cell c : outcome.cells()) {
            long served = c.results().size() - cancelled(c);
            long outTokens = c.results().stream().mapToLong(EnginePool.Result::generatedTokens).sum();
            boolean local = c.arm() == ServeArm.ENGINE_LOCAL;
            boolean orbit = c.arm().orbitKv();
            md.append(String.format(Locale.ROOT,
                    "| %s | %s | %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %d | %d | %d | %s | %s | %s | %s |%n",
                    c.workingSet(), c.arm().label, c.concurrency(), served, cancelled(c), ttftPercentile(c, 50),
                    ttftPercentile(c, 95), ttftPercentile(c, 99), e2ePercentile(c, 50), e2ePercentile(c, 95), e2ePercentile(c, 99),
                    served / c.wallSeconds(), outTokens / c.wallSeconds(), local ? restored(c, "DRAM") : 0,
                    orbit ? restored(c, "DRAM") : 0, orbit ? restored(c, "STAGED") : 0,
                    orbit ? c.managerHitDram() + " / " + c.managerHitSsd() : "-",
                    orbit ? String.format(Locale.ROOT, "%.1f / %.1f", c.ssdReadBytes() / 1048576.0, c.ssdWriteBytes() / 1048576.0) : "-",
                    c.arm() == ServeArm.COLD ? "-" : Long.toString(c.leasesAfter()),
                    orbit ? Long.toString(c.publishDroppedPages()) : "-"));
        }
        md.append('\n').append(profile(outcome)).append('\n').append(targets(outcome));
        writeCsv(config.out(), outcome);
        List<Path> charts = charts(config, outcome);
        md.append("\nCharts: ").append(String.join(", ", charts.stream().map(Path::toString).toList())).append('\n');
        Files.writeString(config.out().resolve("serve.md"), md.toString());
        return md.toString();
    }

    /**
     * Where a served request's time went, means per cell: waiting (arrival to the start of its
     * service at the engine: the in-flight cap and the engine's queue), service to the first token
     * (lookup, restore, prefill), and after the first token (decode, then publish).
     */
    static String profile(ServeBench.Outcome outcome) {
        StringBuilder sb = new StringBuilder("| working set | arm | conc. | queued ms (mean) | to first token ms | after first token ms "
                + "| prefilled tokens / request | restored tokens / request |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for (ServeBench.Cell c : outcome.cells()) {
            List<EnginePool.Result> s = c.results().stream().filter(EnginePool.Result::served).toList();
            if (s.isEmpty()) continue;
            sb.append(String.format(Locale.ROOT, "| %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f |%n", c.workingSet(), c.arm().label,
                    c.concurrency(), s.stream().mapToLong(EnginePool.Result::queueNanos).average().orElse(0) / 1e6,
                    s.stream().mapToLong(r -> r.ttftNanos() - r.queueNanos()).average().orElse(0) / 1e6,
                    s.stream().mapToLong(EnginePool.Result::afterFirstTokenNanos).average().orElse(0) / 1e6,
                    s.stream().mapToInt(r -> r.request().prompt().length - r.restoredTokens()).average().orElse(0),
                    s.stream().mapToInt(EnginePool.Result::restoredTokens).average().orElse(0)));
        }
        return sb.toString();
    }

    /** The two targets, for each concurrency where both arms ran. */
    static String targets(ServeBench.Outcome outcome) {
        StringBuilder sb = new StringBuilder("| working set | concurrency | arm | check | OrbitKV arm | engine-local | target | met |\n"
                + "| --- | ---: | --- | --- | ---: | ---: | --- | --- |\n");
        for (ServeBench.Cell o : outcome.cells()) {
            if (!o.arm().orbitKv()) continue;
            for (ServeBench.Cell l : outcome.cells()) {
                if (l.arm() != ServeArm.ENGINE_LOCAL || !l.workingSet().equals(o.workingSet()) || l.concurrency() != o.concurrency()) continue;
                double op99 = ttftPercentile(o, 99);
                double lp99 = ttftPercentile(l, 99);
                double op50 = ttftPercentile(o, 50);
                double lp50 = ttftPercentile(l, 50);
                sb.append(String.format(Locale.ROOT, "| %s | %d | %s | TTFT p99 | %.1f ms | %.1f ms | OrbitKV below%s | %s |%n",
                        o.workingSet(), o.concurrency(), o.arm().label, op99, lp99,
                        o.workingSet().equals("large") && o.concurrency() == 16 ? " (the target)" : "", op99 < lp99 ? "yes" : "**no**"));
                sb.append(String.format(Locale.ROOT, "| %s | %d | %s | TTFT p50 | %.1f ms | %.1f ms | within 10 %%%s | %s (%+.1f %%) |%n",
                        o.workingSet(), o.concurrency(), o.arm().label, op50, lp50, o.workingSet().equals("fits") ? " (the target)" : "",
                        op50 <= 1.1 * lp50 ? "yes" : "**no**", (op50 / lp50 - 1) * 100));
            }
        }
        return sb.toString();
    }

    private static void writeCsv(Path dir, ServeBench.Outcome outcome) throws IOException {
        List<String> cells = new ArrayList<>();
        cells.add("working_set,arm,concurrency,requests,served,cancelled,ttft_p50_ms,ttft_p95_ms,ttft_p99_ms,e2e_p50_ms,e2e_p95_ms,"
                + "e2e_p99_ms,wall_s,requests_per_s,out_tokens_per_s,hit_tokens_engine,hit_tokens_dram,hit_tokens_staged,"
                + "manager_hit_tokens_dram,manager_hit_tokens_ssd,ssd_read_bytes,ssd_write_bytes,leases_after,local_evictions");
        List<String> requests = new ArrayList<>();
        requests.add("working_set,arm,concurrency,id,kind,affinity,engine,outcome,cancel_at,prompt_tokens,restored_tokens,source,"
                + "ttft_ns,e2e_ns,wait_ns,queue_ns,after_first_token_ns,generated_tokens,logits_hash");
        for (ServeBench.Cell c : outcome.cells()) {
            long served = c.results().size() - cancelled(c);
            long outTokens = c.results().stream().mapToLong(EnginePool.Result::generatedTokens).sum();
            boolean local = c.arm() == ServeArm.ENGINE_LOCAL;
            cells.add(String.join(",", c.workingSet(), c.arm().name(), Integer.toString(c.concurrency()),
                    Integer.toString(c.results().size()), Long.toString(served), Long.toString(cancelled(c)),
                    f(ttftPercentile(c, 50)), f(ttftPercentile(c, 95)), f(ttftPercentile(c, 99)), f(e2ePercentile(c, 50)),
                    f(e2ePercentile(c, 95)), f(e2ePercentile(c, 99)), f(c.wallSeconds()), f(served / c.wallSeconds()),
                    f(outTokens / c.wallSeconds()), Long.toString(local ? restored(c, "DRAM") : 0),
                    Long.toString(local ? 0 : restored(c, "DRAM")), Long.toString(restored(c, "STAGED")),
                    Long.toString(c.managerHitDram()), Long.toString(c.managerHitSsd()), Long.toString(c.ssdReadBytes()),
                    Long.toString(c.ssdWriteBytes()), Long.toString(c.leasesAfter()), Long.toString(c.localEvictions())));
            for (EnginePool.Result r : c.results()) {
                requests.add(String.join(",", c.workingSet(), c.arm().name(), Integer.toString(c.concurrency()),
                        Integer.toString(r.request().id()), r.request().kind(), Long.toString(r.request().affinity()),
                        Integer.toString(r.engine()), r.outcome(), r.request().cancelAt().name(),
                        Integer.toString(r.request().prompt().length), Integer.toString(r.restoredTokens()), r.source(),
                        Long.toString(r.ttftNanos()), Long.toString(r.e2eNanos()), Long.toString(r.waitNanos()),
                        Long.toString(r.queueNanos()), Long.toString(r.afterFirstTokenNanos()),
                        Integer.toString(r.generatedTokens()), Long.toHexString(r.logitsHash())));
            }
        }
        Files.write(dir.resolve("serve-cells.csv"), cells);
        Files.write(dir.resolve("serve-requests.csv"), requests);
    }

    private static List<Path> charts(ServeBench.Config config, ServeBench.Outcome outcome) throws IOException {
        List<Path> files = new ArrayList<>();
        for (ServeBench.WorkingSet ws : config.workingSets()) {
            XYChart chart = new XYChartBuilder().width(900).height(520)
                    .title("TTFT vs concurrency, working set " + ws.name() + " (" + config.engines() + " engines)")
                    .xAxisTitle("requests in flight").yAxisTitle("TTFT ms (log)").build();
            chart.getStyler().setYAxisLogarithmic(true);
            for (ServeArm arm : ServeArm.values()) {
                List<ServeBench.Cell> mine = outcome.cells().stream()
                        .filter(c -> c.workingSet().equals(ws.name()) && c.arm() == arm).toList();
                if (mine.isEmpty()) continue;
                double[] x = mine.stream().mapToDouble(ServeBench.Cell::concurrency).toArray();
                // one colour per arm: p50 solid, p99 dashed
                java.awt.Color colour = switch (arm) {
                    case COLD -> new java.awt.Color(0x60, 0x60, 0x60);
                    case ENGINE_LOCAL -> new java.awt.Color(0xE0, 0x80, 0x10);
                    case ORBITKV -> new java.awt.Color(0x10, 0x80, 0x40);
                    case ORBITKV_SYNC -> new java.awt.Color(0x30, 0x50, 0xC0);
                };
                XYSeries p50 = chart.addSeries(arm.label + " p50", x, mine.stream().mapToDouble(c -> ttftPercentile(c, 50)).toArray());
                XYSeries p99 = chart.addSeries(arm.label + " p99", x, mine.stream().mapToDouble(c -> ttftPercentile(c, 99)).toArray());
                for (XYSeries series : List.of(p50, p99)) {
                    series.setLineColor(colour);
                    series.setMarkerColor(colour);
                }
                p99.setLineStyle(SeriesLines.DASH_DASH);
            }
            Path file = config.out().resolve("serve-ttft-" + ws.name() + ".png");
            BitmapEncoder.saveBitmap(chart, TtftReport.stripPng(file), BitmapEncoder.BitmapFormat.PNG);
            files.add(file);
        }
        return files;
    }

    private static String size(long bytes) {
        return bytes >= 1 << 20 ? String.format(Locale.ROOT, "%.1f MiB", bytes / 1048576.0) : bytes / 1024 + " KiB";
    }

    private static String f(double v) {
        return String.format(Locale.ROOT, "%.3f", v);
    }
}
