package io.orbitkv.core.storage.publish;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.core.storage.ssd.Pin;
import io.orbitkv.core.storage.ssd.ReadResult;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A pipeline over a real DRAM tier (arena files in a temp dir) and a real SSD store (ext4 temp
 * dir, O_DIRECT), with a test-driven clock; the test calls {@link PublishPipeline#sealQueued}.
 */
final class PublishFixture implements AutoCloseable {

    static final int NS = 7;
    static final NamespaceDigest DIGEST = new NamespaceDigest(0x5eed, 1, 2, 3);
    static final int BLOCK = 12 * 1024; // not a 4 KiB multiple: the padded views matter

    final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    final ResidencyStream residency = new ResidencyStream(4096);
    final AtomicLong clock = new AtomicLong(1_000_000_000L);
    final NamespaceTable namespaces = new NamespaceTable(4);
    final DramTier dram;
    final SsdStore ssd;
    final SsdIoDispatcher dispatcher;
    final PublishPipeline pipeline;

    PublishFixture(Path dir, PublishConfig config, int dramSlots) throws IOException {
        this(dir, config, dramSlots, 1);
    }

    /** {@code parkedSlots}: how many evicted slots DRAM may keep parked for hand-overs. */
    PublishFixture(Path dir, PublishConfig config, int dramSlots, int parkedSlots) throws IOException {
        namespaces.register(NS, DIGEST);
        Path dramDir = Files.createDirectories(dir.resolve("dram"));
        dram = DramTier.open(new DramTierConfig(dramDir, "pub", List.of(new SizeClass(16 * 1024, dramSlots)),
                16 * 1024, parkedSlots * 16L * 1024, 64), residency, registry);
        ssd = SsdStore.open(ssdConfig(Files.createDirectories(dir.resolve("ssd")), 1), residency, registry);
        ssd.recover();
        dispatcher = new SsdIoDispatcher(ssd.config().ioThreads(), config.readLaneOps(), config.writeLaneOps(),
                config.maxReadsWhileWriteWaits(), registry, "ssd");
        pipeline = new PublishPipeline(dram, ssd, dispatcher, config, namespaces, registry, clock::get);
        dram.setEvictionListener(pipeline::onEvicted);
    }

    static SsdConfig ssdConfig(Path dir, int ioThreads) {
        return SsdConfig.of(dir).withMaxPayloadBytes(64 * 1024).withFiles(2, 1024 * 1024)
                .withIo(ioThreads, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024);
    }

    /** Config with generous budgets and the given policy. */
    static PublishConfig config(SsdAdmissionPolicy policy) {
        return PublishConfig.defaults(policy);
    }

    static StateKey key(long i) {
        ByteBuffer b = ByteBuffer.allocate(StateKey.BYTES);
        long x = i;
        for (int w = 0; w < 4; w++) {
            x = mix(x + 0x9E3779B97F4A7C15L * (w + 1));
            b.putLong(x);
        }
        return StateKey.ofBytes(b.array());
    }

    /** A producer page holding {@code key}'s canary. */
    static MemorySegment page(StateKey key, int lengthBytes) {
        // Its own automatic arena: once a weak source's page is collected, its memory is freed too.
        MemorySegment s = Arena.ofAuto().allocate(lengthBytes, 4096);
        writeCanary(s, key);
        return s;
    }

    static void writeCanary(MemorySegment s, StateKey key) {
        for (long o = 0; o < s.byteSize(); o++) s.set(ValueLayout.JAVA_BYTE, o, (byte) mix(key.prefix64() + o));
    }

    static boolean hasCanary(MemorySegment s, StateKey key) {
        for (long o = 0; o < s.byteSize(); o++) {
            if (s.get(ValueLayout.JAVA_BYTE, o) != (byte) mix(key.prefix64() + o)) return false;
        }
        return true;
    }

    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** A source the producer can reclaim: after {@link #reclaim()} it opens empty. */
    static final class ReclaimableSource implements PageSource {
        final MemorySegment bytes;
        final AtomicBoolean reclaimed = new AtomicBoolean();
        final AtomicBoolean closed = new AtomicBoolean();

        ReclaimableSource(MemorySegment bytes) {
            this.bytes = bytes;
        }

        void reclaim() {
            reclaimed.set(true);
        }

        @Override
        public int lengthBytes() {
            return (int) bytes.byteSize();
        }

        @Override
        public Optional<MemorySegment> tryOpen() {
            return reclaimed.get() ? Optional.empty() : Optional.of(bytes);
        }

        @Override
        public void close() {
            assertThat(closed.compareAndSet(false, true)).as("closed once").isTrue();
        }
    }

    /** Publishes {@code key}'s canary and seals it. */
    void publishAndSeal(StateKey key) {
        MemorySegment source = page(key, BLOCK);
        assertThat(pipeline.publish(key, NS, PageSource.weak(source, BLOCK)))
                .isInstanceOf(PublishResult.Queued.class);
        assertThat(pipeline.sealQueued(16)).isEqualTo(1);
        java.lang.ref.Reference.reachabilityFence(source);
        pipeline.admitEvicted();
    }

    /** Reads {@code key}'s SSD extent back, verified; empty when not on SSD. */
    Optional<MemorySegment> readFromSsd(StateKey key) {
        if (!(ssd.pin(key, DIGEST) instanceof Pin pin)) return Optional.empty();
        try (pin) {
            MemorySegment dst = Arena.ofAuto().allocate(pin.paddedPayloadBytes(), 4096);
            ReadResult r = ssd.read(pin, dst).join();
            assertThat(r).isInstanceOf(ReadResult.Served.class);
            return Optional.of(dst.asSlice(0, pin.payloadBytes()));
        }
    }

    double count(String name, String tag, String value) {
        return tag == null ? registry.get(name).counter().count() : registry.get(name).tag(tag, value).counter().count();
    }

    double ssdWrites() {
        return registry.get("orbitkv.ssd.writes").counter().count();
    }

    @Override
    public void close() {
        pipeline.close();
        dispatcher.close(TimeUnit.SECONDS.toNanos(5));
        ssd.close();
        dram.close();
    }

}
