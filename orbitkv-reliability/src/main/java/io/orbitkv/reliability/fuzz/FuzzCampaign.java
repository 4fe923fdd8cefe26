package io.orbitkv.reliability.fuzz;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Part {@code fuzz} of the reliability campaign: coverage-guided fuzzing of the decoders with
 * Jazzer (libFuzzer's engine over JVM bytecode coverage). Each {@link FuzzTarget} runs in a child
 * JVM under Jazzer's standalone driver ({@code com.code_intelligence.jazzer.Jazzer}) for
 * {@code --executions} inputs, starting from its committed corpus
 * ({@code orbitkv-reliability/src/test/resources/fuzz/<target>/}) plus a work corpus under
 * {@code --work}; an input that throws anything but the codec's documented refusal, or runs
 * longer than {@code --timeout-seconds}, is a finding, written under {@code --work/<target>/findings}.
 * {@code --merge} then adds the work corpus's coverage-increasing inputs to the committed one
 * (libFuzzer {@code -merge=1}); {@code --write-seeds} writes each target's encoder-built seeds
 * there; {@code --replay} only runs the committed corpus in this JVM (what CI's test does).
 *
 * <p>Thread model: one thread; children are waited for one at a time.
 */
@Command(name = "fuzz", mixinStandardHelpOptions = true, description = "fuzz the decoders and codecs with Jazzer")
public final class FuzzCampaign implements Callable<Integer> {

    /** Target name to target, in the order {@code --target all} runs them. */
    public static final Map<String, FuzzTarget> TARGETS = targets();

    private static Map<String, FuzzTarget> targets() {
        Map<String, FuzzTarget> t = new LinkedHashMap<>();
        t.put("frame", new FrameTarget());
        t.put("catalog", new CatalogFuzzTarget());
        t.put("peer", new PeerFuzzTarget());
        t.put("namespace", new NamespaceFuzzTarget());
        t.put("contract", new ContractFuzzTarget());
        return Collections.unmodifiableMap(t);
    }

    /** The committed corpora, relative to the repository root. */
    public static final Path CORPUS_ROOT = Path.of("orbitkv-reliability", "src", "test", "resources", "fuzz");

    private static final Pattern DONE = Pattern.compile("Done (\\d+) runs in (\\d+) second");

    @Option(names = "--target", defaultValue = "all", description = "frame, catalog, peer, namespace, contract or all (default ${DEFAULT-VALUE})")
    String target;

    @Option(names = "--executions", defaultValue = "10000000", description = "inputs per target (default ${DEFAULT-VALUE})")
    long executions;

    @Option(names = "--max-seconds", defaultValue = "0", description = "stop a target after this long even short of --executions; 0: no limit (default ${DEFAULT-VALUE})")
    long maxSeconds;

    @Option(names = "--timeout-seconds", defaultValue = "10", description = "longest one input may run before it is a hang (default ${DEFAULT-VALUE})")
    int timeoutSeconds;

    @Option(names = "--corpus", description = "committed corpora root (default " + "orbitkv-reliability/src/test/resources/fuzz)")
    Path corpusRoot = CORPUS_ROOT;

    @Option(names = "--work", description = "work corpora and findings (default orbitkv-reliability/target/fuzz)")
    Path work = Path.of("orbitkv-reliability", "target", "fuzz");

    @Option(names = "--merge", description = "afterwards add the work corpus's new coverage to the committed corpus")
    boolean merge;

    @Option(names = "--write-seeds", description = "write each target's encoder-built seeds into its committed corpus, then stop")
    boolean writeSeeds;

    @Option(names = "--replay", description = "only replay the committed corpus in this JVM, then stop")
    boolean replay;

    /** {@code bin/reliability fuzz [options]}: the exit status (0: no finding). */
    public static int run(String[] args) {
        return new CommandLine(new FuzzCampaign()).execute(args);
    }

    @Override
    public Integer call() throws Exception {
        List<String> names = target.equals("all") ? List.copyOf(TARGETS.keySet()) : List.of(target);
        for (String n : names) {
            if (!TARGETS.containsKey(n)) {
                throw new CommandLine.ParameterException(new CommandLine(this), "unknown target " + n + "; targets: " + TARGETS.keySet());
            }
        }
        if (executions < 1 || timeoutSeconds < 1) throw new CommandLine.ParameterException(new CommandLine(this), "--executions and --timeout-seconds must be >= 1");
        int failed = 0;
        System.out.println("| target | executions | seconds | executions/s | corpus (committed) | result |");
        System.out.println("|--------|-----------:|--------:|-------------:|-------------------:|--------|");
        for (String n : names) {
            FuzzTarget t = TARGETS.get(n);
            Path corpus = corpusRoot.resolve(n);
            if (writeSeeds) {
                Files.createDirectories(corpus);
                for (FuzzTarget.Seed s : t.seeds()) Files.write(corpus.resolve("seed-" + s.name()), s.bytes());
                System.out.printf("| %s | - | - | - | %d | seeds written |%n", n, count(corpus));
            } else if (replay) {
                long start = System.nanoTime();
                int inputs = replay(t, corpus);
                System.out.printf("| %s | %d | %.1f | - | %d | replayed |%n", n, inputs, (System.nanoTime() - start) / 1e9, inputs);
            } else {
                failed += fuzz(n, corpus) ? 0 : 1;
            }
        }
        return failed == 0 ? 0 : 1;
    }

    /** Runs every input of {@code corpus} (and the target's seeds) through {@code target}; the number run. */
    public static int replay(FuzzTarget target, Path corpus) throws IOException {
        int n = 0;
        for (FuzzTarget.Seed s : target.seeds()) {
            target.fuzzOne(s.bytes());
            n++;
        }
        if (!Files.isDirectory(corpus)) return n;
        try (var files = Files.list(corpus)) {
            for (Path p : files.sorted().toList()) {
                byte[] input = Files.readAllBytes(p);
                try {
                    target.fuzzOne(input);
                } catch (RuntimeException | AssertionError e) {
                    throw new AssertionError("corpus input " + p + " fails: " + e, e);
                }
                n++;
            }
        }
        return n;
    }

    private boolean fuzz(String name, Path corpus) throws IOException, InterruptedException {
        Path dir = work.resolve(name);
        Path workCorpus = dir.resolve("corpus");
        Path findings = dir.resolve("findings");
        Files.createDirectories(workCorpus);
        Files.createDirectories(findings);
        Files.createDirectories(corpus);
        List<String> cmd = jazzer(name);
        if (maxSeconds > 0) cmd.add("-max_total_time=" + maxSeconds);
        cmd.addAll(List.of("-runs=" + executions, "-timeout=" + timeoutSeconds, "-rss_limit_mb=2048",
                "-artifact_prefix=" + findings.toAbsolutePath() + "/", "--reproducer_path=" + findings.toAbsolutePath(),
                workCorpus.toString(), corpus.toString()));
        long start = System.nanoTime();
        Run run = runLogged(cmd, dir.resolve("jazzer.log"));
        double seconds = (System.nanoTime() - start) / 1e9;
        if (run.exit == 0 && merge) {
            List<String> m = jazzer(name);
            m.addAll(List.of("-merge=1", corpus.toString(), workCorpus.toString()));
            Run merged = runLogged(m, dir.resolve("merge.log"));
            if (merged.exit != 0) System.out.println("merge of " + name + " exited " + merged.exit + " (see " + dir.resolve("merge.log") + ")");
        }
        long done = run.executions >= 0 ? run.executions : 0;
        System.out.printf("| %s | %d | %.0f | %.0f | %d | %s |%n", name, done, seconds, done / seconds, count(corpus),
                run.exit == 0 ? "no finding" : "FINDING (exit " + run.exit + "): see " + findings + " and " + dir.resolve("jazzer.log"));
        return run.exit == 0;
    }

    /** The Jazzer command line for target {@code name}: a child JVM on this class path. */
    private static List<String> jazzer(String name) {
        return new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                // Jazzer attaches its coverage agent to its own JVM and uses sun.misc.Unsafe
                "-XX:+EnableDynamicAgentLoading", "--sun-misc-unsafe-memory-access=allow", "--enable-native-access=ALL-UNNAMED",
                "-Xmx1g", "-D" + JazzerEntry.PROPERTY + "=" + name, "-cp", System.getProperty("java.class.path"),
                "com.code_intelligence.jazzer.Jazzer", "--target_class=" + JazzerEntry.class.getName(),
                "--instrumentation_includes=io.orbitkv.**"));
    }

    private record Run(int exit, long executions) {}

    /** Runs {@code cmd} with its output to {@code log}; its exit status and libFuzzer's "Done N runs". */
    private static Run runLogged(List<String> cmd, Path log) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        long executions = -1;
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
             var out = Files.newBufferedWriter(log)) {
            for (String line; (line = r.readLine()) != null; ) {
                out.write(line);
                out.newLine();
                Matcher m = DONE.matcher(line);
                if (m.find()) executions = Long.parseLong(m.group(1));
            }
        }
        return new Run(p.waitFor(), executions);
    }

    private static long count(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) return 0;
        try (var files = Files.list(dir)) {
            return files.count();
        }
    }
}
