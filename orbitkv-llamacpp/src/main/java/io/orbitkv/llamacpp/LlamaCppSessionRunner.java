package io.orbitkv.llamacpp;

import io.orbitkv.engine.FullAttention;
import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.PrefixLookup;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.engine.TtftBreakdown;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;

/**
 * Serves one greedy request at a time on a {@link LlamaCppEngine}, reusing KV pages through a
 * {@link KvPageStore}: lease the longest restorable prefix, assemble its page images into one
 * sequence-state blob and restore it with {@code llama_state_seq_set_data}, decode the rest of
 * the prompt as one batch of at least {@value #MIN_PREFILL_TOKENS} tokens, decode greedily, then
 * export the sequence state once and publish every prompt page that was not restored.
 *
 * <pre>
 *   prompt  |<--- restored pages (set_data) --->|<-- one decode batch (>= 2 tokens) -->|
 *   published: pages [restored, prompt / P): positions computed by a batch, never by a decode step
 * </pre>
 *
 * <p>Borrows the engine and the store. Thread model: confined; {@link #run} is called by one
 * thread at a time (the engine's context is confined). Invariants: each request starts from an
 * empty KV cache ({@code llama_kv_self_clear}), so cells hold positions {@code 0..n-1} in order
 * and can be carved; every K/V position this runner publishes or relies on was computed by a
 * batch of at least two tokens; a restore that llama.cpp refuses leaves the cache empty and the
 * request runs cold (counted as a miss, never a wrong output).
 *
 * <p>Design note: in the b4916 CPU build a batch of one token takes another matrix-multiply path
 * (a matrix-vector product) than a batch of two or more, and its results differ in the last bits:
 * measured on the CI model, the logits of a prompt split as [n-1 | 1] differed from one batch of
 * n in 3 of 3 prompts, while every split into batches of >= 2 tokens was bit-identical, and the
 * F16 K/V of positions computed by greedy decode steps differed from the same positions prefilled
 * in 5 of 7 prompts. Hence (1) at least {@value #MIN_PREFILL_TOKENS} prompt tokens are always
 * computed, and (2) decode-step positions are not published: the next turn of a conversation
 * recomputes the previous answer in its prefill batch and publishes it then. Unlike Jlama, whose
 * forward and batch paths write identical K/V, this costs one answer's prefill per turn, and keeps
 * every warm run bit-identical to a cold run that prefills the whole prompt at once. One blob for
 * the whole prefix because {@code set_data} first removes the sequence.
 *
 * <p>Design note (the restore's copies): {@code set_data} reads one contiguous blob and copies it
 * into the cache's tensors; the b4916 C API has no other way in, so a restore is two copies:
 * leased pages into the blob, the blob into the cache. The blob lives in one buffer kept by the
 * runner (an automatic arena, grown by doubling) instead of a fresh allocation
 * per request, which zero-filled it and faulted its pages in before the copy; the lease is
 * released as soon as the blob holds the pages, before {@code set_data} runs. Keys are the project's
 * {@link io.orbitkv.state.TokenChain} with no salt, in the llama.cpp namespace.
 */
public final class LlamaCppSessionRunner {

    /** Prompt tokens a request always computes in its prefill batch (see the design note). */
    public static final int MIN_PREFILL_TOKENS = 2;

    private static final byte[] NO_SALT = new byte[0];

    private final LlamaCppEngine engine;
    private final KvPageStore store;
    private final LlamaCppKvPageLayout layout;
    private final byte[] namespaceDigest;
    private final int pageTokens;
    /** Where restores assemble their blob, kept across requests and grown to the largest (see the design note). */
    private MemorySegment blobBuffer = MemorySegment.NULL;

    /**
     * @param engine    the engine (its KV cache is cleared at the start of every request)
     * @param namespace the namespace the store was registered with; its kv_layout must be the
     *                  engine's {@link #layout(LlamaCppEngine, int)}
     * @param store     where pages come from and go to ({@link KvPageStore#cold()} for the control)
     */
    public LlamaCppSessionRunner(LlamaCppEngine engine, Namespace namespace, KvPageStore store) {
        this.engine = engine;
        this.store = store;
        this.pageTokens = namespace.pageTokens();
        this.layout = layout(engine, pageTokens);
        if (!namespace.kvLayout().equals(layout.kvLayoutName())) {
            throw new IllegalArgumentException("namespace layout " + namespace.kvLayout() + " is not the engine's "
                    + layout.kvLayoutName());
        }
        this.namespaceDigest = namespace.digest();
    }

    /** The page layout of {@code engine}'s KV cache: read from an empty sequence's state header. */
    public static LlamaCppKvPageLayout layout(LlamaCppEngine engine, int pageTokens) {
        engine.clear();
        try (Arena a = Arena.ofConfined()) {
            return LlamaCppKvPageLayout.of(engine.exportSequence(a), pageTokens);
        }
    }

    public LlamaCppKvPageLayout layout() {
        return layout;
    }

    /**
     * Serves one request: {@code prompt} token ids (at least 1), {@code newTokens} greedy tokens
     * (at least 1), {@code arrivalNanos} the {@link System#nanoTime()} when the request arrived.
     */
    public RequestReport run(int[] prompt, int newTokens, long arrivalNanos) {
        return switch (run(prompt, newTokens, arrivalNanos, Cancellation.NEVER)) {
            case Outcome.Served served -> served.report();
            case Outcome.Cancelled cancelled -> throw new IllegalStateException("cancelled without a cancellation");
        };
    }

    /** The two points of a request where a cancellation is seen. */
    public enum Phase {
        /** The prefix is leased and about to be copied into the KV cache. */
        RESTORE,
        /** The prefill batch ran; no token has been emitted yet. */
        PREFILL
    }

    /**
     * Asked once per {@link Phase} of a request whether its client went away. Called on the
     * runner's thread; an implementation may read a flag another thread sets.
     */
    @FunctionalInterface
    public interface Cancellation {
        Cancellation NEVER = phase -> false;

        boolean cancelledAt(Phase phase);
    }

    /** How a request ended: served, or cancelled at a phase (nothing published, the lease released). */
    public sealed interface Outcome {
        record Served(RequestReport report) implements Outcome {
        }

        /** @param leasedPages pages the lookup had leased (0 when it missed); all released before this returns */
        record Cancelled(Phase phase, int leasedPages) implements Outcome {
        }
    }

    /**
     * As {@link #run(int[], int, long)}, asking {@code cancellation} at the restore (only when the
     * lookup leased something) and after the prefill batch. A cancelled request releases its
     * lease before it returns (the {@link PrefixLookup.Hit} is closed either way), publishes
     * nothing and leaves the KV cache cleared.
     */
    public Outcome run(int[] prompt, int newTokens, long arrivalNanos, Cancellation cancellation) {
        if (prompt.length < 1 || newTokens < 1) throw new IllegalArgumentException("need a prompt token and a new token");
        if (prompt.length + newTokens > engine.contextTokens()) {
            throw new IllegalArgumentException("prompt " + prompt.length + " + " + newTokens + " exceeds context "
                    + engine.contextTokens());
        }
        engine.clear();
        int restorablePages = Math.max(0, prompt.length - MIN_PREFILL_TOKENS) / pageTokens;
        List<StateKey> promptKeys = StateKeys.forTokens(namespaceDigest, FullAttention.GROUP,
                Arrays.copyOf(prompt, restorablePages * pageTokens), pageTokens, NO_SALT);
        long lookupStart = System.nanoTime();
        PrefixLookup lookup = restorablePages == 0
                ? new PrefixLookup.Miss("prompt shorter than one page plus " + MIN_PREFILL_TOKENS + " tokens")
                : store.lookupPrefix(promptKeys, prompt.length);
        long lookupNanos = System.nanoTime() - lookupStart;
        Restored restoredPrefix = switch (lookup) {
            case PrefixLookup.Miss miss -> new Restored(0, new TtftBreakdown(lookupNanos, 0, 0, 0, 0));
            case PrefixLookup.Hit hit -> restore(hit, restorablePages, cancellation, lookupNanos);
        };
        int restoredPages = restoredPrefix.pages();
        if (restoredPages == CANCELLED) {
            return new Outcome.Cancelled(Phase.RESTORE, ((PrefixLookup.Hit) lookup).pages());
        }
        HitSource source = restoredPages == 0 ? HitSource.NONE : ((PrefixLookup.Hit) lookup).source();
        int restored = restoredPages * pageTokens;

        int[] generated = new int[newTokens];
        float[][] logits = new float[newTokens][];
        long prefillStart = System.nanoTime();
        float[] row = engine.decode(prompt, restored, prompt.length);
        if (cancellation.cancelledAt(Phase.PREFILL)) {
            engine.clear();
            return new Outcome.Cancelled(Phase.PREFILL, restoredPages);
        }
        long now = System.nanoTime();
        store.prefillObserved(prompt.length - restored, now - prefillStart);
        long ttft = now - arrivalNanos;
        TtftBreakdown breakdown = restoredPrefix.steps().withPrefill(now - prefillStart);
        decodeGreedy(engine, row, generated, logits);

        KvPageStore.PublishReport published = publishNewPages(prompt, restoredPages);
        return new Outcome.Served(new RequestReport(generated, logits, prompt.length, restored, prompt.length - restored,
                restoredPages * layout.pageBytes(), source, ttft, published, breakdown));
    }

    /** {@link Restored#pages()} when the request was cancelled at {@link Phase#RESTORE}. */
    private static final int CANCELLED = -1;

    /** What {@link #restore} did: pages restored (or {@link #CANCELLED}) and the steps' times so far. */
    private record Restored(int pages, TtftBreakdown steps) {
    }

    /**
     * Restores the hit's first pages; 0 when llama.cpp refuses the blob (the cache is then empty),
     * {@link #CANCELLED} when the request was cancelled before the copy. The lease ends here in
     * every case, as soon as the blob holds the pages (before {@code set_data} reads it).
     */
    private Restored restore(PrefixLookup.Hit hit, int restorablePages, Cancellation cancellation, long lookupNanos) {
        MemorySegment blob;
        long copyStart;
        long copied;
        try (hit) {
            if (cancellation.cancelledAt(Phase.RESTORE)) return new Restored(CANCELLED, TtftBreakdown.NONE);
            copyStart = System.nanoTime();
            int pages = Math.min(hit.pages(), restorablePages);
            blob = layout.assemble(hit.images().subList(0, pages), blobBuffer(layout.blobBytes(pages * pageTokens)));
            copied = System.nanoTime();
        }
        long released = System.nanoTime();
        boolean imported = engine.importSequence(blob);
        TtftBreakdown steps = new TtftBreakdown(lookupNanos, copied - copyStart, System.nanoTime() - released,
                released - copied, 0);
        if (imported) return new Restored(LlamaCppKvPageLayout.cells(blob) / pageTokens, steps);
        engine.clear();
        return new Restored(0, steps);
    }

    /**
     * {@link #blobBuffer}, first grown to at least {@code bytes} when it is smaller (to twice its
     * size at least, so a conversation's growing prefix reallocates it a few times, not per turn).
     */
    private MemorySegment blobBuffer(long bytes) {
        if (blobBuffer.byteSize() < bytes) blobBuffer = Arena.ofAuto().allocate(Math.max(bytes, 2 * blobBuffer.byteSize()), 8);
        return blobBuffer;
    }

    /** Publishes the complete pages of the prompt (positions a batch computed) from {@code firstNewPage} on. */
    private KvPageStore.PublishReport publishNewPages(int[] prompt, int firstNewPage) {
        int completePages = prompt.length / pageTokens;
        if (completePages <= firstNewPage) return KvPageStore.PublishReport.NONE;
        List<StateKey> keys = StateKeys.forTokens(namespaceDigest, FullAttention.GROUP, prompt, pageTokens, NO_SALT);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = engine.exportSequence(a);
            return store.publish(keys.subList(firstNewPage, completePages), layout.pageBytes(),
                    (index, slot) -> layout.exportPage(state, firstNewPage + index, slot));
        }
    }

    /**
     * Greedy decode from the prefill's last logits {@code firstRow}: fills {@code generated} and
     * {@code logits} (one row per token, the first being {@code firstRow}) with one-token decode steps.
     */
    static void decodeGreedy(LlamaCppEngine engine, float[] firstRow, int[] generated, float[][] logits) {
        float[] row = firstRow;
        int next = argmax(row);
        int[] one = new int[1];
        for (int i = 0; ; i++) {
            generated[i] = next;
            logits[i] = row;
            if (i == generated.length - 1) break;
            one[0] = next;
            row = engine.decode(one, 0, 1);
            next = argmax(row);
        }
    }

    /** Greedy choice: the first index of the largest logit (ties go to the lower id, like llama.cpp's greedy sampler). */
    static int argmax(float[] row) {
        int best = 0;
        for (int i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
        return best;
    }
}
