package io.orbitkv.llamacpp;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The downcall handles of the llama.cpp C API functions the adapter calls, bound once per JVM
 * after the startup check of {@link LlamaCppAbi} passed.
 *
 * <p>Owns the library lookup (in the global arena: a loaded library is never unloaded) and a
 * bounded ring of the last {@value #LOG_LINES} warning/error lines llama.cpp logged, which
 * errors quote. Thread model: the handles are immutable and may be called from any thread;
 * which llama.cpp objects a thread may touch is the caller's business (a context is confined,
 * see {@link LlamaCppEngine}). The log ring is guarded by its own monitor ({@code log}).
 *
 * <p>Design note: the log callback discards DEBUG/INFO (llama.cpp prints ~60 lines per model
 * load to stderr otherwise, which would drown test output) and keeps WARN/ERROR so that a failed
 * {@code llama_state_seq_set_data} (which only returns 0) can say why.
 */
@SuppressWarnings("restricted") // FFM downcalls are this class's job; the launchers grant --enable-native-access
public final class LlamaCppNative {

    /** Warning and error lines kept for error messages. */
    public static final int LOG_LINES = 16;

    private static final Linker LINKER = Linker.nativeLinker();

    final MethodHandle modelDefaultParams;
    final MethodHandle modelLoadFromFile;
    final MethodHandle modelFree;
    final MethodHandle contextDefaultParams;
    final MethodHandle initFromModel;
    final MethodHandle free;
    final MethodHandle modelGetVocab;
    final MethodHandle vocabNTokens;
    final MethodHandle modelNLayer;
    final MethodHandle batchGetOne;
    final MethodHandle decode;
    final MethodHandle getLogitsIth;
    final MethodHandle kvSelfClear;
    final MethodHandle kvSelfSeqRm;
    final MethodHandle stateSeqGetSize;
    final MethodHandle stateSeqGetData;
    final MethodHandle stateSeqSetData;
    private final String systemInfo;
    private final Deque<String> log = new ArrayDeque<>(LOG_LINES);

    private LlamaCppNative(Path library) {
        SymbolLookup lib = SymbolLookup.libraryLookup(library, Arena.global());
        int buildNumber = lib.find("LLAMA_BUILD_NUMBER").orElseThrow(() -> missing("LLAMA_BUILD_NUMBER"))
                .reinterpret(4).get(JAVA_INT, 0);
        String commit = lib.find("LLAMA_COMMIT").orElseThrow(() -> missing("LLAMA_COMMIT"))
                .reinterpret(8).get(ADDRESS, 0).reinterpret(64).getString(0);
        if (buildNumber != LlamaCppAbi.BUILD_NUMBER || !LlamaCppAbi.COMMIT.equals(commit)) {
            // the struct layouts are only known for this build: do not even call the by-value functions
            throw new IllegalStateException("llama.cpp ABI mismatch in " + library + ": expected build "
                    + LlamaCppAbi.BUILD_NUMBER + " (" + LlamaCppAbi.COMMIT + "), found " + buildNumber + " (" + commit + ")");
        }
        modelDefaultParams = h(lib, "llama_model_default_params", FunctionDescriptor.of(LlamaCppAbi.MODEL_PARAMS));
        modelLoadFromFile = h(lib, "llama_model_load_from_file", FunctionDescriptor.of(ADDRESS, ADDRESS, LlamaCppAbi.MODEL_PARAMS));
        modelFree = h(lib, "llama_model_free", FunctionDescriptor.ofVoid(ADDRESS));
        contextDefaultParams = h(lib, "llama_context_default_params", FunctionDescriptor.of(LlamaCppAbi.CONTEXT_PARAMS));
        initFromModel = h(lib, "llama_init_from_model", FunctionDescriptor.of(ADDRESS, ADDRESS, LlamaCppAbi.CONTEXT_PARAMS));
        free = h(lib, "llama_free", FunctionDescriptor.ofVoid(ADDRESS));
        modelGetVocab = h(lib, "llama_model_get_vocab", FunctionDescriptor.of(ADDRESS, ADDRESS));
        vocabNTokens = h(lib, "llama_vocab_n_tokens", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        modelNLayer = h(lib, "llama_model_n_layer", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        batchGetOne = h(lib, "llama_batch_get_one", FunctionDescriptor.of(LlamaCppAbi.BATCH, ADDRESS, JAVA_INT));
        decode = h(lib, "llama_decode", FunctionDescriptor.of(JAVA_INT, ADDRESS, LlamaCppAbi.BATCH));
        getLogitsIth = h(lib, "llama_get_logits_ith", FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
        kvSelfClear = h(lib, "llama_kv_self_clear", FunctionDescriptor.ofVoid(ADDRESS));
        kvSelfSeqRm = h(lib, "llama_kv_self_seq_rm", FunctionDescriptor.of(JAVA_BOOLEAN, ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT));
        stateSeqGetSize = h(lib, "llama_state_seq_get_size", FunctionDescriptor.of(JAVA_LONG, ADDRESS, JAVA_INT));
        stateSeqGetData = h(lib, "llama_state_seq_get_data", FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT));
        stateSeqSetData = h(lib, "llama_state_seq_set_data", FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT));
        try {
            installLogCallback(lib);
            h(lib, "llama_backend_init", FunctionDescriptor.ofVoid()).invokeExact();
            MemorySegment info = (MemorySegment) h(lib, "llama_print_system_info", FunctionDescriptor.of(ADDRESS)).invokeExact();
            systemInfo = info.reinterpret(4096).getString(0);
            try (Arena a = Arena.ofConfined()) {
                MemorySegment mp = (MemorySegment) modelDefaultParams.invokeExact((SegmentAllocator) a);
                MemorySegment cp = (MemorySegment) contextDefaultParams.invokeExact((SegmentAllocator) a);
                List<String> bad = LlamaCppAbi.mismatches(buildNumber, commit, mp, cp);
                if (!bad.isEmpty()) {
                    throw new IllegalStateException("llama.cpp ABI mismatch in " + library + " against include/llama.h of "
                            + LlamaCppAbi.BUILD_TAG + ": " + String.join("; ", bad));
                }
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** The process-wide bindings to the bundled library, checked on first use. */
    public static LlamaCppNative get() {
        return Holder.INSTANCE;
    }

    private static final class Holder {
        static final LlamaCppNative INSTANCE = new LlamaCppNative(LlamaCppLibrary.extract());
    }

    /** {@code llama_print_system_info()} at load, e.g. "CPU : SSE3 = 1 | ... | AVX2 = 1 | ...". */
    public String systemInfo() {
        return systemInfo;
    }

    /** The last warning/error lines llama.cpp logged, oldest first, joined. */
    public String recentLog() {
        synchronized (log) {
            return String.join("", log).strip();
        }
    }

    private void installLogCallback(SymbolLookup lib) throws Throwable {
        MethodHandle target = MethodHandles.lookup().bind(this, "onLog",
                MethodType.methodType(void.class, int.class, MemorySegment.class, MemorySegment.class));
        MemorySegment stub = LINKER.upcallStub(target, FunctionDescriptor.ofVoid(JAVA_INT, ADDRESS, ADDRESS), Arena.global());
        MethodHandle logSet = h(lib, "llama_log_set", FunctionDescriptor.ofVoid(ADDRESS, ADDRESS));
        logSet.invokeExact(stub, MemorySegment.NULL);
    }

    @SuppressWarnings("unused") // called from native code through the upcall stub
    private void onLog(int level, MemorySegment text, MemorySegment userData) {
        if (level < 3 || level == 5) return;                      // NONE, DEBUG, INFO, CONT
        String line = text.reinterpret(1024).getString(0);
        synchronized (log) {
            if (log.size() == LOG_LINES) log.removeFirst();
            log.addLast(line);
        }
    }

    private static MethodHandle h(SymbolLookup lib, String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(lib.find(name).orElseThrow(() -> missing(name)), fd);
    }

    private static IllegalStateException missing(String symbol) {
        return new IllegalStateException("llama.cpp symbol " + symbol + " not exported by the bundled library");
    }

    static MemorySegment cString(Arena arena, String s) {
        return arena.allocateFrom(s);
    }
}
