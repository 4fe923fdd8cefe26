package io.orbitkv.llamacpp;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.locks.ReentrantLock;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * One llama.cpp model and one context on it (one sequence, id 0): decode token batches, read
 * logits, clear the KV cache, and export/import the sequence state
 * ({@code llama_state_seq_get_data}/{@code set_data}).
 *
 * <p>Owns the native {@code llama_model} and {@code llama_context} (freed by {@link #close()})
 * and a confined arena for the token buffer. Thread model: confined to the thread that loaded it
 * (the token buffer lives in a confined arena: any other thread gets {@code WrongThreadException}),
 * so one engine is never handed over; several engines in one process each stay on their own
 * thread. Every call into the library (load, decode, clear, state export/import, free) holds the
 * process-wide {@link #LIBRARY} lock: two engines decoding at once on two threads computed wrong
 * logits (the bundled build shares state between contexts), so they take turns. Invariants: after {@link #clear()} the KV cache is
 * empty; decode positions continue after the highest position in the cache (llama.cpp assigns
 * them when {@code llama_batch_get_one} leaves {@code pos} null), so a sequence restored to
 * {@code [0, n)} continues at {@code n}.
 *
 * <p>Design note: deterministic settings for the parity gates. One thread for decode and batch
 * ({@link Settings#deterministic}); the bundled build is CPU-only, so nothing is offloaded.
 * {@code n_batch = n_ubatch = n_ctx}, so a prompt is one ubatch whatever its length, and the
 * cold and warm runs split work only where the runner decides (at the restored boundary).
 * K and V stay F16 (the library default), which halves the page images against F32
 * (CI model: 2 KiB per token-page layer pair at 16 tokens).
 *
 * <p>Design note (one lock for the library): with two engines decoding concurrently on two threads
 * of one JVM, 4,796 of 7,405 probe runs on the CI model gave other logits than a lone engine
 * (e.g. -8.60 instead of -6.47), with no OrbitKV code in the loop, while two processes were
 * always right: shared state inside the bundled library. Serializing every library call in the
 * process keeps each engine bit-exact; the alternative, one decoding context per process, would
 * refuse a second engine outright. The cost is that engines in one process do not decode in
 * parallel (each is single-threaded by the deterministic settings anyway); run engines in
 * separate processes to use more cores.
 */
@SuppressWarnings("restricted") // FFM downcalls are this class's job; the launchers grant --enable-native-access
public final class LlamaCppEngine implements AutoCloseable {

    /** Held by every call into the library, by every engine of the process (see the design note). */
    static final ReentrantLock LIBRARY = new ReentrantLock();

    /** Token ids one decode call takes at most (the token buffer's size): the context length bounds it. */
    private final int maxBatchTokens;
    private final LlamaCppNative lib;
    private final Arena arena = Arena.ofConfined();
    private final MemorySegment model;
    private final MemorySegment context;
    private final MemorySegment tokenBuffer;
    private final int vocabSize;
    private final int layers;
    private final int contextTokens;
    private boolean closed;

    /**
     * Context settings.
     *
     * @param contextTokens {@code n_ctx}, also {@code n_batch} and {@code n_ubatch}
     * @param threads       {@code n_threads} and {@code n_threads_batch}
     */
    public record Settings(int contextTokens, int threads) {
        public Settings {
            if (contextTokens < 1 || threads < 1) throw new IllegalArgumentException("contextTokens and threads must be >= 1");
        }

        /** One thread, the given context: the parity gates' settings. */
        public static Settings deterministic(int contextTokens) {
            return new Settings(contextTokens, 1);
        }
    }

    private LlamaCppEngine(LlamaCppNative lib, MemorySegment model, MemorySegment context, Settings settings) throws Throwable {
        this.lib = lib;
        this.model = model;
        this.context = context;
        this.contextTokens = settings.contextTokens();
        this.maxBatchTokens = settings.contextTokens();
        this.tokenBuffer = arena.allocate(JAVA_INT, maxBatchTokens);
        this.vocabSize = (int) lib.vocabNTokens.invokeExact((MemorySegment) lib.modelGetVocab.invokeExact(model));
        this.layers = (int) lib.modelNLayer.invokeExact(model);
    }

    /** Loads a GGUF model and creates a context with {@code settings}. */
    public static LlamaCppEngine load(Path gguf, Settings settings) {
        if (!Files.isRegularFile(gguf)) throw new IllegalArgumentException("no GGUF file at " + gguf);
        LlamaCppNative lib = LlamaCppNative.get();
        MemorySegment model = MemorySegment.NULL;
        LIBRARY.lock();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment mp = (MemorySegment) lib.modelDefaultParams.invokeExact((SegmentAllocator) a);
            model = (MemorySegment) lib.modelLoadFromFile.invokeExact(LlamaCppNative.cString(a, gguf.toString()), mp);
            if (model.address() == 0) throw new IllegalStateException("llama_model_load_from_file failed: " + lib.recentLog());
            MemorySegment cp = (MemorySegment) lib.contextDefaultParams.invokeExact((SegmentAllocator) a);
            LlamaCppAbi.setContextInt(cp, "n_ctx", settings.contextTokens());
            LlamaCppAbi.setContextInt(cp, "n_batch", settings.contextTokens());
            LlamaCppAbi.setContextInt(cp, "n_ubatch", settings.contextTokens());
            LlamaCppAbi.setContextInt(cp, "n_threads", settings.threads());
            LlamaCppAbi.setContextInt(cp, "n_threads_batch", settings.threads());
            MemorySegment context = (MemorySegment) lib.initFromModel.invokeExact(model, cp);
            if (context.address() == 0) throw new IllegalStateException("llama_init_from_model failed: " + lib.recentLog());
            return new LlamaCppEngine(lib, model, context, settings);
        } catch (RuntimeException | Error e) {
            freeModel(lib, model);
            throw e;
        } catch (Throwable t) {
            freeModel(lib, model);
            throw new IllegalStateException(t);
        } finally {
            LIBRARY.unlock();
        }
    }

    public int vocabSize() {
        return vocabSize;
    }

    public int layers() {
        return layers;
    }

    public int contextTokens() {
        return contextTokens;
    }

    /**
     * Decodes {@code tokens[from, to)} as one batch after the cached positions and returns the
     * logits of the batch's last token (a fresh array of {@link #vocabSize()} floats).
     */
    public float[] decode(int[] tokens, int from, int to) {
        int n = to - from;
        if (n < 1 || n > maxBatchTokens) throw new IllegalArgumentException("batch of " + n + " tokens, max " + maxBatchTokens);
        MemorySegment.copy(tokens, from, tokenBuffer, JAVA_INT, 0, n);
        LIBRARY.lock();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment batch = (MemorySegment) lib.batchGetOne.invokeExact((SegmentAllocator) a, tokenBuffer, n);
            int rc = (int) lib.decode.invokeExact(context, batch);
            if (rc != 0) throw new IllegalStateException("llama_decode returned " + rc + ": " + lib.recentLog());
            MemorySegment logits = (MemorySegment) lib.getLogitsIth.invokeExact(context, -1);
            if (logits.address() == 0) throw new IllegalStateException("llama_get_logits_ith(-1) returned NULL");
            return logits.reinterpret((long) vocabSize * Float.BYTES).toArray(JAVA_FLOAT);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        } finally {
            LIBRARY.unlock();
        }
    }

    /** Empties the KV cache ({@code llama_kv_self_clear}). */
    public void clear() {
        LIBRARY.lock();
        try {
            lib.kvSelfClear.invokeExact(context);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        } finally {
            LIBRARY.unlock();
        }
    }

    /** Copies sequence 0's state ({@code llama_state_seq_get_data}) into a new segment of {@code into}. */
    public MemorySegment exportSequence(Arena into) {
        LIBRARY.lock();
        try {
            long size = (long) lib.stateSeqGetSize.invokeExact(context, 0);
            if (size == 0) throw new IllegalStateException("llama_state_seq_get_size failed: " + lib.recentLog());
            MemorySegment blob = into.allocate(size, 8);
            long written = (long) lib.stateSeqGetData.invokeExact(context, blob, size, 0);
            if (written != size) throw new IllegalStateException("llama_state_seq_get_data wrote " + written + " of " + size);
            return blob;
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        } finally {
            LIBRARY.unlock();
        }
    }

    /**
     * Replaces sequence 0's state with {@code blob} ({@code llama_state_seq_set_data}); false when
     * llama.cpp refused it (it then leaves the sequence empty), with the reason in
     * {@link LlamaCppNative#recentLog()}.
     */
    public boolean importSequence(MemorySegment blob) {
        LIBRARY.lock();
        try {
            long read = (long) lib.stateSeqSetData.invokeExact(context, blob, blob.byteSize(), 0);
            return read == blob.byteSize();
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        } finally {
            LIBRARY.unlock();
        }
    }

    /** The library's last warning/error log lines. */
    public String recentLog() {
        return lib.recentLog();
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        LIBRARY.lock();
        try {
            lib.free.invokeExact(context);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        } finally {
            try {
                freeModel(lib, model);
            } finally {
                LIBRARY.unlock();
                arena.close();
            }
        }
    }

    private static void freeModel(LlamaCppNative lib, MemorySegment model) {
        if (model.address() == 0) return;
        try {
            lib.modelFree.invokeExact(model);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
