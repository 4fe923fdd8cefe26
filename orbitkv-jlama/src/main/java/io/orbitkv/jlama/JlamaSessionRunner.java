package io.orbitkv.jlama;

import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.PrefixLookup;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.engine.TtftBreakdown;
import com.github.tjake.jlama.model.AbstractModel;
import com.github.tjake.jlama.model.ModelSupport;
import com.github.tjake.jlama.safetensors.DType;
import com.github.tjake.jlama.tensor.AbstractTensor;
import com.github.tjake.jlama.tensor.KvBufferCache;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * Serves one greedy request at a time on a Jlama model, reusing KV pages through a
 * {@link KvPageStore}: lease the longest restorable prefix, copy it into a fresh Jlama
 * {@link KvBufferCache.KvBuffer} at the same absolute positions, prefill the rest with
 * {@code batchForward}, decode greedily with {@code forward}, then publish every page that became
 * complete and was not restored.
 *
 * <pre>
 *   prompt  |<--- restored pages (leased) --->|<-- prefill (>= 1 token) -->|
 *   KV after decode of n tokens: prompt + n-1 generated positions
 *   published: pages [restored, (prompt + n - 1) / P), each exported after the last forward
 * </pre>
 *
 * <p>Owns the KV buffers of its requests (one per request, taken from Jlama's tensor pool and
 * returned to it, zeroed, at the request's end; no files) and borrows the
 * model and the store. Thread model: confined; {@link #run} is called by one thread at a time
 * (Jlama parallelises each forward internally). Invariants: at least one prompt token is always
 * computed (the logits of the last prompt position are needed, and the contract's cap says so);
 * restored page {@code i} lands at positions {@code [i*P, (i+1)*P)}; a page is published only
 * when all its positions were written by this request's forwards or restore.
 *
 * <p>Design note: Jlama's {@code generate()} closes the session's buffers when it returns, so the
 * runner drives {@code batchForward}/{@code forward} itself and keeps the buffer until the pages
 * are exported. Decode positions are published too: a multi-turn conversation's next prompt
 * contains the previous answer, and those positions' K/V are bit-identical whether computed by
 * {@code forward} or by {@code batchForward} (the parity gates check the consequence, logits).
 * Keys are the project's {@link io.orbitkv.state.TokenChain} with no salt.
 */
public final class JlamaSessionRunner {

    private static final byte[] NO_SALT = new byte[0];

    private final AbstractModel model;
    private final KvPageStore store;
    private final JlamaKvPageLayout layout;
    private final byte[] namespaceDigest;
    private final int pageTokens;
    private final int vocab;
    /** Hands out each request's KV buffer; registers none, so there is nothing to close. */
    private final KvBufferCache buffers;

    /**
     * @param model     a loaded Jlama model whose working dtype is F32
     * @param namespace the namespace the store was registered with (its page size is used)
     * @param store     where pages come from and go to ({@link KvPageStore#cold()} for the control)
     */
    public JlamaSessionRunner(AbstractModel model, Namespace namespace, KvPageStore store) {
        if (model.getWorkingDType() != DType.F32) {
            throw new IllegalArgumentException("the " + JlamaKvPageLayout.NAME + " layout is F32; model works in "
                    + model.getWorkingDType());
        }
        if (!namespace.kvLayout().equals(JlamaKvPageLayout.NAME)) {
            throw new IllegalArgumentException("namespace layout " + namespace.kvLayout() + " is not " + JlamaKvPageLayout.NAME);
        }
        this.model = model;
        this.store = store;
        this.pageTokens = namespace.pageTokens();
        this.namespaceDigest = namespace.digest();
        this.layout = new JlamaKvPageLayout(model.getConfig().numberOfLayers, model.getConfig().kvLength, pageTokens);
        this.vocab = model.getConfig().vocabularySize;
        this.buffers = new KvBufferCache(model);
    }

    /** Loads a model directory (safetensors + config.json + tokenizer.json) with F32 weights and work. */
    public static AbstractModel loadModel(Path dir) {
        return ModelSupport.loadModel(dir.toFile(), null, DType.F32, DType.F32, Optional.empty(), Optional.empty());
    }

    public JlamaKvPageLayout layout() {
        return layout;
    }

    /**
     * Serves one request: {@code prompt} token ids (at least 1), {@code newTokens} greedy tokens
     * (at least 1), {@code arrivalNanos} the {@link System#nanoTime()} when the request arrived.
     */
    public RequestReport run(int[] prompt, int newTokens, long arrivalNanos) {
        if (prompt.length < 1 || newTokens < 1) throw new IllegalArgumentException("need a prompt token and a new token");
        if (prompt.length + newTokens > model.getConfig().contextLength) {
            throw new IllegalArgumentException("prompt " + prompt.length + " + " + newTokens + " exceeds context "
                    + model.getConfig().contextLength);
        }
        try (KvBufferCache.KvBuffer kv = buffers.getEphemeralKvBuffer()) {
            int restorablePages = (prompt.length - 1) / pageTokens;
            List<StateKey> promptKeys = StateKeys.forTokens(namespaceDigest, JlamaNamespace.GROUP,
                    Arrays.copyOf(prompt, restorablePages * pageTokens), pageTokens, NO_SALT);
            long lookupStart = System.nanoTime();
            PrefixLookup lookup = restorablePages == 0
                    ? new PrefixLookup.Miss("prompt shorter than one page plus one token")
                    : store.lookupPrefix(promptKeys, prompt.length);
            long lookupNanos = System.nanoTime() - lookupStart;
            int restoredPages = 0;
            HitSource source = HitSource.NONE;
            TtftBreakdown steps = new TtftBreakdown(lookupNanos, 0, 0, 0, 0);
            switch (lookup) {
                case PrefixLookup.Miss miss -> {
                }
                case PrefixLookup.Hit hit -> {
                    long copyStart;
                    long copied;
                    try (hit) {
                        restoredPages = Math.min(hit.pages(), restorablePages);
                        copyStart = System.nanoTime();
                        layout.importPages(hit.images().subList(0, restoredPages), kv);
                        copied = System.nanoTime();
                    }
                    steps = new TtftBreakdown(lookupNanos, copied - copyStart, 0, System.nanoTime() - copied, 0);
                    source = hit.source();
                }
            }
            int restored = restoredPages * pageTokens;
            kv.setCurrentContextPosition(restored);

            int[] generated = new int[newTokens];
            float[][] logits = new float[newTokens][];
            long[] prefillNanos = new long[1];
            long ttft = decode(kv, prompt, restored, generated, logits, arrivalNanos, prefillNanos);

            int kvTokens = prompt.length + newTokens - 1;
            int[] sequence = Arrays.copyOf(prompt, kvTokens);
            System.arraycopy(generated, 0, sequence, prompt.length, newTokens - 1);
            KvPageStore.PublishReport published = publishNewPages(kv, sequence, restoredPages);
            return new RequestReport(generated, logits, prompt.length, restored, prompt.length - restored,
                    restoredPages * layout.pageBytes(), source, ttft, published, steps.withPrefill(prefillNanos[0]));
        }
    }

    /** Prefill and greedy decode; returns the TTFT and puts the prefill's own time in {@code prefillNanos[0]}. */
    private long decode(KvBufferCache.KvBuffer kv, int[] prompt, int restored, int[] generated, float[][] logits,
                        long arrivalNanos, long[] prefillNanos) {
        long ttft;
        try (AbstractTensor<?, ?> logitsRow = model.makeDenseTensor(vocab)) {
            int next;
            long prefillStart = System.nanoTime();
            AbstractTensor<?, ?> prefill = model.batchForward(Arrays.copyOfRange(prompt, restored, prompt.length), restored, kv);
            try (prefill) {
                next = model.sample(prefill.slice(prefill.shape().first() - 1), 0f, 0f, logitsRow);
            }
            long now = System.nanoTime();
            prefillNanos[0] = now - prefillStart;
            store.prefillObserved(prompt.length - restored, now - prefillStart);
            ttft = now - arrivalNanos;
            int position = prompt.length;
            for (int i = 0; ; i++) {
                generated[i] = next;
                logits[i] = copyRow(logitsRow);
                if (i == generated.length - 1) break;
                try (AbstractTensor<?, ?> out = model.forward(next, position++, kv, Optional.empty())) {
                    next = model.sample(out, 0f, 0f, logitsRow);
                }
            }
        }
        return ttft;
    }

    private KvPageStore.PublishReport publishNewPages(KvBufferCache.KvBuffer kv, int[] sequence, int firstNewPage) {
        int completePages = sequence.length / pageTokens;
        if (completePages <= firstNewPage) return KvPageStore.PublishReport.NONE;
        List<StateKey> keys = StateKeys.forTokens(namespaceDigest, JlamaNamespace.GROUP, sequence, pageTokens, NO_SALT);
        return store.publish(keys.subList(firstNewPage, completePages), layout.pageBytes(),
                (index, slot) -> layout.exportPage(kv, firstNewPage + index, slot));
    }

    private float[] copyRow(AbstractTensor<?, ?> row) {
        float[] out = new float[vocab];
        for (int i = 0; i < vocab; i++) out[i] = row.get(0, i);
        return out;
    }
}
