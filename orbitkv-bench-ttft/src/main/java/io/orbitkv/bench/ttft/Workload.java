package io.orbitkv.bench.ttft;

import io.orbitkv.testmodel.ByteFallbackVocab;

import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * The multi-turn workload: {@code sessions} conversations that share one system prompt; turn 1's
 * prompt is the system prompt and a user message, every later turn's prompt is the previous
 * prompt, the generated answer ({@code answerTokens}) and a new user message.
 *
 * <p>Immutable value; the texts are a pure function of {@code seed}, session and turn (seeded
 * lowercase words, one byte token per character, as {@link ByteFallbackVocab} encodes text).
 * Invariants: all sizes positive, and the last turn's prompt plus its answer fits
 * {@link #maxContextTokens()}.
 *
 * <p>Design note: the default (4 sessions x 3 turns, system 256, user 48, answer 16 tokens) makes
 * the last prompt 432 tokens: long enough that a hit saves most of the prefill, short enough that
 * the run stays within ~6 minutes on 2 shared cores, where Jlama's cold prefill of 336 tokens on
 * the 8-layer bench model took 3.5-5.9 s (llama.cpp, one thread: 0.6-1.1 s).
 */
public record Workload(int sessions, int turns, int systemTokens, int userTokens, int answerTokens, long seed) {

    public Workload {
        if (sessions < 1 || turns < 1 || systemTokens < 2 || userTokens < 1 || answerTokens < 1) {
            throw new IllegalArgumentException("workload sizes must be positive (system prompt >= 2 tokens)");
        }
    }

    static Workload defaults() {
        return new Workload(4, 3, 256, 48, 16, 20261129L);
    }

    /** The warm-up workload: the same shape, one session and two turns, other texts (no shared keys). */
    Workload warmup() {
        return new Workload(1, Math.min(2, turns), systemTokens, userTokens, answerTokens, seed ^ 0x5DEECE66DL);
    }

    /** BOS and {@code systemTokens - 1} byte tokens, the same for every session. */
    int[] systemPrompt() {
        return ByteFallbackVocab.encode(text(new SplittableRandom(seed), systemTokens - 1));
    }

    /** The user message of {@code session} at {@code turn} (0-based): {@code userTokens} byte tokens. */
    int[] userMessage(int session, int turn) {
        return ByteFallbackVocab.encodeContinuation(text(new SplittableRandom(seed + 1_000_003L * (session + 1) + turn),
                userTokens));
    }

    /** The prompt of turn {@code turn} given the conversation so far ({@code history} is empty at turn 0). */
    int[] prompt(int[] history, int session, int turn) {
        int[] user = turn == 0 ? concat(systemPrompt(), userMessage(session, 0)) : userMessage(session, turn);
        return concat(history, user);
    }

    /** Tokens of the last turn's prompt. */
    int lastPromptTokens() {
        return systemTokens + turns * userTokens + (turns - 1) * answerTokens;
    }

    /** The context a run needs: the last prompt and its answer. */
    int maxContextTokens() {
        return lastPromptTokens() + answerTokens;
    }

    /**
     * {@code prompt} cut so that whole pages are followed by exactly {@code minPrefill} tokens:
     * the longest prefix a store can restore all but the engine's minimum compute step of.
     */
    static int[] fullHitPrefix(int[] prompt, int pageTokens, int minPrefill) {
        if (prompt.length < pageTokens + minPrefill) throw new IllegalArgumentException("prompt shorter than a page");
        int pages = (prompt.length - minPrefill) / pageTokens;
        return Arrays.copyOf(prompt, pages * pageTokens + minPrefill);
    }

    static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    /** Seeded lowercase words of 2-8 letters separated by spaces, exactly {@code chars} characters. */
    public static String text(SplittableRandom random, int chars) {
        StringBuilder sb = new StringBuilder(chars);
        while (sb.length() < chars) {
            int word = 2 + random.nextInt(7);
            for (int i = 0; i < word && sb.length() < chars; i++) sb.append((char) ('a' + random.nextInt(26)));
            if (sb.length() < chars) sb.append(' ');
        }
        return sb.toString();
    }
}
