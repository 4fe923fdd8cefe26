package io.orbitkv.bench.ttft;

import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * Writes the benchmark's outputs into one directory: {@code ttft.md} (the tables),
 * {@code ttft-requests.csv} (every sample), {@code ttft-per-turn-<engine>.png} and
 * {@code ttft-percentiles.png}.
 *
 * <p>Stateless; charts are rendered headless with XChart ({@code java.awt.headless=true} is set
 * by {@link TtftBench}). Single-threaded.
 */
public final class TtftReport {

    static final double MISS_TARGET_PERCENT = 1.0;
    static final double HIT_MODEL_TARGET = 1.2;

    private TtftReport() {
    }

    /** The Markdown tables: per arm, the two targets, then where a full-prefix hit's TTFT went. */
    static String markdown(List<TtftRun.Result> results) {
        StringBuilder md = new StringBuilder();
        md.append("| engine | arm | requests | TTFT p50 ms | p95 ms | p99 ms | prefill tokens / request | restored tokens / request | restored KiB / request | hit source |\n");
        md.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
        for (TtftRun.Result r : results) {
            for (Arm arm : ran(r)) {
                TtftStats.ArmSummary a = TtftStats.summary(r.engine(), arm, r.samples());
                md.append(String.format(Locale.ROOT, "| %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f | %s |%n",
                        r.engine(), arm.label, a.requests(), a.p50Ms(), a.p95Ms(), a.p99Ms(), a.prefilledPerRequest(),
                        a.restoredTokensPerRequest(), a.restoredBytesPerRequest() / 1024, sources(a)));
            }
        }
        md.append('\n');
        md.append("| engine | check | measured | target | met |\n");
        md.append("| --- | --- | ---: | --- | --- |\n");
        for (TtftRun.Result r : results) {
            TtftStats.MissOverhead m = TtftStats.missOverhead(r.engine(), r.samples());
            double coldP50 = TtftStats.summary(r.engine(), Arm.COLD, r.samples()).p50Ms();
            double alonePercent = r.missLookupNanos() / 1e6 / coldP50 * 100;
            md.append(String.format(Locale.ROOT,
                    "| %s | miss path, its added work alone: the QUERY of a last-turn prompt's keys (%.3f ms) / cold TTFT p50 | %+.3f %% | <= %.0f %% | %s |%n",
                    r.engine(), r.missLookupNanos() / 1e6, alonePercent, MISS_TARGET_PERCENT,
                    alonePercent <= MISS_TARGET_PERCENT ? "yes" : "**no**"));
            md.append(String.format(Locale.ROOT,
                    "| %s | miss path end to end: median of %d paired miss/cold TTFT ratios - 1 [interquartile %+.1f %% .. %+.1f %%] (ratio of p50s - 1) | %+.2f %% (%+.2f %%) | <= %.0f %% | %s |%n",
                    r.engine(), m.pairs(), (m.p25Ratio() - 1) * 100, (m.p75Ratio() - 1) * 100, m.percent(),
                    (m.p50Ratio() - 1) * 100, MISS_TARGET_PERCENT, missVerdict(m)));
            TtftStats.HitModel h = TtftStats.hitModel(r.engine(), r.samples(), r.copyBytesPerSecond(), r.stepNanos());
            md.append(String.format(Locale.ROOT,
                    "| %s | full-prefix DRAM hit TTFT / model, p50 (p95) of %d; median %.0f KiB restored: model %.2f ms = copy %.2f ms + step %.2f ms, measured %.2f ms | %.2f (%.2f) | <= %.1f | %s |%n",
                    r.engine(), h.requests(), h.medianRestoredBytes() / 1024, h.medianModelMs(),
                    h.medianRestoredBytes() / r.copyBytesPerSecond() * 1e3, r.stepNanos() / 1e6, h.medianTtftMs(),
                    h.p50Ratio(), h.p95Ratio(), HIT_MODEL_TARGET, h.p50Ratio() <= HIT_MODEL_TARGET ? "yes" : "**no**"));
        }
        md.append('\n');
        md.append("| engine | full-prefix DRAM hit, inside the runner (median of the requests, ms) | lookup: QUERY + leases | copy | engine import | release | prefill step | rest | TTFT |\n");
        md.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for (TtftRun.Result r : results) {
            TtftStats.Split split = TtftStats.split(r.engine(), Arm.DRAM_FULL, r.samples());
            md.append(String.format(Locale.ROOT, "| %s | %d requests | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |%n",
                    r.engine(), split.requests(), split.lookupMs(), split.copyMs(), split.importMs(), split.releaseMs(),
                    split.prefillMs(), split.restMs(), split.ttftMs()));
        }
        return md.toString();
    }

    /**
     * yes / no only when the paired ratios' interquartile range is on one side of the target;
     * otherwise the run's noise is larger than the effect and the verdict says so.
     */
    static String missVerdict(TtftStats.MissOverhead m) {
        double limit = 1 + MISS_TARGET_PERCENT / 100;
        if (m.p75Ratio() <= limit) return "yes";
        if (m.p25Ratio() > limit) return "**no**";
        return String.format(Locale.ROOT, "not resolved (noise %.0f %%)", (m.p75Ratio() - m.p25Ratio()) * 50);
    }

    private static String sources(TtftStats.ArmSummary a) {
        return a.sources().entrySet().stream().map(e -> e.getKey() + " " + e.getValue())
                .collect(Collectors.joining(", "));
    }

    static void writeCsv(Path file, List<TtftRun.Result> results) throws IOException {
        List<String> lines = new ArrayList<>();
        lines.add(Sample.CSV_HEADER);
        for (TtftRun.Result r : results) for (Sample s : r.samples()) lines.add(s.csv());
        Files.write(file, lines);
    }

    /** Mean TTFT per turn per arm, one chart per engine; returns the files written. */
    static List<Path> perTurnCharts(Path dir, List<TtftRun.Result> results, int turns) throws IOException {
        List<Path> files = new ArrayList<>();
        for (TtftRun.Result r : results) {
            XYChart chart = new XYChartBuilder().width(800).height(500)
                    .title(r.engine() + ": mean TTFT per turn (" + sessions(r) + " sessions)")
                    .xAxisTitle("turn").yAxisTitle("TTFT ms (log)").build();
            chart.getStyler().setYAxisLogarithmic(true);
            double[] x = new double[turns];
            for (int t = 0; t < turns; t++) x[t] = t + 1;
            for (Arm arm : ran(r)) {
                double[] y = new double[turns];
                for (int t = 0; t < turns; t++) {
                    final int turn = t;
                    y[t] = r.samples().stream().filter(s -> s.arm() == arm && s.turn() == turn)
                            .mapToDouble(Sample::ttftMillis).average().orElse(Double.NaN);
                }
                chart.addSeries(arm.label, x, y);
            }
            Path file = dir.resolve("ttft-per-turn-" + r.engine().replace(".", "").toLowerCase(Locale.ROOT) + ".png");
            BitmapEncoder.saveBitmap(chart, stripPng(file), BitmapEncoder.BitmapFormat.PNG);
            files.add(file);
        }
        return files;
    }

    /** p50/p95/p99 TTFT per engine and arm, one bar group each; returns the file written. */
    static Path percentileChart(Path dir, List<TtftRun.Result> results) throws IOException {
        CategoryChart chart = new CategoryChartBuilder().width(1100).height(550).title("TTFT percentiles per engine and arm")
                .xAxisTitle("engine / arm").yAxisTitle("TTFT ms").build();
        chart.getStyler().setXAxisLabelRotation(30);
        List<String> categories = new ArrayList<>();
        List<Double> p50 = new ArrayList<>();
        List<Double> p95 = new ArrayList<>();
        List<Double> p99 = new ArrayList<>();
        for (TtftRun.Result r : results) {
            for (Arm arm : ran(r)) {
                TtftStats.ArmSummary a = TtftStats.summary(r.engine(), arm, r.samples());
                categories.add(r.engine() + " " + arm.label);
                p50.add(a.p50Ms());
                p95.add(a.p95Ms());
                p99.add(a.p99Ms());
            }
        }
        chart.addSeries("p50", categories, p50);
        chart.addSeries("p95", categories, p95);
        chart.addSeries("p99", categories, p99);
        Path file = dir.resolve("ttft-percentiles.png");
        BitmapEncoder.saveBitmap(chart, stripPng(file), BitmapEncoder.BitmapFormat.PNG);
        return file;
    }

    /** The arms {@code r} has samples of, in {@link Arm} order (a run may skip some, {@code --skip}). */
    private static List<Arm> ran(TtftRun.Result r) {
        return java.util.Arrays.stream(Arm.values()).filter(a -> r.samples().stream().anyMatch(s -> s.arm() == a)).toList();
    }

    private static long sessions(TtftRun.Result r) {
        return r.samples().stream().mapToInt(Sample::session).distinct().count();
    }

    /** {@code file} without its {@code .png}: the name xchart's {@code saveBitmap} appends the extension to. */
    public static String stripPng(Path file) {
        String s = file.toString();
        return s.substring(0, s.length() - ".png".length());
    }
}
