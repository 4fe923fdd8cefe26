package io.orbitkv.bench.trace;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.client.Region;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.PageState;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.HdrHistogram.Histogram;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * Replays a trace against a real Manager through its engine channel, the way an engine would
 * serve each request: QUERY the request's block chain (ENGINE_RESTORE), RESTORE the hit prefix
 * into the worker's region, check every restored byte against the block's page pattern
 * ({@link PagePattern}), RELEASE, then PUBLISH the blocks past the hit. Counts hits exactly as
 * {@link PrefixSimulator} does ({@link TraceRequest#hitTokens}).
 *
 * <p>Thread model: {@code concurrency} platform threads, each with its own client connection
 * (its own engine instance in the one namespace), region and staging memory; they take requests
 * in trace order from one shared counter and each waits for its request's arrival time, scaled
 * by {@code speedup} (0: no waiting), before serving it. Results are merged after all finish.
 *
 * <p>Hit semantics: the QUERY asks for {@code blocks * blockTokens + 1} prompt tokens, so the
 * Manager's final-token rule (one prompt token is always computed) never cuts the chain, and its
 * {@code boundary_tokens} is a whole number of blocks; the replay then counts that many blocks
 * with the request's real {@code input_length}, as the simulators do. Pages of a hit that were
 * RESERVED in a PENDING first answer were staged from SSD; the others came from DRAM.
 *
 * <p>Design note: the region's hit pages are zeroed before each RESTORE, so a page the Manager
 * did not write cannot pass the check on bytes an earlier request left there.
 */
public final class TraceReplay {

    /** Group id of the replay's one full-attention state group. */
    static final int GROUP = 0;

    /**
     * @param blockTokens  tokens per trace block (512 in the Mooncake traces)
     * @param blockBytes   bytes of each block's page, a multiple of 8
     * @param speedup      trace time divided by this is replay time; 0 replays as fast as it can
     * @param concurrency  client connections serving requests at once
     * @param regionDir    directory (tmpfs) for the workers' region files
     * @param replyTimeout how long a client waits for one reply
     */
    public record Options(int blockTokens, int blockBytes, double speedup, int concurrency, Path regionDir,
                          Duration replyTimeout) {
        public Options {
            if (blockTokens < 1) throw new IllegalArgumentException("blockTokens must be >= 1: " + blockTokens);
            if (blockBytes < 8 || blockBytes % 8 != 0) {
                throw new IllegalArgumentException("blockBytes must be a positive multiple of 8: " + blockBytes);
            }
            if (speedup < 0 || Double.isNaN(speedup)) throw new IllegalArgumentException("speedup must be >= 0: " + speedup);
            if (concurrency < 1 || concurrency > 64) {
                throw new IllegalArgumentException("concurrency must be in [1, 64]: " + concurrency);
            }
        }
    }

    /**
     * What one replay served and measured.
     *
     * @param hitBlocks       per request (trace order), blocks of its hit prefix
     * @param ssdHitBlocks    hit blocks staged from SSD (the rest of the hit came from DRAM)
     * @param wrongBytes      restored bytes that differed from the published pattern; must be 0
     * @param publishDiscarded blocks whose PUBLISH lost to a concurrent publish of the same block (DISCARDED)
     * @param publishRefused  blocks whose PUBLISH was refused or lost (NO_SPACE, BUSY, NOT_FOUND)
     * @param query           QUERY until FINAL (including any SSD staging), nanoseconds
     * @param restore         RESTORE until RESTORE_DONE, nanoseconds, for requests with a hit
     * @param startLag        how late requests started after their scaled arrival time, nanoseconds
     */
    public record Result(long requests, long promptTokens, long hitTokens, long ssdHitTokens, long hitBlocksTotal,
                         long ssdHitBlocks, long restoredBytes, long publishedBytes, long publishedBlocks,
                         long publishDiscarded, long publishRefused, long wrongBytes, long wrongPages, Histogram query, Histogram restore,
                         Histogram startLag, long wallNanos, double traceSeconds, double speedup, int[] hitBlocks) {
        public Result {
            hitBlocks = hitBlocks.clone();
        }

        public double hitRatio() {
            return promptTokens == 0 ? 0 : (double) hitTokens / promptTokens;
        }

        public double ssdHitRatio() {
            return promptTokens == 0 ? 0 : (double) ssdHitTokens / promptTokens;
        }

        public double dramHitRatio() {
            return hitRatio() - ssdHitRatio();
        }

        /** Requests per second the replay offered (the trace's rate times the speedup); infinite unpaced. */
        public double offeredRate() {
            if (speedup == 0) return Double.POSITIVE_INFINITY;
            return traceSeconds <= 0 ? Double.POSITIVE_INFINITY : requests / (traceSeconds / speedup);
        }

        /** Requests per second it served. */
        public double achievedRate() {
            return requests / (wallNanos / 1e9);
        }

        public int hitBlocksOf(int i) {
            return hitBlocks[i];
        }
    }

    /** The replay's namespace: page size = block tokens, one full-attention group. */
    public static Namespace namespace(int blockTokens, int blockBytes) {
        return new Namespace("trace-replay", "b" + blockBytes, "sha256:w", "sha256:t", "", "bf16", "nhd", blockTokens,
                1, 0, 1, 0, 1);
    }

    private TraceReplay() {}

    public static Result run(Path socket, List<TraceRequest> trace, Options o) throws Exception {
        if (trace.isEmpty()) throw new IllegalArgumentException("empty trace");
        int maxBlocks = trace.stream().mapToInt(TraceRequest::blocks).max().orElseThrow();
        Files.createDirectories(o.regionDir());
        Namespace ns = namespace(o.blockTokens(), o.blockBytes());
        RecoveryContract contract = new RecoveryContract(o.blockTokens(), List.of(new StateGroup.Full(GROUP)));
        long firstMs = trace.getFirst().timestampMs();
        double traceSeconds = (trace.getLast().timestampMs() - firstMs) / 1000.0;
        int[] hitBlocks = new int[trace.size()];
        AtomicInteger next = new AtomicInteger();
        List<Future<Worker>> done = new ArrayList<>();
        long t0 = System.nanoTime();
        try (ExecutorService pool = Executors.newFixedThreadPool(o.concurrency())) {
            for (int w = 0; w < o.concurrency(); w++) {
                Worker worker = new Worker(w, socket, ns, contract, o, maxBlocks);
                done.add(pool.submit(() -> {
                    worker.serve(trace, next, hitBlocks, t0, firstMs);
                    return worker;
                }));
            }
            Worker total = null;
            for (Future<Worker> f : done) {
                Worker w = f.get();
                if (total == null) total = w;
                else total.add(w);
            }
            long wall = System.nanoTime() - t0;
            Worker t = java.util.Objects.requireNonNull(total);
            return new Result(trace.size(), t.promptTokens, t.hitTokens, t.ssdHitTokens, t.hitBlocks, t.ssdHitBlocks,
                    t.restoredBytes, t.publishedBlocks * o.blockBytes(), t.publishedBlocks, t.publishDiscarded,
                    t.publishRefused,
                    t.wrongBytes, t.wrongPages, t.query, t.restore, t.startLag, wall, traceSeconds, o.speedup(),
                    hitBlocks);
        }
    }

    /** One connection's state and counters; confined to its thread until merged. */
    private static final class Worker {
        private final int id;
        private final Path socket;
        private final Namespace ns;
        private final RecoveryContract contract;
        private final Options o;
        private final int maxBlocks;
        final Histogram query = histogram();
        final Histogram restore = histogram();
        final Histogram startLag = histogram();
        long promptTokens;
        long hitTokens;
        long ssdHitTokens;
        long hitBlocks;
        long ssdHitBlocks;
        long restoredBytes;
        long publishedBlocks;
        long publishDiscarded;
        long publishRefused;
        long wrongBytes;
        long wrongPages;

        Worker(int id, Path socket, Namespace ns, RecoveryContract contract, Options o, int maxBlocks) {
            this.id = id;
            this.socket = socket;
            this.ns = ns;
            this.contract = contract;
            this.o = o;
            this.maxBlocks = maxBlocks;
        }

        void serve(List<TraceRequest> trace, AtomicInteger next, int[] hitOut, long t0, long firstMs) throws Exception {
            Path regionFile = o.regionDir().resolve("region-" + id);
            Files.deleteIfExists(regionFile);
            try (OrbitKvClient client = OrbitKvClient.connect(socket, o.replyTimeout());
                 Arena arena = Arena.ofConfined()) {
                client.register("trace-worker-" + id, 1, ns, contract);
                Region region = client.registerRegion(regionFile, o.blockBytes(), maxBlocks);
                MemorySegment staging = arena.allocate((long) maxBlocks * o.blockBytes(), 4096);
                long op = 0;
                for (int i; (i = next.getAndIncrement()) < trace.size(); ) {
                    TraceRequest r = trace.get(i);
                    long due = o.speedup() == 0 ? t0
                            : t0 + (long) ((r.timestampMs() - firstMs) * 1e6 / o.speedup());
                    for (long wait; (wait = due - System.nanoTime()) > 0; ) LockSupport.parkNanos(wait);
                    startLag.recordValue(Math.max(0, System.nanoTime() - due));
                    hitOut[i] = serveOne(client, region, staging, r, ++op);
                }
            } finally {
                Files.deleteIfExists(regionFile);
            }
        }

        /** Serves one request; returns its hit blocks. */
        private int serveOne(OrbitKvClient client, Region region, MemorySegment staging, TraceRequest r, long op) {
            int n = r.blocks();
            List<byte[]> names = new ArrayList<>(n);
            for (int i = 0; i < n; i++) names.add(PagePattern.blockHash(r.block(i)));
            Request.Query q = new Request.Query(op, 0, CompletionTarget.ENGINE_RESTORE, (long) n * o.blockTokens() + 1, 0,
                    List.of(new Request.QueryGroup(GROUP, KeyForm.BLOCK_HASH, Hashes.of(names))));
            long q0 = System.nanoTime();
            Reply.QueryResult first = client.query(q);
            boolean[] staged = stagedPages(first, n);
            Reply.QueryResult result = client.awaitSettled(first);
            query.recordValue(System.nanoTime() - q0);
            int k = 0;
            try {
                if (result.hit()) {
                    if (result.boundaryTokens() % o.blockTokens() != 0 || result.boundaryTokens() / o.blockTokens() > n) {
                        throw new IllegalStateException("line " + r.line() + ": boundary " + result.boundaryTokens()
                                + " is not a whole prefix of " + n + " blocks of " + o.blockTokens() + " tokens");
                    }
                    k = (int) (result.boundaryTokens() / o.blockTokens());
                }
                if (k > 0) restoreAndCheck(client, region, r, result, op, k);
            } finally {
                client.release(op);
            }
            int ssd = 0;
            for (int i = 0; i < k; i++) {
                if (!staged[i]) continue;
                ssd++;
                ssdHitTokens += r.hitTokens(i + 1, o.blockTokens()) - r.hitTokens(i, o.blockTokens());
            }
            promptTokens += r.inputLength();
            hitTokens += r.hitTokens(k, o.blockTokens());
            hitBlocks += k;
            ssdHitBlocks += ssd;
            publishMissing(client, staging, r, k);
            return k;
        }

        private void restoreAndCheck(OrbitKvClient client, Region region, TraceRequest r, Reply.QueryResult result,
                                     long op, int k) {
            List<Request.RestorePage> mapping = OrbitKvClient.residentPages(result, 0);
            if (mapping.size() != k) {
                throw new IllegalStateException("line " + r.line() + ": a hit of " + k + " blocks leased "
                        + mapping.size() + " pages");
            }
            for (int i = 0; i < k; i++) {
                if (mapping.get(i).sourcePage() != i) {
                    throw new IllegalStateException("line " + r.line() + ": hit page " + i + " is source page "
                            + mapping.get(i).sourcePage());
                }
                region.page(i).fill((byte) 0);
            }
            long r0 = System.nanoTime();
            Reply.Completion c = client.restore(op, region, mapping);
            restore.recordValue(System.nanoTime() - r0);
            if (c.outcome() != Reply.Settled.OK) {
                throw new IllegalStateException("line " + r.line() + ": RESTORE of " + k + " pages: " + c.outcome());
            }
            for (int i = 0; i < k; i++) {
                long wrong = PagePattern.wrongBytes(region.page(i).asSlice(0, o.blockBytes()), r.block(i));
                if (wrong > 0) {
                    wrongBytes += wrong;
                    wrongPages++;
                    System.err.println("trace: WRONG BYTES: line " + r.line() + " block " + i + " (id " + r.block(i)
                            + "): " + wrong + " of " + o.blockBytes() + " bytes differ");
                }
            }
            restoredBytes += (long) k * o.blockBytes();
        }

        private void publishMissing(OrbitKvClient client, MemorySegment staging, TraceRequest r, int k) {
            if (k == r.blocks()) return;
            List<PageToPublish> pages = new ArrayList<>(r.blocks() - k);
            for (int i = k; i < r.blocks(); i++) {
                MemorySegment image = staging.asSlice((long) (i - k) * o.blockBytes(), o.blockBytes());
                PagePattern.fill(image, r.block(i));
                pages.add(PageToPublish.ofBlockHash(GROUP, PagePattern.blockHash(r.block(i)), image));
            }
            for (PublishOutcome out : client.publish(pages)) {
                switch (out) {
                    case SEALED -> publishedBlocks++;
                    case ALREADY_RESIDENT -> { }
                    case DISCARDED -> publishDiscarded++;
                    case NO_SPACE, BUSY, NOT_FOUND -> publishRefused++;
                }
            }
        }

        /** For each page of the chain, whether a PENDING first answer had it RESERVED (being staged from SSD). */
        private static boolean[] stagedPages(Reply.QueryResult first, int n) {
            boolean[] staged = new boolean[n];
            if (first.status() != QueryStatus.PENDING) return staged;
            for (Reply.GroupResult g : first.groups()) {
                for (Reply.Span s : g.spans()) {
                    for (int i = 0; i < s.pages().size(); i++) {
                        long page = s.firstPage() + i;
                        if (page < n && s.pages().get(i).state() == PageState.RESERVED) staged[(int) page] = true;
                    }
                }
            }
            return staged;
        }

        void add(Worker w) {
            query.add(w.query);
            restore.add(w.restore);
            startLag.add(w.startLag);
            promptTokens += w.promptTokens;
            hitTokens += w.hitTokens;
            ssdHitTokens += w.ssdHitTokens;
            hitBlocks += w.hitBlocks;
            ssdHitBlocks += w.ssdHitBlocks;
            restoredBytes += w.restoredBytes;
            publishedBlocks += w.publishedBlocks;
            publishDiscarded += w.publishDiscarded;
            publishRefused += w.publishRefused;
            wrongBytes += w.wrongBytes;
            wrongPages += w.wrongPages;
        }

        private static Histogram histogram() {
            return new Histogram(3_600_000_000_000L, 3);
        }
    }
}
