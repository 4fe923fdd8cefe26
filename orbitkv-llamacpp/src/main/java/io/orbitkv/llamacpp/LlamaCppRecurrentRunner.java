package io.orbitkv.llamacpp;

import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.engine.StateLookup;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Serves one greedy request at a time on a {@link LlamaCppEngine} running a recurrent (Mamba)
 * model, reusing recurrent checkpoints through a {@link KvPageStore}: QUERY the recurrent
 * contract, restore the checkpoint at the selected legal boundary {@code t} with
 * {@code llama_state_seq_set_data}, prefill the rest of the prompt in chunks that end on
 * checkpoint boundaries, export the state after every such chunk, decode greedily, then publish
 * the new checkpoints.
 *
 * <pre>
 *   checkpoint interval k pages (P tokens each): boundaries b = j * k * P
 *   prompt  |<- restored: checkpoint at t ->|<- chunk ->|<- chunk ->|<- tail ->|  decode steps ...
 *                                           t          b1          b2         n
 *   published: the state after each chunk that ends at a boundary b > t (b1, b2); never after the tail
 *   or a decode step
 * </pre>
 *
 * <p>Borrows the engine and the store. Thread model: confined; {@link #run} is called by one
 * thread at a time. Invariants: each request starts from an empty sequence
 * ({@code llama_kv_self_clear}); a checkpoint is published only for a boundary its prefill chunk
 * ended at, under the token-chain key of exactly the tokens {@code [0, b)} it folded in; a leased
 * checkpoint is restored only if {@link LlamaCppRecurrentLayout#check} finds it to be the state
 * at {@code t}, else the request runs cold (counted as a miss, never a wrong output). Checkpoints
 * of one request are held in a confined arena until published: at most
 * {@code n / (k * P)} of {@link LlamaCppRecurrentLayout#checkpointBytes()} each.
 *
 * <p>Design note: the contract is one {@code recurrent} group ({@value #GROUP}): a recurrent
 * state is recoverable only at a token where a checkpoint was taken, and a pure Mamba model has
 * no attention page. The chunking is the gate's premise: the cold control is this runner with a
 * store that misses, so it prefills with exactly the same chunk boundaries. Measured on the CI
 * model: chunks of at least 2 tokens give the one-shot prefill's logits bit for bit (36 prompt x
 * interval cases, {@code LlamaCppMambaTest}); a last chunk of 1 token (a prompt of {@code b + 1})
 * takes llama.cpp's matrix-vector path and differs in the last bits, so one-shot is not the control. The store's {@link KvPageStore#lookupBoundary} hands
 * out every group of the contract at one boundary or nothing, which is the rule a hybrid model's
 * attention pages and checkpoint would need; this build runs no hybrid.
 */
public final class LlamaCppRecurrentRunner {

    /** The one state group of a recurrent model's contract. */
    public static final int GROUP = 0;

    private static final byte[] NO_SALT = new byte[0];

    private final LlamaCppEngine engine;
    private final KvPageStore store;
    private final LlamaCppRecurrentLayout layout;
    private final byte[] namespaceDigest;
    private final int pageTokens;
    private final int intervalTokens;

    /**
     * @param engine                  the engine (its sequence is cleared at the start of every request)
     * @param namespace               the namespace the store registered; its kv_layout must be the engine's
     *                                {@link #layout(LlamaCppEngine)}
     * @param store                   where checkpoints come from and go to ({@link KvPageStore#cold()} for the control)
     * @param checkpointIntervalPages a checkpoint every this many pages (>= 1)
     */
    public LlamaCppRecurrentRunner(LlamaCppEngine engine, Namespace namespace, KvPageStore store, int checkpointIntervalPages) {
        if (checkpointIntervalPages < 1) throw new IllegalArgumentException("checkpoint interval must be >= 1 page: " + checkpointIntervalPages);
        this.engine = engine;
        this.store = store;
        this.pageTokens = namespace.pageTokens();
        this.intervalTokens = Math.multiplyExact(checkpointIntervalPages, pageTokens);
        this.layout = layout(engine);
        if (!namespace.kvLayout().equals(layout.kvLayoutName())) {
            throw new IllegalArgumentException("namespace layout " + namespace.kvLayout() + " is not the engine's " + layout.kvLayoutName());
        }
        this.namespaceDigest = namespace.digest();
    }

    /** The recurrent contract: one {@code recurrent} group of {@code pageTokens}-token pages. */
    public static RecoveryContract contract(int pageTokens) {
        return new RecoveryContract(pageTokens, List.of(new StateGroup.Recurrent(GROUP)));
    }

    /** The checkpoint layout of {@code engine}'s model: read from an empty sequence's state. */
    public static LlamaCppRecurrentLayout layout(LlamaCppEngine engine) {
        engine.clear();
        try (Arena a = Arena.ofConfined()) {
            return LlamaCppRecurrentLayout.ofEmpty(engine.exportSequence(a));
        }
    }

    public LlamaCppRecurrentLayout layout() {
        return layout;
    }

    /**
     * Serves one request: {@code prompt} token ids (at least 1), {@code newTokens} greedy tokens
     * (at least 1), {@code arrivalNanos} the {@link System#nanoTime()} when the request arrived.
     * The report's {@code restoredBytes} is the checkpoint's size on a hit.
     */
    public RequestReport run(int[] prompt, int newTokens, long arrivalNanos) {
        if (prompt.length < 1 || newTokens < 1) throw new IllegalArgumentException("need a prompt token and a new token");
        if (prompt.length + newTokens > engine.contextTokens()) {
            throw new IllegalArgumentException("prompt " + prompt.length + " + " + newTokens + " exceeds context " + engine.contextTokens());
        }
        engine.clear();
        int n = prompt.length;
        List<StateKey> keys = StateKeys.forTokens(namespaceDigest, GROUP, Arrays.copyOf(prompt, n / pageTokens * pageTokens),
                pageTokens, NO_SALT);
        int capPages = (n - 1) / pageTokens;
        StateLookup lookup = capPages == 0
                ? new StateLookup.Miss("prompt of one page or less: no boundary below the last token")
                : store.lookupBoundary(Map.of(GROUP, keys.subList(0, capPages)), n);
        int restored = switch (lookup) {
            case StateLookup.Miss miss -> 0;
            case StateLookup.Hit hit -> restore(hit);
        };
        HitSource source = restored == 0 ? HitSource.NONE : ((StateLookup.Hit) lookup).source();

        try (Arena checkpoints = Arena.ofConfined()) {
            List<Integer> boundaries = new ArrayList<>();
            List<MemorySegment> states = new ArrayList<>();
            long prefillStart = System.nanoTime();
            float[] row = null;
            for (int at = restored; at < n; ) {
                int end = Math.min(n, (at / intervalTokens + 1) * intervalTokens);
                row = engine.decode(prompt, at, end);
                at = end;
                if (end % intervalTokens == 0) {
                    MemorySegment state = engine.exportSequence(checkpoints);
                    Optional<String> bad = layout.check(state, end);
                    if (bad.isPresent()) throw new IllegalStateException("exported checkpoint at " + end + ": " + bad.get());
                    boundaries.add(end);
                    states.add(state);
                }
            }
            long now = System.nanoTime();
            store.prefillObserved(n - restored, now - prefillStart);
            long ttft = now - arrivalNanos;

            int[] generated = new int[newTokens];
            float[][] logits = new float[newTokens][];
            LlamaCppSessionRunner.decodeGreedy(engine, row, generated, logits);

            List<StateKey> published = new ArrayList<>(boundaries.size());
            for (int b : boundaries) published.add(keys.get(b / pageTokens - 1));
            KvPageStore.PublishReport report = store.publish(GROUP, published, layout.checkpointBytes(),
                    (index, slot) -> MemorySegment.copy(states.get(index), 0, slot, 0, layout.checkpointBytes()));
            return new RequestReport(generated, logits, n, restored, n - restored,
                    restored == 0 ? 0 : layout.checkpointBytes(), source, ttft, report);
        }
    }

    /** Restores the hit's checkpoint; 0 when it is not the state at the boundary or llama.cpp refuses it. */
    private int restore(StateLookup.Hit hit) {
        try (hit; Arena a = Arena.ofConfined()) {
            MemorySegment image = hit.group(GROUP).getFirst();
            if (layout.check(image, hit.boundaryTokens()).isPresent()) return 0;
            MemorySegment copy = a.allocate(image.byteSize(), 8).copyFrom(image);
            if (engine.importSequence(copy)) return Math.toIntExact(hit.boundaryTokens());
            engine.clear();
            return 0;
        }
    }
}
