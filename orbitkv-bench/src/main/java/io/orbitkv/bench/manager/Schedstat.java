package io.orbitkv.bench.manager;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;

/**
 * CPU time and run-queue wait summed over every thread of one process, from the kernel's
 * {@code /proc/<pid>/task/<tid>/schedstat} ("time on a CPU", "time runnable but waiting for a
 * CPU", "timeslices", in nanoseconds since each thread started).
 *
 * <p>Why: on a shared 2-core machine a round trip's wall time is mostly other processes' time
 * slices, so a latency ratio cannot tell the Manager's work from the machine's load. The CPU time a
 * QUERY costs both processes does not depend on the load, and the run-queue wait says how much of
 * the wall time was spent waiting for a core. Threads that end between two snapshots take their
 * time with them; the processes measured here keep their threads for the whole phase.
 *
 * @param runNanos  time on a CPU
 * @param waitNanos time runnable, waiting for a CPU
 */
record Schedstat(long runNanos, long waitNanos) {

    static final Schedstat ZERO = new Schedstat(0, 0);

    /** The sums for process {@code pid} now; {@link #ZERO} where {@code /proc} has no schedstat. */
    static Schedstat of(long pid) {
        long run = 0;
        long wait = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc", Long.toString(pid), "task"))) {
            for (Path task : tasks) {
                String[] f;
                try {
                    f = Files.readString(task.resolve("schedstat")).trim().split("\\s+");
                } catch (NoSuchFileException ended) {
                    continue; // the thread ended while the directory was read
                }
                run += Long.parseLong(f[0]);
                wait += Long.parseLong(f[1]);
            }
        } catch (IOException | RuntimeException e) {
            return ZERO;
        }
        return new Schedstat(run, wait);
    }

    Schedstat plus(Schedstat o) {
        return new Schedstat(runNanos + o.runNanos, waitNanos + o.waitNanos);
    }

    Schedstat minus(Schedstat o) {
        return new Schedstat(runNanos - o.runNanos, waitNanos - o.waitNanos);
    }
}
