package io.orbitkv.core.peer;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.TieredStoreConfig;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.ssd.SsdConfig;
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
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/** Test fixture: one Manager's store, namespace table and peer source, with a settable clock and member view. */
final class PeerNode implements AutoCloseable {

    static final int NS = 3;
    static final NamespaceDigest DIGEST = new NamespaceDigest(0xabcdL, 4, 5, 6);
    static final NamespaceDigest OTHER_DIGEST = new NamespaceDigest(0xdcbaL, 4, 5, 6);
    static final int PAGE = 48 * 1024;
    static final int SLOT = 64 * 1024;

    /** A member view the test sets. */
    static final class Members implements MemberView {
        volatile boolean valid = true;
        final Map<String, NodeIncarnation> live = new ConcurrentHashMap<>();

        @Override
        public boolean validForRemoteWork() {
            return valid;
        }

        @Override
        public Optional<NodeIncarnation> live(String nodeId) {
            return Optional.ofNullable(live.get(nodeId));
        }
    }

    final NodeIncarnation self;
    final TieredStore store;
    final NamespaceTable namespaces = new NamespaceTable(4);
    final AtomicLong clock = new AtomicLong(1_000);
    final TicketTable tickets = new TicketTable(16, TimeUnit.SECONDS.toNanos(30));
    final PeerSource source;

    PeerNode(Path dir, NodeIncarnation self, Members members, int slots) throws IOException {
        this(dir, self, members, slots, new SsdAdmissionPolicy.ReuseAware(1_000_000));
    }

    /** {@code admission}: the tests that need no SSD copy use a policy that never admits, so no copier holds a lease. */
    PeerNode(Path dir, NodeIncarnation self, Members members, int slots, SsdAdmissionPolicy admission) throws IOException {
        this(dir, self, members, slots, admission, true);
    }

    /** {@code registered}: false opens the node as just restarted, before any engine REGISTERed {@link #DIGEST}. */
    PeerNode(Path dir, NodeIncarnation self, Members members, int slots, SsdAdmissionPolicy admission,
             boolean registered) throws IOException {
        this.self = self;
        if (registered) namespaces.register(NS, DIGEST);
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram-" + self.nodeId())),
                "peer" + self.nodeId(), List.of(new SizeClass(SLOT, slots)), 4L * SLOT, 2L * SLOT, 64);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd-" + self.nodeId()))).withMaxPayloadBytes(SLOT)
                .withFiles(2, 2L << 20).withIo(1, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024);
        store = TieredStore.open(new TieredStoreConfig(dram, ssd,
                PublishConfig.defaults(admission), 1 << 16, 64), namespaces, new SimpleMeterRegistry());
        source = new PeerSource(self, store, namespaces, members, tickets, clock::get);
    }

    static StateKey key(long i) {
        ByteBuffer b = ByteBuffer.allocate(StateKey.BYTES);
        for (int w = 0; w < 4; w++) b.putLong(mix(i * 4 + w + 0x77));
        return StateKey.ofBytes(b.array());
    }

    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    static byte[] bytesOf(StateKey key) {
        byte[] b = new byte[PAGE];
        for (int o = 0; o < PAGE; o++) b[o] = (byte) mix(key.prefix64() + o);
        return b;
    }

    /** Puts {@code key}'s page in DRAM; returns its image id (the DRAM generation). */
    long putInDram(StateKey key) {
        Reservation r = (Reservation) store.reserve(key, NS, PAGE);
        MemorySegment.copy(MemorySegment.ofArray(bytesOf(key)), 0, r.segment(), 0, PAGE);
        return ((CommitResult.Inserted) store.commit(r)).imageId();
    }

    PeerCandidate dramCandidate(StateKey key, long generation) {
        return new PeerCandidate(new PeerEndpoint(self, "mem:" + self.nodeId()), key, DIGEST, PeerMedium.DRAM,
                generation, store.residency().lastSequence());
    }

    static MemorySegment offHeap(byte[] bytes) {
        MemorySegment s = Arena.ofAuto().allocate(bytes.length);
        MemorySegment.copy(MemorySegment.ofArray(bytes), 0, s, 0, bytes.length);
        return s;
    }

    static byte[] read(MemorySegment s) {
        return s.toArray(ValueLayout.JAVA_BYTE);
    }

    @Override
    public void close() {
        store.close();
    }
}
