package io.orbitkv.bench.ttft;

import com.github.tjake.jlama.model.AbstractModel;
import com.github.tjake.jlama.tensor.AbstractTensor;
import com.github.tjake.jlama.tensor.KvBufferCache;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.jlama.JlamaKvPageLayout;
import io.orbitkv.jlama.JlamaNamespace;
import io.orbitkv.jlama.JlamaSessionRunner;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;

import java.util.UUID;

/**
 * Jlama under the TTFT benchmark: one F32 model shared by every arm's {@link JlamaSessionRunner}.
 *
 * <p>Owns the model. Thread model: confined (Jlama parallelises each forward on its own pool).
 *
 * <p>Design note: the benchmark JVM runs Jlama with the Vector API enabled (the fast mode, not the
 * bit-exact {@code -XX:-EnableVectorSupport} of the parity gates and the demo): timings are the
 * point here, and the scalar fallback is tens of times slower on the 8-layer model.
 */
final class JlamaTtftEngine implements TtftEngine {

    private final AbstractModel model;
    private final Namespace namespace;
    private final Namespace missNamespace;
    private final long pageBytes;
    private final int pageTokens;

    private JlamaTtftEngine(AbstractModel model, Namespace namespace, Namespace missNamespace, long pageBytes,
                            int pageTokens) {
        this.model = model;
        this.namespace = namespace;
        this.missNamespace = missNamespace;
        this.pageBytes = pageBytes;
        this.pageTokens = pageTokens;
    }

    static JlamaTtftEngine load(TinyLlamaModel files, int pageTokens) {
        TinyLlamaSpec spec = files.spec();
        Namespace ns = JlamaNamespace.of(files, pageTokens);
        Namespace miss = JlamaNamespace.of(spec.name(), ns.revision() + "-miss-probe", files.weightsDigestHex(),
                files.tokenizerDigestHex(), pageTokens);
        long pageBytes = new JlamaKvPageLayout(spec.layers(), spec.kvWidth(), pageTokens).pageBytes();
        return new JlamaTtftEngine(JlamaSessionRunner.loadModel(files.dir()), ns, miss, pageBytes, pageTokens);
    }

    @Override
    public String name() {
        return "Jlama";
    }

    @Override
    public Namespace namespace() {
        return namespace;
    }

    @Override
    public Namespace missNamespace() {
        return missNamespace;
    }

    @Override
    public long pageBytes() {
        return pageBytes;
    }

    @Override
    public int pageTokens() {
        return pageTokens;
    }

    @Override
    public int minPrefillTokens() {
        return 1;
    }

    @Override
    public Runner runner(Namespace ns, KvPageStore store) {
        return new JlamaSessionRunner(model, ns, store)::run;
    }

    /** One-token {@code batchForward} at the next position and the greedy pick, as a hit's prefill runs it. */
    @Override
    public long stepNanos(int[] context) {
        long[] nanos = new long[STEP_REPEATS];
        try (KvBufferCache cache = new KvBufferCache(model);
             AbstractTensor<?, ?> logitsRow = model.makeDenseTensor(model.getConfig().vocabularySize)) {
            KvBufferCache.KvBuffer kv = cache.getKvBuffer(UUID.randomUUID());
            model.batchForward(context, 0, kv).close();
            for (int r = 0; r < nanos.length; r++) {
                int position = context.length + r;
                kv.setCurrentContextPosition(position);
                long t0 = System.nanoTime();
                try (AbstractTensor<?, ?> out = model.batchForward(new int[] {context[r]}, position, kv)) {
                    model.sample(out.slice(out.shape().first() - 1), 0f, 0f, logitsRow);
                }
                nanos[r] = System.nanoTime() - t0;
            }
        }
        return TtftEngine.median(nanos);
    }

    @Override
    public void close() {
        model.close();
    }
}
