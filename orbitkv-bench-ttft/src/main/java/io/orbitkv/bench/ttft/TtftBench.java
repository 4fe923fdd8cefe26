package io.orbitkv.bench.ttft;

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

/**
 * Entry point of {@code orbitkv-bench-ttft.jar} ({@code bin/bench-ttft}): generates the bench
 * model, runs the multi-turn TTFT workload on each engine through every {@link Arm}, and writes
 * {@code ttft.md}, {@code ttft-requests.csv} and the PNG charts to {@code --out}.
 *
 * <pre>
 *   java --add-modules jdk.incubator.vector -jar orbitkv-bench-ttft.jar [--out=bench-results/ttft] [--work=var/ttft]
 *        [--engines=jlama,llamacpp] [--sessions=4] [--turns=3] [--system-tokens=256] [--user-tokens=48]
 *        [--answer-tokens=16] [--page-tokens=16] [--model=bench|ci] [--llamacpp-threads=1] [--skip=ssd,cross]
 * </pre>
 *
 * <p>Single-threaded (the engines use their own threads). The cross-host arm starts its own etcd
 * ({@code /usr/bin/etcd}, required) and stops it at the end. {@code --work} holds the model files
 * and the Managers' stores; it must be on a real disk for the SSD arm to mean SSD, and its
 * contents are deleted at the end. Exits 0 after writing the report whether or not the targets
 * were met (the table says so), 2 on bad arguments.
 */
public final class TtftBench {

    private static final Set<String> OPTIONS = Set.of("out", "work", "engines", "sessions", "turns", "system-tokens",
            "user-tokens", "answer-tokens", "page-tokens", "model", "llamacpp-threads", "skip");

    private static String loadAtStart = "";

    private TtftBench() {
    }

    public static void main(String[] args) throws Exception {
        System.setProperty("java.awt.headless", "true");
        Map<String, String> o = options(args, OPTIONS, "ttft");
        Workload d = Workload.defaults();
        Workload workload = new Workload(num(o, "sessions", d.sessions()), num(o, "turns", d.turns()),
                num(o, "system-tokens", d.systemTokens()), num(o, "user-tokens", d.userTokens()),
                num(o, "answer-tokens", d.answerTokens()), d.seed());
        int pageTokens = num(o, "page-tokens", 16);
        TinyLlamaSpec spec = o.getOrDefault("model", "bench").equals("ci") ? TinyLlamaSpec.ci() : TinyLlamaSpec.bench();
        if (workload.maxContextTokens() > spec.context()) {
            System.err.printf("ttft: the last prompt and answer (%d tokens) exceed the %s context (%d)%n",
                    workload.maxContextTokens(), spec.name(), spec.context());
            System.exit(2);
        }
        List<String> engines = List.of(o.getOrDefault("engines", "jlama,llamacpp").split(","));
        Path out = Path.of(o.getOrDefault("out", "bench-results/ttft"));
        Path work = Path.of(o.getOrDefault("work", "var/ttft"));
        Files.createDirectories(out);
        FileTrees.delete(work);
        Files.createDirectories(work);
        PrintStream log = System.err;
        long t0 = System.nanoTime();
        loadAtStart = loadAverage();
        try {
            log.printf("ttft: generating %s (%d layers, hidden %d) in %s%n", spec.name(), spec.layers(), spec.hidden(), work);
            TinyLlamaModel model = TinyLlamaModel.generate(spec, work.resolve("model"));
            List<TtftRun.Result> results = new ArrayList<>();
            for (String e : engines) {
                try (TtftEngine engine = switch (e.trim()) {
                    case "jlama" -> JlamaTtftEngine.load(model, pageTokens);
                    case "llamacpp" -> LlamaCppTtftEngine.load(model, pageTokens, workload.maxContextTokens() + 64,
                            num(o, "llamacpp-threads", 1));
                    default -> throw new IllegalArgumentException("unknown engine " + e + " (jlama, llamacpp)");
                }) {
                    results.add(TtftRun.run(engine, workload, work, log, Arm.paired(o.getOrDefault("skip", ""))));
                }
            }
            String table = TtftReport.markdown(results);
            TtftReport.writeCsv(out.resolve("ttft-requests.csv"), results);
            List<Path> charts = new ArrayList<>(TtftReport.perTurnCharts(out, results, workload.turns()));
            charts.add(TtftReport.percentileChart(out, results));
            String md = header(spec, workload, pageTokens, results, (System.nanoTime() - t0) / 1_000_000_000L) + table
                    + "\nCharts: " + String.join(", ", charts.stream().map(Path::toString).toList()) + "\n";
            Files.writeString(out.resolve("ttft.md"), md);
            System.out.print(md);
        } finally {
            FileTrees.delete(work);
        }
        System.exit(0);
    }

    private static String header(TinyLlamaSpec spec, Workload w, int pageTokens, List<TtftRun.Result> results,
                                 long seconds) {
        StringBuilder sb = new StringBuilder("# OrbitKV TTFT benchmark\n\n");
        sb.append(String.format(Locale.ROOT, "- model: %s (%d layers, hidden %d, %d/%d heads, vocab %d), page %d tokens%n",
                spec.name(), spec.layers(), spec.hidden(), spec.heads(), spec.kvHeads(), spec.vocab(), pageTokens));
        sb.append(String.format(Locale.ROOT,
                "- workload: %d sessions x %d turns; system prompt %d tokens shared, user message %d, answer %d (last prompt %d tokens); warm-up discarded; %d s%n",
                w.sessions(), w.turns(), w.systemTokens(), w.userTokens(), w.answerTokens(), w.lastPromptTokens(), seconds));
        for (TtftRun.Result r : results) {
            sb.append(String.format(Locale.ROOT,
                    "- %s: page image %d KiB; minimum compute step %.2f ms after %d tokens; MemorySegment.copy %.2f GB/s; Manager QUERY + RELEASE of %d resident pages %.2f ms; %d SSD-arm Manager restarts; %d miss-path QUERYs; %d cross-host arm host-B Managers started, each new to the prefix, QUERYs with the 2 s peer wait of an unmeasured prefill rate (%d untimed primer requests restored nothing)%n",
                    r.engine(), r.pageBytes() / 1024, r.stepNanos() / 1e6, r.stepContextTokens(),
                    r.copyBytesPerSecond() / 1e9, r.lookupPages(), r.lookupNanos() / 1e6, r.managerRestarts(),
                    r.missQueries(), r.crossHosts(), r.crossMissedPrimers()));
        }
        sb.append(String.format(Locale.ROOT, "- %s, %d cores; load average at the start %s, at the end %s%n%n",
                System.getProperty("java.vm.name") + " " + System.getProperty("java.version"),
                Runtime.getRuntime().availableProcessors(), loadAtStart, loadAverage()));
        return sb.toString();
    }

    /**
     * {@code --key=value} arguments as a map; an argument that is not one of {@code known} ends
     * the JVM with status 2 and a message naming {@code tool} and the known options.
     */
    public static Map<String, String> options(String[] args, Set<String> known, String tool) {
        Map<String, String> o = new HashMap<>();
        for (String a : args) {
            int eq = a.indexOf('=');
            String key = a.startsWith("--") && eq > 2 ? a.substring(2, eq) : "";
            if (!known.contains(key)) {
                System.err.println(tool + ": unknown argument " + a + "; options: " + known);
                System.exit(2);
            }
            o.put(key, a.substring(eq + 1));
        }
        return o;
    }

    /** The 1-minute load average from /proc/loadavg, or "n/a". */
    public static String loadAverage() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
        } catch (IOException e) {
            return "n/a";
        }
    }

    private static int num(Map<String, String> o, String key, int dflt) {
        return o.containsKey(key) ? Integer.parseInt(o.get(key)) : dflt;
    }
}
