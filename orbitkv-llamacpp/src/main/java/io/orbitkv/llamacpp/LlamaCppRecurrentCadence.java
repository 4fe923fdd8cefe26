package io.orbitkv.llamacpp;

import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.ManagerLauncher;
import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKeys;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testmodel.ByteFallbackVocab;
import io.orbitkv.testmodel.TinyMambaModel;
import io.orbitkv.testmodel.TinyMambaSpec;

import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.Set;

/**
 * The checkpoint-cadence table: what a recurrent checkpoint every 1, 4 or 16 pages buys (prompt
 * tokens restored instead of prefilled) and costs (checkpoint bytes stored), and the retention
 * amplification (bytes stored ÷ bytes of the checkpoints that served boundaries needed), on a
 * fixed seeded workload against a real Manager process per interval.
 *
 * <pre>
 *   java --enable-native-access=ALL-UNNAMED -cp orbitkv-llamacpp/target/orbitkv-llamacpp-demo.jar \
 *        io.orbitkv.llamacpp.LlamaCppRecurrentCadence [ci|bench] [WORK_DIR]
 * </pre>
 *
 * <p>Workload: a 512-token document (BOS + seeded tokens); request 0 is the document plus a
 * 32-token question; requests 1..10 share the document's first {@code d} tokens ({@code d} seeded,
 * uniform in [64, 512]) and then diverge with their own 32 tokens; request 11 repeats request 0.
 * Each warm request is checked bit for bit against a cold control of the same chunking. Owns its
 * engines and Managers for one {@link #run}; single-threaded.
 */
public final class LlamaCppRecurrentCadence {

    static final int PAGE_TOKENS = 16;
    static final int NEW_TOKENS = 4;
    static final int DOCUMENT_TOKENS = 512;
    static final int QUESTION_TOKENS = 32;
    static final int DIVERGING_REQUESTS = 10;

    private LlamaCppRecurrentCadence() {
    }

    /**
     * One interval's totals.
     *
     * @param intervalPages   checkpoint every this many pages
     * @param promptTokens    prompt tokens over all requests
     * @param hitTokens       prompt tokens restored from checkpoints
     * @param checkpoints     checkpoints stored (sealed)
     * @param storedBytes     checkpoint bytes stored
     * @param neededBytes     bytes of the distinct checkpoints that served a boundary
     * @param prefillMillis   sum of the warm requests' time to first token
     * @param allIdentical    every warm request bit-identical to its cold control
     */
    record Row(int intervalPages, long promptTokens, long hitTokens, long checkpoints, long storedBytes, long neededBytes,
               double prefillMillis, boolean allIdentical) {
        double amplification() {
            return neededBytes == 0 ? Double.POSITIVE_INFINITY : (double) storedBytes / neededBytes;
        }
    }

    public static void main(String[] args) throws Exception {
        TinyMambaSpec spec = args.length > 0 && args[0].equals("bench") ? TinyMambaSpec.bench() : TinyMambaSpec.ci();
        Path work = args.length > 1 ? Path.of(args[1]) : Files.createTempDirectory("orbitkv-cadence-");
        List<Row> rows = run(spec, work, new int[] {1, 4, 16}, System.out);
        print(rows, System.out);
        System.exit(rows.stream().allMatch(Row::allIdentical) ? 0 : 1);
    }

    static List<int[]> workload(int vocab) {
        Random random = new Random(20_261_201L);
        int[] document = tokens(random, DOCUMENT_TOKENS, vocab);
        document[0] = ByteFallbackVocab.BOS;
        List<int[]> prompts = new ArrayList<>();
        prompts.add(concat(document, tokens(random, QUESTION_TOKENS, vocab)));
        for (int r = 0; r < DIVERGING_REQUESTS; r++) {
            int shared = 64 + random.nextInt(DOCUMENT_TOKENS - 64 + 1);
            prompts.add(concat(Arrays.copyOf(document, shared), tokens(random, QUESTION_TOKENS, vocab)));
        }
        prompts.add(prompts.getFirst());
        return prompts;
    }

    static List<Row> run(TinyMambaSpec spec, Path work, int[] intervals, PrintStream log) throws Exception {
        TinyMambaModel files = TinyMambaModel.generate(spec, work.resolve("model"));
        LlamaCppEngine.Settings settings = LlamaCppEngine.Settings.deterministic(1024);
        List<Row> rows = new ArrayList<>();
        try (LlamaCppEngine warmEngine = LlamaCppEngine.load(files.ggufFile(), settings);
             LlamaCppEngine coldEngine = LlamaCppEngine.load(files.ggufFile(), settings)) {
            LlamaCppRecurrentLayout layout = LlamaCppRecurrentRunner.layout(warmEngine);
            Namespace ns = LlamaCppNamespace.ofRecurrent(files, layout, PAGE_TOKENS);
            List<int[]> prompts = workload(spec.vocab());
            log.printf("cadence: %s, checkpoint %d bytes, %d requests%n", spec.name(), layout.checkpointBytes(), prompts.size());
            for (int interval : intervals) {
                try (ManagerProcess m = ManagerLauncher.start(work.resolve("manager-" + interval), layout.checkpointBytes());
                     OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "cadence-" + interval, 1, ns,
                             LlamaCppRecurrentRunner.contract(PAGE_TOKENS))) {
                    LlamaCppRecurrentRunner warm = new LlamaCppRecurrentRunner(warmEngine, ns, store, interval);
                    LlamaCppRecurrentRunner cold = new LlamaCppRecurrentRunner(coldEngine, ns, KvPageStore.cold(), interval);
                    long promptTokens = 0;
                    long hit = 0;
                    long sealed = 0;
                    double millis = 0;
                    boolean identical = true;
                    Set<String> served = new HashSet<>();
                    for (int[] p : prompts) {
                        RequestReport c = cold.run(p, NEW_TOKENS, System.nanoTime());
                        RequestReport w = warm.run(p, NEW_TOKENS, System.nanoTime());
                        identical &= io.orbitkv.engine.ConversationDemo.sameOutput(c, w);
                        promptTokens += p.length;
                        hit += w.restoredTokens();
                        sealed += w.published().sealed();
                        millis += w.ttftNanos() / 1e6;
                        if (w.restoredTokens() > 0) {
                            served.add(HexFormat.of().formatHex(StateKeys.forTokens(ns.digest(), LlamaCppRecurrentRunner.GROUP,
                                    Arrays.copyOf(p, w.restoredTokens()), PAGE_TOKENS, new byte[0]).getLast().toBytes()));
                        }
                    }
                    rows.add(new Row(interval, promptTokens, hit, sealed, sealed * layout.checkpointBytes(),
                            served.size() * layout.checkpointBytes(), millis, identical));
                }
            }
        }
        return rows;
    }

    static void print(List<Row> rows, PrintStream out) {
        out.printf("%-9s %8s %10s %6s %12s %12s %13s %12s %9s%n", "interval", "prompt", "hit tokens", "hit %",
                "checkpoints", "bytes stored", "bytes needed", "amplification", "same");
        for (Row r : rows) {
            out.printf("%-9s %8d %10d %5.1f%% %12d %12d %13d %12.2fx %9s%n", r.intervalPages() + " pages", r.promptTokens(),
                    r.hitTokens(), 100.0 * r.hitTokens() / r.promptTokens(), r.checkpoints(), r.storedBytes(), r.neededBytes(),
                    r.amplification(), r.allIdentical() ? "yes" : "NO");
        }
    }

    private static int[] tokens(Random random, int n, int vocab) {
        int[] out = new int[n];
        for (int i = 0; i < n; i++) out[i] = ByteFallbackVocab.FIRST_BYTE + random.nextInt(vocab - ByteFallbackVocab.FIRST_BYTE);
        return out;
    }

    private static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
