package io.orbitkv.bench.serve;

import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.PublishStats;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.llamacpp.LlamaCppEngine;
import io.orbitkv.llamacpp.LlamaCppNamespace;
import io.orbitkv.llamacpp.LlamaCppSessionRunner;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;

/**
 * One engine of the serving benchmark's pool, in its own JVM: a llama.cpp context on the
 * generated model, serving one request at a time for the arm it was last told, over a line
 * protocol on stdin/stdout (one command, one answer line).
 *
 * <pre>
 *   READY                                       (printed once the model is loaded)
 *   ARM COLD | ARM LOCAL bytes | ARM ORBITKV socket instance epoch [SYNC|BACKGROUND]  -> OK
 *                                               (the publish mode; SYNC when left out)
 *   REQ id arrivalNanos newTokens NONE|RESTORE|PREFILL t0,t1,...      -> DONE id outcome ttftNanos doneNanos
 *                                                       restored source logitsHash tokens startNanos firstTokenNanos
 *   STATS                                       -> STATS pinned entries usedBytes hits evictions
 *   FLUSH                                       -> FLUSHED published dropped queuedHighWaterBytes
 *                                                  (waits until the pages queued so far are published; 30 s)
 *   QUIT                                        (exits 0)
 *   any failure                                 -> ERR message (then exits 1)
 * </pre>
 *
 * <p>Owns the engine and the current arm's store. Thread model: the main thread does everything
 * (the llama.cpp engine is confined to it). {@code arrivalNanos} and {@code doneNanos} are
 * {@link System#nanoTime()} values: on Linux that is CLOCK_MONOTONIC, one clock for every process
 * on the host, so the driver's arrival time is the start of this process's TTFT.
 *
 * <p>Design note: one engine per process because {@link LlamaCppEngine} serializes every library
 * call of a JVM under one lock (engines of one JVM do not decode in parallel); a pool of N
 * processes decodes N requests at once, as N llama.cpp servers would.
 */
public final class ServeEngineProcess {

    private static final Duration FLUSH_TIMEOUT = Duration.ofSeconds(30);

    private ServeEngineProcess() {
    }

    /** args: model dir, spec (ci|bench), weights digest, tokenizer digest, page tokens, context tokens, threads. */
    public static void main(String[] args) throws IOException {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        if (args.length != 7) {
            out.println("ERR usage: modelDir ci|bench weightsDigest tokenizerDigest pageTokens contextTokens threads");
            System.exit(2);
        }
        TinyLlamaSpec spec = args[1].equals("ci") ? TinyLlamaSpec.ci() : TinyLlamaSpec.bench();
        TinyLlamaModel files = new TinyLlamaModel(Path.of(args[0]), spec, args[2], args[3]);
        int pageTokens = Integer.parseInt(args[4]);
        try (LlamaCppEngine engine = LlamaCppEngine.load(files.ggufFile(),
                new LlamaCppEngine.Settings(Integer.parseInt(args[5]), Integer.parseInt(args[6])))) {
            Namespace ns = LlamaCppNamespace.of(files, LlamaCppSessionRunner.layout(engine, pageTokens));
            new Loop(engine, ns, out).run(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)));
        } catch (RuntimeException e) {
            out.println("ERR " + oneLine(e));
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    private static final class Loop {
        private final LlamaCppEngine engine;
        private final Namespace ns;
        private final PrintStream out;
        private KvPageStore store = KvPageStore.cold();
        private EngineLocalPageStore local;
        private LlamaCppSessionRunner runner;

        Loop(LlamaCppEngine engine, Namespace ns, PrintStream out) {
            this.engine = engine;
            this.ns = ns;
            this.out = out;
            this.runner = new LlamaCppSessionRunner(engine, ns, store);
        }

        void run(BufferedReader in) throws IOException {
            out.println("READY");
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.split(" ");
                switch (w[0]) {
                    case "ARM" -> {
                        arm(w);
                        out.println("OK");
                    }
                    case "REQ" -> out.println(request(w));
                    case "FLUSH" -> out.println(flush());
                    case "STATS" -> out.println(local == null ? "STATS 0 0 0 0 0" : "STATS " + local.pinned() + " "
                            + local.entries() + " " + local.usedBytes() + " " + local.hits() + " " + local.evictions());
                    case "QUIT" -> {
                        store.close();
                        return;
                    }
                    default -> throw new IllegalArgumentException("unknown command " + w[0]);
                }
            }
            store.close();
        }

        private void arm(String[] w) throws IOException {
            store.close();
            local = null;
            store = switch (w[1]) {
                case "COLD" -> KvPageStore.cold();
                case "LOCAL" -> local = new EngineLocalPageStore(Long.parseLong(w[2]));
                case "ORBITKV" -> OrbitKvPageStore.connect(Path.of(w[2]), w[3], Long.parseLong(w[4]), ns,
                        w.length > 5 && w[5].equals("BACKGROUND") ? OrbitKvPageStore.PublishMode.background()
                                : OrbitKvPageStore.PublishMode.SYNCHRONOUS);
                default -> throw new IllegalArgumentException("unknown arm " + w[1]);
            };
            runner = new LlamaCppSessionRunner(engine, ns, store);
        }

        /** Waits for the store's queued publishes; the counts since the arm, sealed or present, and dropped. */
        private String flush() {
            try {
                if (!store.awaitPublished(FLUSH_TIMEOUT)) throw new IllegalStateException("queued publishes not settled in " + FLUSH_TIMEOUT);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted waiting for queued publishes", e);
            }
            if (!(store instanceof OrbitKvPageStore orbit)) return "FLUSHED 0 0 0";
            PublishStats s = orbit.publishStats();
            return "FLUSHED " + (s.sealed() + s.alreadyPresent()) + " " + s.dropped() + " " + s.queuedBytesHighWater();
        }

        private String request(String[] w) {
            long start = System.nanoTime();
            String id = w[1];
            long arrival = Long.parseLong(w[2]);
            int newTokens = Integer.parseInt(w[3]);
            ServeRequest.CancelAt cancelAt = ServeRequest.CancelAt.valueOf(w[4]);
            String[] t = w[5].split(",");
            int[] prompt = new int[t.length];
            for (int i = 0; i < t.length; i++) prompt[i] = Integer.parseInt(t[i]);
            // a client that leaves at the restore of a request that leased nothing leaves at its prefill: every arm
            // cancels the same requests
            LlamaCppSessionRunner.Cancellation cancel = phase -> switch (cancelAt) {
                case NONE -> false;
                case RESTORE -> true;
                case PREFILL -> phase == LlamaCppSessionRunner.Phase.PREFILL;
            };
            return switch (runner.run(prompt, newTokens, arrival, cancel)) {
                case LlamaCppSessionRunner.Outcome.Served s -> done(id, "SERVED", s.report()) + " " + start + " "
                        + (arrival + s.report().ttftNanos());
                case LlamaCppSessionRunner.Outcome.Cancelled c -> "DONE " + id + " CANCELLED_" + c.phase() + " 0 "
                        + System.nanoTime() + " " + c.leasedPages() + " NONE 0 - " + start + " 0";
            };
        }

        private static String done(String id, String outcome, RequestReport r) {
            StringBuilder tokens = new StringBuilder();
            for (int g : r.generated()) tokens.append(tokens.isEmpty() ? "" : ",").append(g);
            return "DONE " + id + " " + outcome + " " + r.ttftNanos() + " " + System.nanoTime() + " " + r.restoredTokens()
                    + " " + r.source() + " " + logitsHash(r.logits()) + " " + tokens;
        }
    }

    /** FNV-1a over the raw bits of every logit: equal hashes mean bit-identical logits (up to a 2^-64 collision). */
    static long logitsHash(float[][] logits) {
        long h = 0xCBF29CE484222325L;
        for (float[] row : logits) {
            for (float f : row) {
                int bits = Float.floatToRawIntBits(f);
                for (int b = 0; b < 4; b++) {
                    h ^= (bits >>> (8 * b)) & 0xFF;
                    h *= 0x100000001B3L;
                }
            }
        }
        return h;
    }

    private static String oneLine(Throwable e) {
        return String.valueOf(e).replace('\n', ' ');
    }
}
