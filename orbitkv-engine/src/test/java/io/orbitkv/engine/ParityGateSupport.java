package io.orbitkv.engine;

import io.orbitkv.state.StateKey;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;

/**
 * What the engine adapters' parity gates (Jlama, llama.cpp) share, published to them in this
 * module's test-jar: the pseudo-random prompts, the bit-for-bit gate itself, the negative
 * control that damages one page's payload in the Manager's SSD extent files, and the file an
 * engine in another JVM hands its {@link RequestReport} back through.
 *
 * <p>Stateless; safe from any thread (each call touches only its arguments and, for
 * {@link #flipPayloadByte}, files the caller owns while the Manager is down). Uses no assertion
 * library, so each adapter's tests keep their own.
 *
 * <p>Design note: one copy of the gate so both engines are held to exactly the same strictness
 * (same greedy tokens, same step count, same logits length, every logit's raw float bits equal);
 * the extent scan walks 4 KiB-aligned headers, which for the tests' few dozen pages is a few
 * hundred 96-byte reads.
 */
public final class ParityGateSupport {

    /** Extent header and payload alignment in the SSD store's extent files, in bytes. */
    private static final int EXTENT_ALIGN_BYTES = 4096;
    /** Header bytes read: magic at [0, 8), the page key at [64, 96). */
    private static final int HEADER_BYTES = 96;
    /** Which payload byte the negative control flips, counted from the payload start. */
    private static final int FLIPPED_PAYLOAD_BYTE = 100;
    /** First int of a {@link #writeReport} file ("ORRP"). */
    private static final int REPORT_MAGIC = 0x4F52_5250;

    private ParityGateSupport() {
    }

    /** BOS (token 1) then {@code length - 1} pseudo-random non-special tokens in {@code [3, vocab)} of {@code seed}. */
    public static int[] prompt(long seed, int length, int vocab) {
        Random r = new Random(seed);
        int[] t = new int[length];
        t[0] = 1;
        for (int i = 1; i < length; i++) t[i] = 3 + r.nextInt(vocab - 3);
        return t;
    }

    /**
     * The gate: greedy tokens, the number of steps, each step's logits length and every logit's
     * raw bits of {@code actual} equal those of {@code expected}; throws {@link AssertionError}
     * naming the first difference.
     */
    public static void assertBitIdentical(RequestReport actual, RequestReport expected) {
        if (!Arrays.equals(actual.generated(), expected.generated())) {
            throw new AssertionError("greedy tokens differ: warm " + Arrays.toString(actual.generated())
                    + " cold " + Arrays.toString(expected.generated()));
        }
        if (actual.logits().length != expected.logits().length) {
            throw new AssertionError("steps differ: warm " + actual.logits().length + " cold " + expected.logits().length);
        }
        for (int step = 0; step < expected.logits().length; step++) {
            float[] a = actual.logits()[step];
            float[] e = expected.logits()[step];
            if (a.length != e.length) throw new AssertionError("step " + step + ": logits length differs");
            for (int v = 0; v < e.length; v++) {
                if (Float.floatToRawIntBits(a[v]) != Float.floatToRawIntBits(e[v])) {
                    throw new AssertionError("step " + step + " logit " + v + ": warm " + a[v] + " != cold " + e[v]);
                }
            }
        }
    }

    /**
     * Writes {@code r} to {@code file} exactly (logits as raw float bits), so a test can gate
     * the output of an engine that ran in another JVM; {@link #readReport} reads it back.
     */
    public static void writeReport(RequestReport r, Path file) throws IOException {
        try (DataOutputStream out = new DataOutputStream(new BufferedOutputStream(Files.newOutputStream(file)))) {
            out.writeInt(REPORT_MAGIC);
            out.writeInt(r.promptTokens());
            out.writeInt(r.restoredTokens());
            out.writeInt(r.prefilledTokens());
            out.writeLong(r.restoredBytes());
            out.writeUTF(r.source().name());
            out.writeLong(r.ttftNanos());
            out.writeInt(r.published().sealed());
            out.writeInt(r.published().alreadyPresent());
            out.writeInt(r.published().refused());
            out.writeInt(r.generated().length);
            for (int t : r.generated()) out.writeInt(t);
            for (float[] row : r.logits()) {
                out.writeInt(row.length);
                for (float f : row) out.writeInt(Float.floatToRawIntBits(f));
            }
        }
    }

    /** The report {@link #writeReport} wrote to {@code file}. */
    public static RequestReport readReport(Path file) throws IOException {
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(Files.newInputStream(file)))) {
            if (in.readInt() != REPORT_MAGIC) throw new IOException("not a report file: " + file);
            int prompt = in.readInt();
            int restored = in.readInt();
            int prefilled = in.readInt();
            long restoredBytes = in.readLong();
            HitSource source = HitSource.valueOf(in.readUTF());
            long ttft = in.readLong();
            KvPageStore.PublishReport published = new KvPageStore.PublishReport(in.readInt(), in.readInt(), in.readInt());
            int[] generated = new int[in.readInt()];
            for (int i = 0; i < generated.length; i++) generated[i] = in.readInt();
            float[][] logits = new float[generated.length][];
            for (int step = 0; step < logits.length; step++) {
                logits[step] = new float[in.readInt()];
                for (int v = 0; v < logits[step].length; v++) logits[step][v] = Float.intBitsToFloat(in.readInt());
            }
            return new RequestReport(generated, logits, prompt, restored, prefilled, restoredBytes, source, ttft, published);
        }
    }

    /**
     * Finds the SSD extent whose header names {@code key} in the {@code extents-*} files under
     * {@code ssdDir} and flips one byte of its payload; false when no extent names the key.
     * Call only while the Manager owning {@code ssdDir} is stopped.
     */
    public static boolean flipPayloadByte(Path ssdDir, StateKey key) throws IOException {
        byte[] want = key.toBytes();
        byte[] magic = "ORBKVEXT".getBytes(StandardCharsets.US_ASCII);
        List<Path> extentFiles;
        try (Stream<Path> s = Files.list(ssdDir)) {
            extentFiles = s.filter(f -> f.getFileName().toString().startsWith("extents-")).sorted().toList();
        }
        for (Path f : extentFiles) {
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                ByteBuffer header = ByteBuffer.allocate(HEADER_BYTES);
                for (long at = 0; at + EXTENT_ALIGN_BYTES <= ch.size(); at += EXTENT_ALIGN_BYTES) {
                    header.clear();
                    ch.read(header, at);
                    byte[] h = header.array();
                    if (!Arrays.equals(h, 0, 8, magic, 0, 8) || !Arrays.equals(h, 64, 96, want, 0, 32)) continue;
                    long target = at + EXTENT_ALIGN_BYTES + FLIPPED_PAYLOAD_BYTE;
                    ByteBuffer one = ByteBuffer.allocate(1);
                    ch.read(one, target);
                    one.put(0, (byte) (one.get(0) ^ 0x5A)).rewind();
                    ch.write(one, target);
                    return true;
                }
            }
        }
        return false;
    }
}
