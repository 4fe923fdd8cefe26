package io.orbitkv.bench.serve;

import io.orbitkv.bench.trace.TraceRequest;
import io.orbitkv.bench.ttft.Workload;
import io.orbitkv.testmodel.ByteFallbackVocab;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * The serving workload: a seeded list of requests with open-loop arrival offsets, either
 * synthetic (sessions, shared system prompts, multi-turn, branches) or from a trace.
 *
 * <p>Stateless factory of immutable lists; a pure function of its parameters and seed.
 *
 * <p>Synthetic: session {@code s} belongs to group {@code s % groups}, whose system prompt it
 * shares. Turn {@code t}'s prompt is the conversation so far (system prompt, then for each earlier
 * turn its user message and an assistant text) plus a new user message. The assistant texts are
 * seeded text, not the model's output, so every arm sends the same prompts whatever it generated
 * and an open-loop next turn can arrive before the previous one finished (as a trace's turns do).
 * A branch (share {@code branchShare} of the turns after the first) forks from an earlier turn
 * {@code j}: the conversation through turn {@code j}'s assistant text plus another user message,
 * a partial reuse of the main line. Requests go round by round (turn 1 of every session in a
 * seeded order, then turn 2, ...), each branch right after its turn. Arrival offsets are a
 * unit-rate Poisson process (exponential gaps with mean 1 s); a run divides them by its rate.
 * A share {@code cancelShare} of the requests is cancelled, alternately at restore and prefill.
 *
 * <p>Trace: each Mooncake record (timestamp, input length, output length, hash ids of 512-token
 * blocks) becomes one request whose prompt is BOS and the blocks' seeded token texts, each block
 * scaled to {@code blockTokens}, cut to the input length scaled the same way; the output length
 * is scaled and capped at {@code maxNewTokens}; arrivals are the timestamps divided by
 * {@code speedup}. Two records sharing leading hash ids share those blocks' tokens, so the trace's
 * prefix reuse carries over.
 */
final class ServeWorkload {

    /** The blocks of the Mooncake trace format: 512 tokens each. */
    static final int TRACE_BLOCK_TOKENS = 512;

    private ServeWorkload() {
    }

    /** Sizes of a synthetic workload. */
    record Shape(String name, int groups, int sessions, int turns, int systemTokens, int userTokens,
                 int assistantTokens, int newTokens, double branchShare, double cancelShare, long seed) {
        Shape {
            if (groups < 1 || sessions < 1 || turns < 1 || systemTokens < 2 || userTokens < 1 || assistantTokens < 1
                    || newTokens < 1) {
                throw new IllegalArgumentException("workload " + name + ": sizes must be positive (system prompt >= 2)");
            }
            if (!(branchShare >= 0 && branchShare <= 1) || !(cancelShare >= 0 && cancelShare <= 1)) {
                throw new IllegalArgumentException("workload " + name + ": shares must be in [0, 1]");
            }
        }

        /** The longest prompt plus its answer: the context a run needs. */
        int maxContextTokens() {
            return systemTokens + turns * userTokens + (turns - 1) * assistantTokens + newTokens;
        }
    }

    static List<ServeRequest> synthetic(Shape shape) {
        SplittableRandom random = new SplittableRandom(shape.seed());
        int[][] system = new int[shape.groups()][];
        for (int g = 0; g < system.length; g++) {
            system[g] = ByteFallbackVocab.encode(Workload.text(new SplittableRandom(shape.seed() * 31 + g),
                    shape.systemTokens() - 1));
        }
        // contexts[s][t]: session s's conversation through turn t's assistant text
        int[][][] contexts = new int[shape.sessions()][shape.turns()][];
        List<ServeRequest> out = new ArrayList<>();
        long clock = 0;
        int[] order = new int[shape.sessions()];
        for (int i = 0; i < order.length; i++) order[i] = i;
        for (int t = 0; t < shape.turns(); t++) {
            shuffle(order, random);
            for (int s : order) {
                int[] history = t == 0 ? system[s % shape.groups()] : contexts[s][t - 1];
                int[] prompt = concat(history, words(shape.seed(), s, t, 0, shape.userTokens()));
                contexts[s][t] = concat(prompt, words(shape.seed(), s, t, 1, shape.assistantTokens()));
                clock += gap(random);
                out.add(new ServeRequest(out.size(), "turn", s, prompt, shape.newTokens(), ServeRequest.CancelAt.NONE, clock));
                if (t > 0 && random.nextDouble() < shape.branchShare()) {
                    int from = random.nextInt(t);
                    int[] branch = concat(contexts[s][from], words(shape.seed(), s, t, 2, shape.userTokens()));
                    clock += gap(random);
                    out.add(new ServeRequest(out.size(), "branch", s, branch, shape.newTokens(), ServeRequest.CancelAt.NONE, clock));
                }
            }
        }
        return withCancels(out, shape.cancelShare(), random);
    }

    /**
     * The trace's requests, scaled: {@code blockTokens} tokens per 512-token block, prompts of at
     * most {@code maxPromptTokens}, outputs of at most {@code maxNewTokens}.
     */
    static List<ServeRequest> trace(List<TraceRequest> records, int blockTokens, int maxPromptTokens, int maxNewTokens,
                                    double speedup, double cancelShare, long seed) {
        if (records.isEmpty()) throw new IllegalArgumentException("the trace has no requests");
        if (blockTokens < 1 || maxPromptTokens < 2 || maxNewTokens < 1 || !(speedup > 0)) {
            throw new IllegalArgumentException("trace scaling: block tokens, prompt and output caps and speedup must be positive");
        }
        double scale = (double) blockTokens / TRACE_BLOCK_TOKENS;
        Map<Long, int[]> blocks = new HashMap<>();
        List<ServeRequest> out = new ArrayList<>(records.size());
        long t0 = records.getFirst().timestampMs();
        for (TraceRequest r : records) {
            int length = (int) Math.min(maxPromptTokens, Math.max(2, Math.round(r.inputLength() * scale)));
            int[] prompt = new int[length];
            prompt[0] = ByteFallbackVocab.BOS;
            int at = 1;
            for (int b = 0; b < r.blocks() && at < length; b++) {
                long hash = r.block(b);
                int[] block = blocks.computeIfAbsent(hash, h -> ByteFallbackVocab.encodeContinuation(
                        Workload.text(new SplittableRandom(seed ^ (h * 0x9E3779B97F4A7C15L)), blockTokens)));
                int n = Math.min(block.length, length - at);
                System.arraycopy(block, 0, prompt, at, n);
                at += n;
            }
            // a record with fewer blocks than its length: the tail is its own text
            if (at < length) {
                int[] tail = ByteFallbackVocab.encodeContinuation(Workload.text(new SplittableRandom(seed + r.line()),
                        length - at));
                System.arraycopy(tail, 0, prompt, at, length - at);
            }
            int newTokens = (int) Math.min(maxNewTokens, Math.max(1, Math.round(r.outputLength() * scale)));
            long offset = Math.round((r.timestampMs() - t0) * 1e6 / speedup);
            long affinity = r.blocks() > 0 ? r.block(0) : r.line();
            out.add(new ServeRequest(out.size(), "trace", affinity, prompt, newTokens, ServeRequest.CancelAt.NONE, Math.max(0, offset)));
        }
        return withCancels(out, cancelShare, new SplittableRandom(seed));
    }

    /** Marks a seeded share of the requests cancelled, alternately at restore and at prefill. */
    private static List<ServeRequest> withCancels(List<ServeRequest> in, double share, SplittableRandom random) {
        List<ServeRequest> out = new ArrayList<>(in.size());
        int cancelled = 0;
        for (ServeRequest r : in) {
            if (random.nextDouble() < share) {
                ServeRequest.CancelAt at = cancelled++ % 2 == 0 ? ServeRequest.CancelAt.RESTORE : ServeRequest.CancelAt.PREFILL;
                r = new ServeRequest(r.id(), r.kind(), r.affinity(), r.prompt(), r.newTokens(), at, r.arrivalOffsetNanos());
            }
            out.add(r);
        }
        return List.copyOf(out);
    }

    /**
     * Distinct whole-page prefixes over all prompts: the pages a cache would hold for the whole
     * workload (a 64-bit chained hash per page; a collision would undercount by one page).
     */
    static long distinctPages(List<ServeRequest> requests, int pageTokens) {
        java.util.Set<Long> pages = new java.util.HashSet<>();
        for (ServeRequest r : requests) {
            long h = 0x9E3779B97F4A7C15L;
            for (int p = 0; (p + 1) * pageTokens <= r.prompt().length; p++) {
                for (int i = p * pageTokens; i < (p + 1) * pageTokens; i++) h = (h ^ r.prompt()[i]) * 0x100000001B3L;
                pages.add(h);
            }
        }
        return pages.size();
    }

    private static int[] words(long seed, int session, int turn, int part, int tokens) {
        long s = seed + 1_000_003L * (session + 1) + 7919L * turn + part;
        return ByteFallbackVocab.encodeContinuation(Workload.text(new SplittableRandom(s), tokens));
    }

    private static long gap(SplittableRandom random) {
        return Math.round(-Math.log(1 - random.nextDouble()) * 1e9);
    }

    private static void shuffle(int[] a, SplittableRandom random) {
        for (int i = a.length - 1; i > 0; i--) {
            int j = random.nextInt(i + 1);
            int x = a[i];
            a[i] = a[j];
            a[j] = x;
        }
    }

    private static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
