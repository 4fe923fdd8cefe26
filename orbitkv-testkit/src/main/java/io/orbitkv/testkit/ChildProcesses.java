package io.orbitkv.testkit;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Child processes that must not outlive the JVM that started them (a Manager, etcd, Redis, an
 * engine worker of a bench): one shutdown hook stops every adopted child still running when the
 * JVM exits without having closed it, as after Ctrl-C, a SIGTERM, or a bench's uncaught error.
 *
 * <p>Thread-safe. A child leaves the set when it exits. The hook asks each child to stop
 * (SIGTERM, so a Manager runs its own shutdown and removes its socket and arenas), waits at most
 * {@link #GRACE_MILLIS} for all of them together, then kills what is left (SIGKILL).
 *
 * <p>Design note: a JVM does not stop its children when it exits, and a bench killed mid-run
 * left an etcd listening on loopback with its data directory deleted underneath it.
 */
public final class ChildProcesses {

    /** How long the hook waits, in all, for the children to stop after SIGTERM. */
    static final long GRACE_MILLIS = 5_000;

    private static final Set<Process> LIVE = ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(ChildProcesses::stopAll, "orbitkv-child-processes"));
    }

    private ChildProcesses() {
    }

    /** Stops {@code child} when this JVM exits, if it still runs then; returns it. */
    public static Process adopt(Process child) {
        LIVE.add(child);
        child.onExit().thenRun(() -> LIVE.remove(child));
        return child;
    }

    /** Adopted children not yet seen to exit (for tests: the set must not keep exited ones). */
    static int adopted() {
        return LIVE.size();
    }

    private static void stopAll() {
        for (Process p : LIVE) p.destroy();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(GRACE_MILLIS);
        for (Process p : LIVE) {
            try {
                long left = deadline - System.nanoTime();
                if (left <= 0 || !p.waitFor(left, TimeUnit.NANOSECONDS)) p.destroyForcibly();
            } catch (InterruptedException e) {
                p.destroyForcibly();
            }
        }
    }
}
