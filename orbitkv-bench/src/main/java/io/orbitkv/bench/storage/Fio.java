package io.orbitkv.bench.storage;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * Runs {@code fio} as the SSD baseline and reads its terse (v3) output.
 *
 * <p>Stateless; {@link #run} blocks the calling thread for the job's duration plus fio's start
 * (~0.1 s). An engine fio cannot use (not compiled in, refused by the kernel) is an expected
 * outcome, {@link Result.Unavailable}, not an exception.
 *
 * <p>Design note: terse output is one ';'-separated line per group, stable since fio 2.x, so no
 * JSON library is needed. Throughput is computed from the bytes moved and the runtime (fields
 * 6/9 for reads, 47/50 for writes, 1-based) rather than from fio's rounded bandwidth field. Depth
 * maps onto the engine the way fio users mean it: a synchronous engine ({@code psync}) has one
 * I/O in flight per job, so depth D is D jobs; the asynchronous engines ({@code libaio},
 * {@code io_uring}) get one job with {@code --iodepth=D}.
 */
public final class Fio {

    /** fio I/O engines tried, best first by expectation. */
    public enum Engine {
        IO_URING("io_uring"), LIBAIO("libaio"), PSYNC("psync");

        private final String fioName;

        Engine(String fioName) {
            this.fioName = fioName;
        }

        public String fioName() {
            return fioName;
        }

        boolean synchronous() {
            return switch (this) {
                case PSYNC -> true;
                case IO_URING, LIBAIO -> false;
            };
        }
    }

    /** Access pattern. */
    public enum Pattern {
        RANDREAD("randread"), WRITE("write");

        private final String fioName;

        Pattern(String fioName) {
            this.fioName = fioName;
        }
    }

    /**
     * One fio job over {@code [offsetBytes, offsetBytes + sizeBytes)} of {@code file}, O_DIRECT.
     *
     * @param blockBytes fio's {@code --bs}; random offsets are multiples of it from {@code offsetBytes}
     * @param depth      I/Os in flight (jobs for a synchronous engine)
     * @param seconds    time-based runtime
     */
    public record Job(Path file, long offsetBytes, long sizeBytes, long blockBytes, int depth, Pattern pattern,
                      int seconds) {
        public Job {
            Objects.requireNonNull(file, "file");
            Objects.requireNonNull(pattern, "pattern");
            if (blockBytes <= 0 || blockBytes % 4096 != 0) throw new IllegalArgumentException("bs: " + blockBytes);
            if (offsetBytes < 0 || offsetBytes % 4096 != 0) throw new IllegalArgumentException("offset: " + offsetBytes);
            if (sizeBytes < blockBytes) throw new IllegalArgumentException("size below bs: " + sizeBytes);
            if (depth <= 0 || seconds <= 0) throw new IllegalArgumentException("depth and seconds must be positive");
        }
    }

    /** What one fio run gave. */
    public sealed interface Result {
        Engine engine();

        /** fio ran: bytes moved per second over the whole group. */
        record Measured(Engine engine, double bytesPerSecond) implements Result {}

        /** fio could not run this engine; {@code reason} is the tail of its output. */
        record Unavailable(Engine engine, String reason) implements Result {}
    }

    private static final int TERSE_VERSION = 3;
    private static final int READ_KB = 5;
    private static final int WRITE_KB = 46;
    private static final int RUNTIME_AFTER_KB = 3;
    private static final long EXTRA_WAIT_SECONDS = 30;

    private Fio() {}

    /** The command line for {@code job} on {@code engine}. */
    public static List<String> command(Job job, Engine engine) {
        List<String> cmd = new ArrayList<>(List.of("fio", "--name=orbitkv-baseline",
                "--filename=" + job.file(),
                "--offset=" + job.offsetBytes(), "--size=" + job.sizeBytes(),
                "--bs=" + job.blockBytes(), "--rw=" + job.pattern().fioName,
                "--direct=1", "--ioengine=" + engine.fioName(),
                "--time_based", "--runtime=" + job.seconds() + "s",
                "--norandommap", "--randrepeat=0", "--group_reporting", "--thread",
                "--output-format=terse", "--terse-version=" + TERSE_VERSION));
        if (engine.synchronous()) {
            cmd.add("--numjobs=" + job.depth());
            cmd.add("--iodepth=1");
        } else {
            cmd.add("--numjobs=1");
            cmd.add("--iodepth=" + job.depth());
        }
        return cmd;
    }

    /** Runs {@code job} with {@code engine}; a failed run is {@link Result.Unavailable}. */
    public static Result run(Job job, Engine engine) throws IOException {
        Process p = new ProcessBuilder(command(job, engine)).redirectErrorStream(true).start();
        String out;
        try {
            out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(job.seconds() + EXTRA_WAIT_SECONDS, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return new Result.Unavailable(engine, "fio did not finish");
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while fio ran", e);
        }
        double bps = p.exitValue() == 0 ? parseBytesPerSecond(out, job.pattern()) : Double.NaN;
        if (Double.isNaN(bps) || bps <= 0) {
            String tail = out.strip();
            return new Result.Unavailable(engine, tail.substring(Math.max(0, tail.length() - 200)).replace('\n', ' '));
        }
        return new Result.Measured(engine, bps);
    }

    /**
     * Bytes per second of {@code pattern} in fio's terse v3 output, or NaN when no result line
     * is found. Lines that are not results (warnings) are skipped.
     */
    public static double parseBytesPerSecond(String terse, Pattern pattern) {
        int kbField = switch (pattern) {
            case RANDREAD -> READ_KB;
            case WRITE -> WRITE_KB;
        };
        for (String line : terse.split("\n")) {
            String[] f = line.strip().split(";");
            if (f.length <= WRITE_KB + RUNTIME_AFTER_KB || !f[0].equals(Integer.toString(TERSE_VERSION))) continue;
            long kib = Long.parseLong(f[kbField]);
            long runtimeMs = Long.parseLong(f[kbField + RUNTIME_AFTER_KB]);
            if (runtimeMs <= 0) return Double.NaN;
            return kib * 1024.0 / (runtimeMs / 1000.0);
        }
        return Double.NaN;
    }

    /** fio's version string, or {@code "fio not found"}. */
    public static String version() {
        try {
            Process p = new ProcessBuilder("fio", "--version").redirectErrorStream(true).start();
            String v = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            return p.waitFor() == 0 ? v : "fio not usable";
        } catch (IOException e) {
            return "fio not found";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "fio not usable";
        }
    }

    static String describe(Job job) {
        return String.format(Locale.ROOT, "%s bs=%d depth=%d offset=%d size=%d", job.pattern().fioName,
                job.blockBytes(), job.depth(), job.offsetBytes(), job.sizeBytes());
    }
}
