package io.orbitkv.state.unix;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.Locale;

/**
 * What every libc downcall of the project shares: the native linker, the {@code errno} capture
 * layout, the platform check and the way a failed invocation is rethrown. The callers
 * ({@link UnixSocket} here; {@code core.fd.Posix} and the io_uring route's {@code Libc} in
 * {@code orbitkv-core}) keep their own method handles and signatures, so each call stays one
 * {@code invokeExact} with no boxing.
 *
 * <p>Stateless and thread-safe.
 *
 * <p>Design note: it lives in {@code orbitkv-state} because that is the one module both the
 * Manager's core and the Java client depend on, and both call libc (the client receives arena
 * descriptors, protocol §6.11). Raw calls return the result or {@code -errno}, the kernel's own
 * convention, so callers turn failures into values. Flags and struct offsets are the Linux LP64
 * values shared by x86_64 and aarch64; elsewhere {@link #SUPPORTED} is false and no call is made.
 */
@SuppressWarnings("restricted") // FFM downcalls are this class's job; the launchers grant --enable-native-access
public final class NativeCall {

    /** The lower-case {@code os.arch}. */
    public static final String ARCH = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    /** Linux on x86_64 or aarch64: the platforms whose flag values and struct layouts the callers know. */
    public static final boolean SUPPORTED = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")
            && (ARCH.equals("amd64") || ARCH.equals("x86_64") || ARCH.equals("aarch64"));
    /** ENOSYS, returned where the platform is not supported. */
    public static final int ENOSYS = 38;
    /** The layout a call captures {@code errno} into; allocate one per call from a confined arena. */
    public static final StructLayout CAPTURE = Linker.Option.captureStateLayout();

    private static final Linker LINKER = Linker.nativeLinker();
    private static final VarHandle ERRNO = CAPTURE.varHandle(PathElement.groupElement("errno"));
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");

    private NativeCall() {
    }

    /**
     * A downcall handle to libc's {@code name} whose first argument is the errno capture segment,
     * or null where the platform is not {@link #SUPPORTED} (so class initialisation never fails there).
     */
    public static MethodHandle handle(String name, FunctionDescriptor descriptor, Linker.Option... options) {
        if (!SUPPORTED) return null;
        MemorySegment symbol = LINKER.defaultLookup().find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("libc symbol " + name));
        Linker.Option[] all = new Linker.Option[options.length + 1];
        all[0] = CAPTURE_ERRNO;
        System.arraycopy(options, 0, all, 1, options.length);
        return LINKER.downcallHandle(symbol, descriptor, all);
    }

    /** The errno a call captured into {@code state}. */
    public static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    /** What to throw for a {@code Throwable} out of {@code invokeExact}: errors as they are, the rest unchecked. */
    public static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) return r;
        if (t instanceof Error e) throw e;
        return new IllegalStateException("native call failed", t);
    }
}
