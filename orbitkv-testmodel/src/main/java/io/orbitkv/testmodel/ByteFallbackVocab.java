package io.orbitkv.testmodel;

import java.util.ArrayList;
import java.util.List;

/**
 * The generated models' vocabulary: 3 specials, 256 byte tokens, then filler tokens.
 *
 * <pre>
 *   id 0        &lt;unk&gt;          (control)
 *   id 1        &lt;s&gt;   = BOS    (control)
 *   id 2        &lt;/s&gt;  = EOS    (control)
 *   id 3..258   &lt;0x00&gt;..&lt;0xFF&gt; (byte fallback: UTF-8 byte b is id 3 + b)
 *   id 259..    filler, never produced by encoding text
 * </pre>
 *
 * <p>Stateless. Design note: a byte-fallback vocabulary with no merges is the smallest tokenizer
 * both Jlama (HF {@code tokenizer.json}, BPE with {@code byte_fallback}) and llama.cpp (SPM with
 * byte tokens) load, and it makes encoding trivial ({@link #encode}) so tests can build prompts
 * from text without either engine's tokenizer.
 */
public final class ByteFallbackVocab {

    /** Unknown-token id. */
    public static final int UNK = 0;
    /** Beginning-of-sequence id. */
    public static final int BOS = 1;
    /** End-of-sequence id. */
    public static final int EOS = 2;
    /** Id of byte 0x00; byte {@code b} is {@code FIRST_BYTE + b}. */
    public static final int FIRST_BYTE = 3;
    /** Smallest vocabulary that holds the specials and the byte tokens. */
    public static final int MIN_VOCAB = FIRST_BYTE + 256;

    private ByteFallbackVocab() {
    }

    /** Token kinds, with their GGUF {@code tokenizer.ggml.token_type} codes. */
    public enum Kind {
        NORMAL(1), CONTROL(3), BYTE(6);

        /** llama.cpp's {@code llama_token_type} value. */
        public final int ggufCode;

        Kind(int ggufCode) {
            this.ggufCode = ggufCode;
        }
    }

    /** One vocabulary entry: id, HF piece text, GGUF piece text and kind. */
    public record Token(int id, String hfPiece, String ggufPiece, Kind kind) {
    }

    /** The {@code vocab} tokens in id order. */
    public static List<Token> tokens(int vocab) {
        if (vocab < MIN_VOCAB) throw new IllegalArgumentException("vocab must be >= " + MIN_VOCAB + ": " + vocab);
        List<Token> out = new ArrayList<>(vocab);
        out.add(new Token(UNK, "<unk>", "<unk>", Kind.CONTROL));
        out.add(new Token(BOS, "<s>", "<s>", Kind.CONTROL));
        out.add(new Token(EOS, "</s>", "</s>", Kind.CONTROL));
        for (int b = 0; b < 256; b++) {
            String piece = String.format("<0x%02X>", b);
            out.add(new Token(FIRST_BYTE + b, piece, piece, Kind.BYTE));
        }
        for (int id = MIN_VOCAB; id < vocab; id++) {
            // SPM marks a word start with U+2581; llama.cpp needs distinct, non-control pieces
            out.add(new Token(id, "<extra_" + id + ">", "\u2581x" + id, Kind.NORMAL));
        }
        return List.copyOf(out);
    }

    /** BOS followed by the UTF-8 bytes of {@code text} as byte tokens. */
    public static int[] encode(String text) {
        byte[] utf8 = text.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        int[] ids = new int[utf8.length + 1];
        ids[0] = BOS;
        for (int i = 0; i < utf8.length; i++) ids[i + 1] = FIRST_BYTE + (utf8[i] & 0xFF);
        return ids;
    }

    /** The UTF-8 bytes of {@code text} as byte tokens, no BOS (a continuation of a conversation). */
    public static int[] encodeContinuation(String text) {
        int[] withBos = encode(text);
        return java.util.Arrays.copyOfRange(withBos, 1, withBos.length);
    }
}
