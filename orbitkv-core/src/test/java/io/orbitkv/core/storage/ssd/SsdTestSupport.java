package io.orbitkv.core.storage.ssd;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** Shared fixtures: deterministic keys and payloads, a store with its stream and registry, raw file edits. */
final class SsdTestSupport implements AutoCloseable {

    static final NamespaceDigest NS = new NamespaceDigest(0x0123456789abcdefL, 1, 2, 3);
    static final Arena SHARED = Arena.ofAuto();

    final SsdConfig config;
    final ResidencyStream residency = new ResidencyStream(4096);
    final MeterRegistry registry = new SimpleMeterRegistry();
    final SsdStore store;

    private SsdTestSupport(SsdConfig config) throws IOException {
        this.config = config;
        this.store = SsdStore.open(config, residency, registry);
    }

    /** Opens a store (without recovering) with a fresh stream and registry. */
    static SsdTestSupport open(SsdConfig config) throws IOException {
        return new SsdTestSupport(config);
    }

    /** Opens and recovers. */
    static SsdTestSupport openRecovered(SsdConfig config) throws IOException {
        SsdTestSupport s = new SsdTestSupport(config);
        s.store.recover();
        return s;
    }

    /** Small ring for tests: {@code files} files of {@code fileKiB} KiB, 64 KiB max payload, fast pinned wait. */
    static SsdConfig smallConfig(Path dir, int files, int fileKiB) {
        return SsdConfig.of(dir).withMaxPayloadBytes(64 * 1024).withFiles(files, fileKiB * 1024L)
                .withIo(2, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024);
    }

    static StateKey key(int i) {
        try {
            return StateKey.ofBytes(MessageDigest.getInstance("SHA-256").digest(("key-" + i).getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new AssertionError(e);
        }
    }

    /** Payload bytes: a pattern derived from {@code seed}; never starts with the extent magic. */
    static MemorySegment payload(int seed, int lengthBytes) {
        MemorySegment s = SHARED.allocate(ExtentLayout.roundUpToBlock(lengthBytes), ExtentLayout.BLOCK_BYTES);
        for (int i = 0; i < lengthBytes; i++) s.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (seed * 31 + i * 7 + 1));
        return s;
    }

    WriteResult write(int keyIndex, int lengthBytes) {
        return store.write(NS, key(keyIndex), payload(keyIndex, lengthBytes), lengthBytes).join();
    }

    long writeCommitted(int keyIndex, int lengthBytes) {
        WriteResult r = write(keyIndex, lengthBytes);
        assertThat(r).isInstanceOf(WriteResult.Committed.class);
        return ((WriteResult.Committed) r).generation();
    }

    /** Pins, reads into a fresh aligned buffer, unpins; returns the result and checks served bytes. */
    ReadResult readAndCheck(int keyIndex, int lengthBytes) {
        PinResult p = store.pin(key(keyIndex), SsdTestSupport.NS);
        if (p instanceof PinResult.Miss) return null;
        try (Pin pin = (Pin) p) {
            MemorySegment dst = SHARED.allocate(pin.paddedPayloadBytes(), ExtentLayout.BLOCK_BYTES);
            ReadResult r = store.read(pin, dst).join();
            if (r instanceof ReadResult.Served) {
                assertThat(dst.asSlice(0, lengthBytes).mismatch(payload(keyIndex, lengthBytes).asSlice(0, lengthBytes)))
                        .as("served bytes of key %d", keyIndex).isEqualTo(-1L);
            }
            return r;
        }
    }

    List<ResidencyEvent> events() {
        return residency.readFrom(1, Integer.MAX_VALUE).events();
    }

    List<ResidencyEvent> events(ResidencyEvent.Kind kind) {
        List<ResidencyEvent> out = new ArrayList<>();
        for (ResidencyEvent e : events()) if (e.kind() == kind) out.add(e);
        return out;
    }

    double counter(String name, String... tags) {
        var search = registry.find(name);
        if (tags.length > 0) search = search.tags(tags);
        return search.counters().stream().mapToDouble(c -> c.count()).sum();
    }

    double gauge(String name) {
        return registry.get(name).gauge().value();
    }

    static Path file(Path dir, int index) {
        return dir.resolve(ExtentFiles.fileName(index));
    }

    /** Flips (xor 0xFF) one byte of a ring file with ordinary buffered I/O. */
    static void flipByte(Path dir, int file, long position) throws IOException {
        try (FileChannel ch = FileChannel.open(file(dir, file), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.allocate(1);
            ch.read(b, position);
            b.put(0, (byte) (b.get(0) ^ 0xFF));
            b.rewind();
            ch.write(b, position);
        }
    }

    static void truncate(Path dir, int file, long sizeBytes) throws IOException {
        try (FileChannel ch = FileChannel.open(file(dir, file), StandardOpenOption.WRITE)) {
            ch.truncate(sizeBytes);
        }
    }

    static byte[] readRaw(Path dir, int file, long position, int length) throws IOException {
        try (FileChannel ch = FileChannel.open(file(dir, file), StandardOpenOption.READ)) {
            ByteBuffer b = ByteBuffer.allocate(length);
            while (b.hasRemaining() && ch.read(b, position + b.position()) > 0) { }
            return b.array();
        }
    }

    static void writeRaw(Path dir, int file, long position, byte[] bytes) throws IOException {
        try (FileChannel ch = FileChannel.open(file(dir, file), StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.wrap(bytes);
            while (b.hasRemaining()) ch.write(b, position + b.position());
        }
    }

    @Override
    public void close() {
        store.close();
    }
}
