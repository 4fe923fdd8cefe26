package io.orbitkv.state;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Objects;

/**
 * The computation and storage identity under which KV state may be shared: two engines reuse
 * each other's pages only when their namespaces are equal field for field.
 *
 * <p>Immutable and thread-safe. Invariants (checked by the compact constructor): every string
 * except {@code adapterId} is non-empty; every string is well-formed Unicode of at most
 * {@value #MAX_STRING_BYTES} UTF-8 bytes; {@code 0 < pageTokens <= }{@value #MAX_PAGE_TOKENS};
 * {@code 0 <= tpRank < tpSize}; {@code 0 <= ppRank < ppSize}; {@code formatVersion >= 1}.
 *
 * <p>Canonical encoding (little-endian; the normative copy is {@code docs/state-contract.md}):
 * <pre>
 *   offset  size  field
 *   0       4     magic "OKNS" (0x4F 0x4B 0x4E 0x53)
 *   4       4     u32 encoding version = 1
 *   8       ...   model_id, revision, weights_digest, tokenizer_digest, adapter_id, dtype,
 *                 kv_layout: each u32 byte length + UTF-8 bytes
 *   ...     24    u32 page_tokens, tp_size, tp_rank, pp_size, pp_rank, format_version
 * </pre>
 * The digest is SHA-256 of those bytes. The magic and version are the domain separation: no
 * other OrbitKV hash input starts with "OKNS".
 *
 * <p>Design note: a length-prefixed binary form rather than JSON, because JSON has no canonical
 * form (key order, number spelling, escapes) and Python and Java must agree byte for byte; a
 * length prefix also makes ("ab","c") and ("a","bc") different inputs. Strings are capped at
 * 1 KiB so a REGISTER frame carrying them stays under 8 KiB.
 *
 * @param modelId         model identifier, e.g. "meta-llama/Llama-3.1-8B"
 * @param revision        model revision (commit, tag)
 * @param weightsDigest   digest of the weights, as text (e.g. hex SHA-256)
 * @param tokenizerDigest digest of the tokenizer files, as text
 * @param adapterId       LoRA adapter id; empty for none
 * @param dtype           KV element type, e.g. "bf16"
 * @param kvLayout        KV tensor layout, e.g. "nhd"
 * @param pageTokens      tokens per page
 * @param tpSize          tensor-parallel world size
 * @param tpRank          tensor-parallel rank
 * @param ppSize          pipeline-parallel world size
 * @param ppRank          pipeline-parallel rank
 * @param formatVersion   storage format version of the page images
 */
public record Namespace(
        String modelId,
        String revision,
        String weightsDigest,
        String tokenizerDigest,
        String adapterId,
        String dtype,
        String kvLayout,
        int pageTokens,
        int tpSize,
        int tpRank,
        int ppSize,
        int ppRank,
        int formatVersion) {

    /** Largest UTF-8 length of one string field, in bytes. */
    public static final int MAX_STRING_BYTES = 1024;
    /** Largest page size, in tokens. */
    public static final int MAX_PAGE_TOKENS = 1 << 16;
    /** Size of the digest in bytes. */
    public static final int DIGEST_BYTES = 32;
    /** Version of the canonical encoding written after the magic. */
    public static final int ENCODING_VERSION = 1;
    /** Largest canonical encoding: header, seven strings at their cap, six u32. */
    public static final int MAX_ENCODED_BYTES = 8 + 7 * (4 + MAX_STRING_BYTES) + 6 * 4;

    static final byte[] MAGIC = {'O', 'K', 'N', 'S'};
    private static final int STRING_FIELDS = 7;

    public Namespace {
        requireText("model_id", modelId, false);
        requireText("revision", revision, false);
        requireText("weights_digest", weightsDigest, false);
        requireText("tokenizer_digest", tokenizerDigest, false);
        requireText("adapter_id", adapterId, true);
        requireText("dtype", dtype, false);
        requireText("kv_layout", kvLayout, false);
        if (pageTokens <= 0 || pageTokens > MAX_PAGE_TOKENS) {
            throw new IllegalArgumentException(
                    "page_tokens must be in [1, " + MAX_PAGE_TOKENS + "]: " + pageTokens);
        }
        requireRank("tp", tpSize, tpRank);
        requireRank("pp", ppSize, ppRank);
        if (formatVersion < 1) {
            throw new IllegalArgumentException("format_version must be >= 1: " + formatVersion);
        }
    }

    /**
     * A builder: the model's identity, digests, element type, layout and page size must be set;
     * the rest default to a single-rank, unadapted engine ({@code adapterId} empty, TP and PP
     * size 1 rank 0, {@code formatVersion} 1).
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Sets a namespace's fields by name. {@link #build()} refuses an unset required field by its
     * wire name, then checks the record's invariants. Not thread-safe; one builder per namespace.
     */
    public static final class Builder {
        private String modelId;
        private String revision;
        private String weightsDigest;
        private String tokenizerDigest;
        private String adapterId = "";
        private String dtype;
        private String kvLayout;
        private int pageTokens;
        private int tpSize = 1;
        private int tpRank;
        private int ppSize = 1;
        private int ppRank;
        private int formatVersion = 1;

        private Builder() {
        }

        /** The model identifier and its revision (commit, tag). */
        public Builder model(String modelId, String revision) {
            this.modelId = modelId;
            this.revision = revision;
            return this;
        }

        /** Digests of the weights and of the tokenizer files, as text. */
        public Builder digests(String weightsDigest, String tokenizerDigest) {
            this.weightsDigest = weightsDigest;
            this.tokenizerDigest = tokenizerDigest;
            return this;
        }

        /** A LoRA adapter id; empty (the default) for none. */
        public Builder adapterId(String adapterId) {
            this.adapterId = adapterId;
            return this;
        }

        /** KV element type, e.g. {@code bf16}. */
        public Builder dtype(String dtype) {
            this.dtype = dtype;
            return this;
        }

        /** KV tensor layout, e.g. {@code nhd}. */
        public Builder kvLayout(String kvLayout) {
            this.kvLayout = kvLayout;
            return this;
        }

        /** Tokens per page. */
        public Builder pageTokens(int pageTokens) {
            this.pageTokens = pageTokens;
            return this;
        }

        /** Tensor-parallel world size and this engine's rank in it. */
        public Builder tensorParallel(int size, int rank) {
            this.tpSize = size;
            this.tpRank = rank;
            return this;
        }

        /** Pipeline-parallel world size and this engine's rank in it. */
        public Builder pipelineParallel(int size, int rank) {
            this.ppSize = size;
            this.ppRank = rank;
            return this;
        }

        /** Storage format version of the page images (default 1). */
        public Builder formatVersion(int formatVersion) {
            this.formatVersion = formatVersion;
            return this;
        }

        /**
         * The namespace.
         *
         * @throws IllegalArgumentException naming the first required field not set, or an invariant broken
         */
        public Namespace build() {
            required("model_id", modelId);
            required("revision", revision);
            required("weights_digest", weightsDigest);
            required("tokenizer_digest", tokenizerDigest);
            required("dtype", dtype);
            required("kv_layout", kvLayout);
            if (pageTokens == 0) throw new IllegalArgumentException("page_tokens is not set");
            return new Namespace(modelId, revision, weightsDigest, tokenizerDigest, adapterId, dtype, kvLayout,
                    pageTokens, tpSize, tpRank, ppSize, ppRank, formatVersion);
        }

        private static void required(String field, String value) {
            if (value == null) throw new IllegalArgumentException(field + " is not set");
        }
    }

    /** The canonical bytes defined in the class comment. */
    public byte[] canonicalBytes() {
        byte[][] strings = {
            utf8(modelId), utf8(revision), utf8(weightsDigest), utf8(tokenizerDigest),
            utf8(adapterId), utf8(dtype), utf8(kvLayout)
        };
        int size = 8 + 6 * 4;
        for (byte[] s : strings) size += 4 + s.length;
        ByteBuffer out = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
        out.put(MAGIC).putInt(ENCODING_VERSION);
        for (byte[] s : strings) out.putInt(s.length).put(s);
        out.putInt(pageTokens).putInt(tpSize).putInt(tpRank).putInt(ppSize).putInt(ppRank)
                .putInt(formatVersion);
        return out.array();
    }

    /** SHA-256 of {@link #canonicalBytes()}: 32 fresh bytes. */
    public byte[] digest() {
        return Sha256.of(canonicalBytes());
    }

    /** {@link #digest()} as 64 lower-case hex digits. */
    public String digestHex() {
        return HexFormat.of().formatHex(digest());
    }

    /**
     * Decodes canonical bytes (as carried by a REGISTER frame). Every malformation is a
     * {@link NamespaceDecoding.Malformed} value naming the offset and the problem; trailing bytes
     * are malformed too, so one namespace has exactly one encoding.
     */
    public static NamespaceDecoding decode(byte[] bytes) {
        Objects.requireNonNull(bytes, "bytes");
        if (bytes.length > MAX_ENCODED_BYTES) {
            return new NamespaceDecoding.Malformed(
                    "encoding is " + bytes.length + " bytes, more than " + MAX_ENCODED_BYTES);
        }
        ByteBuffer in = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        if (in.remaining() < 8) {
            return new NamespaceDecoding.Malformed("truncated header: " + bytes.length + " bytes, need 8");
        }
        for (int i = 0; i < MAGIC.length; i++) {
            if (in.get() != MAGIC[i]) {
                return new NamespaceDecoding.Malformed("bad magic at offset " + i + ": not \"OKNS\"");
            }
        }
        int version = in.getInt();
        if (version != ENCODING_VERSION) {
            return new NamespaceDecoding.Malformed("unsupported encoding version " + Integer.toUnsignedString(version));
        }
        String[] names = {"model_id", "revision", "weights_digest", "tokenizer_digest",
            "adapter_id", "dtype", "kv_layout"};
        String[] strings = new String[STRING_FIELDS];
        for (int i = 0; i < STRING_FIELDS; i++) {
            int at = in.position();
            if (in.remaining() < 4) {
                return new NamespaceDecoding.Malformed("truncated length of " + names[i] + " at offset " + at);
            }
            int length = in.getInt();
            if (length < 0 || length > MAX_STRING_BYTES) {
                return new NamespaceDecoding.Malformed(names[i] + " length " + Integer.toUnsignedString(length)
                        + " at offset " + at + " exceeds " + MAX_STRING_BYTES);
            }
            if (in.remaining() < length) {
                return new NamespaceDecoding.Malformed("truncated " + names[i] + " at offset " + (at + 4)
                        + ": " + length + " bytes declared, " + in.remaining() + " left");
            }
            byte[] raw = new byte[length];
            in.get(raw);
            try {
                strings[i] = StandardCharsets.UTF_8.newDecoder()
                        .onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .decode(ByteBuffer.wrap(raw)).toString();
            } catch (CharacterCodingException e) {
                return new NamespaceDecoding.Malformed(names[i] + " at offset " + (at + 4) + " is not valid UTF-8");
            }
        }
        if (in.remaining() != 6 * 4) {
            return new NamespaceDecoding.Malformed("expected 24 bytes of integers at offset " + in.position()
                    + ", found " + in.remaining());
        }
        int[] ints = new int[6];
        for (int i = 0; i < ints.length; i++) ints[i] = in.getInt();
        try {
            return new NamespaceDecoding.Decoded(new Namespace(strings[0], strings[1], strings[2],
                    strings[3], strings[4], strings[5], strings[6],
                    ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]));
        } catch (IllegalArgumentException e) {
            return new NamespaceDecoding.Malformed("invalid field: " + e.getMessage());
        }
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static void requireText(String field, String value, boolean mayBeEmpty) {
        Objects.requireNonNull(value, field);
        if (!mayBeEmpty && value.isEmpty()) {
            throw new IllegalArgumentException(field + " must not be empty");
        }
        int bytes;
        try {
            // REPORT, not the default replacement: a lone surrogate would otherwise encode as
            // '?' and two different strings would share one encoding.
            bytes = StandardCharsets.UTF_8.newEncoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .encode(CharBuffer.wrap(value)).remaining();
        } catch (CharacterCodingException e) {
            throw new IllegalArgumentException(field + " is not well-formed Unicode", e);
        }
        if (bytes > MAX_STRING_BYTES) {
            throw new IllegalArgumentException(
                    field + " is " + bytes + " UTF-8 bytes, more than " + MAX_STRING_BYTES);
        }
    }

    private static void requireRank(String axis, int size, int rank) {
        if (size < 1) {
            throw new IllegalArgumentException(axis + "_size must be >= 1: " + size);
        }
        if (rank < 0 || rank >= size) {
            throw new IllegalArgumentException(
                    axis + "_rank must be in [0, " + axis + "_size): " + rank + " of " + size);
        }
    }
}
