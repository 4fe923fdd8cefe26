package io.orbitkv.bench.serve;

import io.orbitkv.testkit.ChildProcesses;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * A pool of {@link ServeEngineProcess} JVMs and the open-loop load generator in front of them.
 *
 * <p>Owns the engine processes (stopped by {@link #close()}). Thread model: {@link #arm} and
 * {@link #run} are called by one driver thread; during {@link #run} one platform thread per engine
 * talks to its process, and the driver thread dispatches. Invariants: at most {@code concurrency}
 * requests are admitted (queued at an engine or being served) at once; requests are admitted in
 * arrival order, and a request that arrives while the pool is full waits, its wait counted in its
 * TTFT (arrival is the scheduled time, not when the driver got to it: open loop); each engine
 * serves one request at a time, in admission order; every queue is bounded by the run's request
 * count.
 *
 * <p>Design note: requests are routed by session affinity (the request's affinity key modulo the
 * pool size), as a sticky load balancer in front of llama.cpp servers does, for every arm: without
 * it an engine-local cache would see a session's earlier turns only by chance (1 in N), and the
 * comparison would be about routing, not about where the KV state lives.
 */
final class EnginePool implements AutoCloseable {

    /**
     * What one request of a run did. {@code ttftNanos} and {@code e2eNanos} are from its arrival;
     * {@code waitNanos} from arrival to admission into the pool, {@code queueNanos} from arrival to
     * the start of its service at the engine, {@code afterFirstTokenNanos} from the first token to
     * the end (the remaining decode steps and the publish of the new pages, which keep the engine
     * busy before its next request).
     */
    record Result(ServeRequest request, int engine, String outcome, long ttftNanos, long e2eNanos, long waitNanos,
                  long queueNanos, long afterFirstTokenNanos, int restoredTokens, String source, long logitsHash,
                  int generatedTokens) {
        boolean served() {
            return outcome.equals("SERVED");
        }
    }

    private final List<Worker> workers = new ArrayList<>();

    private static final class Worker {
        final int index;
        final Process process;
        final BufferedWriter in;
        final BufferedReader out;
        final Path log;

        Worker(int index, Process process, Path log) {
            this.index = index;
            this.process = process;
            this.log = log;
            this.in = new BufferedWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8));
            this.out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        }

        String call(String command) throws IOException {
            in.write(command);
            in.newLine();
            in.flush();
            String reply = out.readLine();
            if (reply == null || reply.startsWith("ERR")) {
                throw new IOException("engine " + index + " answered " + reply + " to " + head(command) + "; its log: "
                        + tail(log));
            }
            return reply;
        }
    }

    private EnginePool() {
    }

    /**
     * Starts {@code engines} engine processes running {@code java jvmOptions ServeEngineProcess args}
     * on this JVM's class path, logs under {@code logDir}, and waits until each printed READY.
     */
    static EnginePool start(int engines, List<String> jvmOptions, List<String> args, Path logDir) throws IOException {
        if (engines < 1) throw new IllegalArgumentException("a pool needs an engine");
        Files.createDirectories(logDir);
        EnginePool pool = new EnginePool();
        try {
            for (int i = 0; i < engines; i++) {
                List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                        "--enable-native-access=ALL-UNNAMED"));
                cmd.addAll(jvmOptions);
                cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), ServeEngineProcess.class.getName()));
                cmd.addAll(args);
                Path log = logDir.resolve("engine-" + i + ".log");
                Process p = ChildProcesses.adopt(new ProcessBuilder(cmd).redirectError(log.toFile()).start());
                pool.workers.add(new Worker(i, p, log));
            }
            for (Worker w : pool.workers) {
                String ready = w.out.readLine();
                if (!"READY".equals(ready)) throw new IOException("engine " + w.index + " did not start (" + ready + "): " + tail(w.log));
            }
            return pool;
        } catch (IOException | RuntimeException e) {
            pool.close();
            throw e;
        }
    }

    int size() {
        return workers.size();
    }

    /** Sends {@code ARM ...} (the command for engine {@code i}) to every engine. */
    void arm(java.util.function.IntFunction<String> command) throws IOException {
        for (Worker w : workers) w.call("ARM " + command.apply(w.index));
    }

    /**
     * {@code FLUSH} to every engine: waits until each engine's queued publishes settled; returns
     * the pages published (sealed or present) and dropped, summed, and the largest queue high-water in bytes.
     */
    long[] flush() throws IOException {
        long[] out = new long[3];
        for (Worker w : workers) {
            String[] f = w.call("FLUSH").split(" ");
            out[0] += Long.parseLong(f[1]);
            out[1] += Long.parseLong(f[2]);
            out[2] = Math.max(out[2], Long.parseLong(f[3]));
        }
        return out;
    }

    /** {@code STATS} of every engine: pinned, entries, used bytes, hits, evictions (summed). */
    long[] stats() throws IOException {
        long[] sum = new long[5];
        for (Worker w : workers) {
            String[] f = w.call("STATS").split(" ");
            for (int i = 0; i < sum.length; i++) sum[i] += Long.parseLong(f[i + 1]);
        }
        return sum;
    }

    /**
     * Serves {@code requests} open-loop: request {@code r} arrives at start + its offset x
     * {@code timeScale}; at most {@code concurrency} in flight. Returns one result per request, in
     * id order, once all are done.
     */
    List<Result> run(List<ServeRequest> requests, int concurrency, double timeScale) throws IOException, InterruptedException {
        return run(requests, concurrency, timeScale, byAffinity(workers.size()));
    }

    /**
     * Where each request of a run goes, and who hears that it was served. {@link #choose} is
     * called on the driver thread when the request is admitted (at its arrival unless the pool is
     * full); {@link #served} on the engine's thread right after the engine answered, before the
     * engine takes its next request.
     */
    interface Dispatcher {
        /** The engine (0 .. size-1) that serves {@code request}. */
        int choose(ServeRequest request) throws IOException;

        /** {@code result} of a request this dispatcher chose an engine for. */
        void served(Result result) throws IOException;
    }

    /** Session affinity: the request's affinity key modulo the pool size (see the class comment). */
    static Dispatcher byAffinity(int engines) {
        return new Dispatcher() {
            @Override
            public int choose(ServeRequest request) {
                return (int) Math.floorMod(request.affinity(), (long) engines);
            }

            @Override
            public void served(Result result) {
                // nothing learns from a sticky choice
            }
        };
    }

    /** As {@link #run(List, int, double)}, each request sent where {@code dispatcher} chooses. */
    List<Result> run(List<ServeRequest> requests, int concurrency, double timeScale, Dispatcher dispatcher)
            throws IOException, InterruptedException {
        if (concurrency < 1) throw new IllegalArgumentException("concurrency must be >= 1");
        Semaphore inFlight = new Semaphore(concurrency);
        List<BlockingQueue<Admitted>> queues = new ArrayList<>();
        for (int i = 0; i < workers.size(); i++) queues.add(new ArrayBlockingQueue<>(requests.size() + 1));
        ConcurrentLinkedQueue<Result> results = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        for (Worker w : workers) {
            BlockingQueue<Admitted> q = queues.get(w.index);
            threads.add(Thread.ofPlatform().name("serve-engine-" + w.index).start(() -> {
                try {
                    for (Admitted a; (a = q.take()).request() != null; ) {
                        try {
                            Result served = serve(w, a);
                            results.add(served);
                            dispatcher.served(served);
                        } finally {
                            inFlight.release();
                        }
                    }
                } catch (IOException | RuntimeException e) {
                    failures.add(e);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt(); // ends the thread; run() sees the missing results
                }
            }));
        }
        long start = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(20);
        try {
            for (ServeRequest r : requests) {
                long arrival = start + Math.round(r.arrivalOffsetNanos() * timeScale);
                long now;
                while ((now = System.nanoTime()) < arrival) LockSupport.parkNanos(arrival - now);
                while (!inFlight.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                    if (!failures.isEmpty()) throw new IOException("an engine failed", failures.peek());
                }
                int engine = dispatcher.choose(r);
                if (engine < 0 || engine >= workers.size()) {
                    throw new IllegalStateException("request " + r.id() + " dispatched to engine " + engine + " of " + workers.size());
                }
                queues.get(engine).add(new Admitted(r, arrival, System.nanoTime()));
            }
        } finally {
            for (BlockingQueue<Admitted> q : queues) q.add(new Admitted(null, 0, 0));
            for (Thread t : threads) t.join();
        }
        if (!failures.isEmpty()) throw new IOException("an engine failed", failures.peek());
        if (results.size() != requests.size()) throw new IllegalStateException(results.size() + " results of " + requests.size());
        List<Result> sorted = new ArrayList<>(results);
        sorted.sort(java.util.Comparator.comparingInt(x -> x.request().id()));
        return sorted;
    }

    private record Admitted(ServeRequest request, long arrivalNanos, long admittedNanos) {
    }

    private static Result serve(Worker w, Admitted a) throws IOException {
        ServeRequest r = a.request();
        StringBuilder cmd = new StringBuilder(16 + 6 * r.prompt().length).append("REQ ").append(r.id()).append(' ')
                .append(a.arrivalNanos()).append(' ').append(r.newTokens()).append(' ').append(r.cancelAt()).append(' ');
        for (int i = 0; i < r.prompt().length; i++) cmd.append(i == 0 ? "" : ",").append(r.prompt()[i]);
        String[] f = w.call(cmd.toString()).split(" ");
        if (!f[0].equals("DONE") || !f[1].equals(Integer.toString(r.id()))) {
            throw new IOException("engine " + w.index + " answered " + String.join(" ", f) + " to request " + r.id());
        }
        long done = Long.parseLong(f[4]);
        int generated = f[8].equals("-") ? 0 : f[8].split(",").length;
        long firstToken = Long.parseLong(f[10]);
        return new Result(r, w.index, f[2], Long.parseLong(f[3]), done - a.arrivalNanos(),
                a.admittedNanos() - a.arrivalNanos(), Long.parseLong(f[9]) - a.arrivalNanos(),
                firstToken == 0 ? 0 : done - firstToken, Integer.parseInt(f[5]), f[6], Long.parseLong(f[7]), generated);
    }

    private static String head(String command) {
        return command.length() > 60 ? command.substring(0, 60) + "..." : command;
    }

    static String tail(Path log) {
        try {
            String s = Files.readString(log);
            return s.length() > 2000 ? s.substring(s.length() - 2000) : s;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void close() {
        for (Worker w : workers) {
            try {
                w.in.write("QUIT");
                w.in.newLine();
                w.in.flush();
            } catch (IOException e) {
                // the process is gone already: nothing to tell it
            }
        }
        for (Worker w : workers) {
            try {
                if (!w.process.waitFor(10, TimeUnit.SECONDS)) w.process.destroyForcibly().waitFor();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt(); // the caller sees the interrupt; the process is killed
                w.process.destroyForcibly();
            }
        }
    }
}
