package io.orbitkv.bench.trace;

import java.util.Arrays;

/**
 * One request of a Mooncake-format trace (a JSONL line): its arrival time, prompt and output
 * lengths, and its prompt's block chain. Equal block ids stand for the same block of the same
 * prefix, so a block id also names everything before it.
 *
 * <p>Immutable: the id array is copied in and never handed out (use {@link #block(int)}).
 *
 * @param line         1-based line of the trace file it came from (for messages)
 * @param timestampMs  arrival time in milliseconds from the start of the trace, {@code >= 0}
 * @param inputLength  prompt tokens, {@code >= 1}
 * @param outputLength generated tokens, {@code >= 0}
 */
public record TraceRequest(long line, long timestampMs, long inputLength, long outputLength, long[] hashIds) {

    public TraceRequest {
        if (timestampMs < 0) throw new IllegalArgumentException("timestamp must be >= 0: " + timestampMs);
        if (inputLength < 1) throw new IllegalArgumentException("input_length must be >= 1: " + inputLength);
        if (outputLength < 0) throw new IllegalArgumentException("output_length must be >= 0: " + outputLength);
        if (hashIds.length == 0) throw new IllegalArgumentException("hash_ids must not be empty");
        hashIds = hashIds.clone();
        for (long id : hashIds) {
            if (id < 0) throw new IllegalArgumentException("hash_ids must be >= 0: " + id);
        }
    }

    /** Blocks in the prompt's chain. */
    public int blocks() {
        return hashIds.length;
    }

    /** The id of block {@code i} (0 = the first block of the prompt). */
    public long block(int i) {
        return hashIds[i];
    }

    /**
     * Prompt tokens served by a hit of the first {@code hitBlocks} blocks: {@code hitBlocks}
     * whole blocks of {@code blockTokens}, but never more than the prompt (the last block may be
     * partial). The replay and every simulator count hits with this one function, so their
     * ratios compare.
     */
    public long hitTokens(int hitBlocks, int blockTokens) {
        if (hitBlocks < 0 || hitBlocks > hashIds.length) {
            throw new IllegalArgumentException("hit of " + hitBlocks + " blocks in a chain of " + hashIds.length);
        }
        return Math.min((long) hitBlocks * blockTokens, inputLength);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TraceRequest r && line == r.line && timestampMs == r.timestampMs
                && inputLength == r.inputLength && outputLength == r.outputLength && Arrays.equals(hashIds, r.hashIds);
    }

    @Override
    public int hashCode() {
        return Long.hashCode(line) * 31 + Arrays.hashCode(hashIds);
    }

    @Override
    public String toString() {
        return "TraceRequest[line=" + line + ", timestampMs=" + timestampMs + ", inputLength=" + inputLength
                + ", outputLength=" + outputLength + ", blocks=" + hashIds.length + "]";
    }
}
