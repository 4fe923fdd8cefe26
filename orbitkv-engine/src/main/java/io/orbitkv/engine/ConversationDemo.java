package io.orbitkv.engine;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.unix.FileTrees;

import io.orbitkv.testkit.ManagerProcess;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.function.Function;

/**
 * The engine-neutral driver of {@code bin/orbitkv demo}: a short multi-turn conversation run
 * cold and warm against a Manager child process, one table row per turn, then a Manager restart
 * and the last turn served again from its SSD store. The engine adapters (Jlama, llama.cpp)
 * supply only what differs: the model, the session runners and how text becomes tokens.
 *
 * <p>Owns nothing past one {@link #run} call: it starts and stops the two Managers and the
 * page-store connections it opens; the caller owns the models, the runners' native resources
 * and the work directory. Single-threaded. Each turn's prompt is the whole history (previous
 * prompts and answers) plus the new user text, so every turn after the first restores what
 * earlier turns published. "same" says whether warm and cold produced the same greedy tokens and
 * logit bits.
 *
 * <p>Design note: one driver so the two engines print the same conversation and table and can be
 * compared side by side; 4 turns of 16 generated tokens with 16-token pages keep a CI run to a
 * few seconds while every later turn crosses several page boundaries. Each turn runs cold first,
 * which also warms the JIT for the warm run that follows.
 */
public final class ConversationDemo {

    /** Tokens per KV page, for both engines' namespaces. */
    public static final int PAGE_TOKENS = 16;
    /** Greedy tokens generated per turn. */
    public static final int ANSWER_TOKENS = 16;
    private static final String SYSTEM = "You are OrbitKV's demo assistant. Be brief.\n";
    private static final List<String> USER_TURNS = List.of(
            "User: what is a KV cache?\n", "User: and a prefix hit?\n", "User: why pages?\n", "User: thanks!\n");

    private ConversationDemo() {
    }

    /** One engine session runner (cold or warm): prefill {@code prompt}, generate {@code newTokens}, report. */
    @FunctionalInterface
    public interface Runner {
        RequestReport run(int[] prompt, int newTokens, long arrivalNanos);
    }

    /** A demo body: runs under {@code work}, with the bench-sized model when {@code benchModel}. */
    @FunctionalInterface
    public interface Body {
        void run(Path work, boolean benchModel) throws Exception;
    }

    /**
     * How the engine tokenizes: {@code first} encodes the opening text (with its start token),
     * {@code continuation} encodes later text appended to a history.
     */
    public record Vocab(Function<String, int[]> first, Function<String, int[]> continuation) {
    }

    /**
     * What one engine brings to the conversation: its namespace and page size, the client name it
     * connects as, the cold runner, a factory making a warm runner over a Manager-backed store,
     * whether the table shows the restored bytes column, and the recovery contract it registers
     * ({@code pageBytes} is the largest image: a page, or a recurrent checkpoint).
     */
    public record Engine(Namespace namespace, long pageBytes, String clientName, Runner cold,
                         Function<KvPageStore, Runner> warm, Vocab vocab, boolean showBytes, RecoveryContract contract) {

        /** A full-attention engine ({@link FullAttention#contract}). */
        public Engine(Namespace namespace, long pageBytes, String clientName, Runner cold,
                      Function<KvPageStore, Runner> warm, Vocab vocab, boolean showBytes) {
            this(namespace, pageBytes, clientName, cold, warm, vocab, showBytes, FullAttention.contract(namespace.pageTokens()));
        }
    }

    /**
     * The shared {@code main}: flags {@code --bench-model} and {@code --keep}, a temporary work
     * directory deleted at the end unless kept, then {@code System.exit(0)} (engine threads may
     * linger).
     */
    public static void main(String[] args, Body body) throws Exception {
        boolean bench = Arrays.asList(args).contains("--bench-model");
        boolean keep = Arrays.asList(args).contains("--keep");
        Path work = Files.createTempDirectory("orbitkv-demo-");
        try {
            body.run(work, bench);
        } finally {
            if (keep) System.out.println("kept " + work);
            else FileTrees.delete(work);
        }
        System.exit(0);
    }

    /**
     * Runs the conversation with a Manager under {@code managerDir}, printing to {@code out};
     * returns how many rows were not bit-identical to cold.
     */
    @SuppressWarnings("try") // the store closes before the Manager stops; the try's close is then a no-op
    public static int run(Engine engine, Path managerDir, PrintStream out) throws Exception {
        out.println("orbitkv demo: starting a Manager in " + managerDir);
        int differing = 0;
        int[] history = new int[0];
        int[] lastPrompt = new int[0];
        try (ManagerProcess manager = ManagerLauncher.start(managerDir, engine.pageBytes());
             OrbitKvPageStore store = OrbitKvPageStore.connect(manager.socket(), engine.clientName(), 1, engine.namespace(), engine.contract())) {
            Runner warm = engine.warm().apply(store);
            header(out, engine.showBytes());
            for (int turn = 0; turn < USER_TURNS.size(); turn++) {
                int[] user = turn == 0 ? engine.vocab().first().apply(SYSTEM + USER_TURNS.get(0))
                        : engine.vocab().continuation().apply(USER_TURNS.get(turn));
                int[] prompt = concat(history, user);
                RequestReport c = engine.cold().run(prompt, ANSWER_TOKENS, System.nanoTime());
                RequestReport w = warm.run(prompt, ANSWER_TOKENS, System.nanoTime());
                differing += row(out, engine.showBytes(), "turn " + (turn + 1), c, w);
                history = concat(prompt, w.generated());
                lastPrompt = prompt;
            }
            store.close();
            out.println("orbitkv demo: stopping the Manager (exit " + manager.terminate() + ") and starting it again on the same SSD store");
        }
        try (ManagerProcess manager = ManagerLauncher.start(managerDir, engine.pageBytes());
             OrbitKvPageStore store = OrbitKvPageStore.connect(manager.socket(), engine.clientName(), 2, engine.namespace(), engine.contract())) {
            Runner warm = engine.warm().apply(store);
            RequestReport c = engine.cold().run(lastPrompt, ANSWER_TOKENS, System.nanoTime());
            RequestReport w = warm.run(lastPrompt, ANSWER_TOKENS, System.nanoTime());
            header(out, engine.showBytes());
            differing += row(out, engine.showBytes(), "turn " + USER_TURNS.size() + " again", c, w);
        }
        out.println("source: DRAM = pages resident in Manager memory; STAGED = read back from the SSD store first; "
                + "same = identical greedy tokens and logit bits to the cold engine");
        return differing;
    }

    /** True when both generated the same tokens and every logit has the same bits. */
    public static boolean sameOutput(RequestReport a, RequestReport b) {
        if (!Arrays.equals(a.generated(), b.generated())) return false;
        if (a.logits().length != b.logits().length) return false;
        for (int i = 0; i < a.logits().length; i++) {
            if (a.logits()[i].length != b.logits()[i].length) return false;
            for (int v = 0; v < a.logits()[i].length; v++) {
                if (Float.floatToRawIntBits(a.logits()[i][v]) != Float.floatToRawIntBits(b.logits()[i][v])) return false;
            }
        }
        return true;
    }

    private static void header(PrintStream out, boolean showBytes) {
        if (showBytes) {
            out.printf("%-13s %7s %13s %13s %9s %10s %10s %8s %5s%n", "", "prompt", "cold TTFT ms", "warm TTFT ms",
                    "restored", "prefilled", "bytes", "source", "same");
        } else {
            out.printf("%-13s %7s %13s %13s %9s %10s %8s %5s%n", "", "prompt", "cold TTFT ms", "warm TTFT ms",
                    "restored", "prefilled", "source", "same");
        }
    }

    /** Prints one turn; returns 1 when warm and cold differ. */
    private static int row(PrintStream out, boolean showBytes, String label, RequestReport cold, RequestReport warm) {
        boolean same = sameOutput(cold, warm);
        String bytes = showBytes ? String.format(" %10d", warm.restoredBytes()) : "";
        out.printf("%-13s %7d %13.2f %13.2f %9d %10d%s %8s %5s%n", label, warm.promptTokens(), cold.ttftNanos() / 1e6,
                warm.ttftNanos() / 1e6, warm.restoredTokens(), warm.prefilledTokens(), bytes, warm.source(),
                same ? "yes" : "NO");
        return same ? 0 : 1;
    }

    private static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
