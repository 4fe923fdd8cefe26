package io.orbitkv.server.daemon;

import io.orbitkv.client.DescriptorSocket;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.server.channel.RawClient;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.state.protocol.SettleOutcome;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A test engine over raw frames: registers, fetches and maps its arenas' descriptors from the
 * descriptor socket (as a real client process does), writes published page images into granted slots and reads leased ones.
 * One full-attention group, 16-token pages of {@link #PAGE_BYTES}. Confined to the test thread.
 */
final class Engine implements AutoCloseable {

    static final int PAGE_TOKENS = 16;
    static final int PAGE_BYTES = 20 * 1024;
    static final Namespace NS = new Namespace("tiny-llama", "r1", "w", "t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
    static final RecoveryContract FULL = new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0)));

    final RawClient raw;
    private final Arena arena = Arena.ofShared();
    private final List<MemorySegment> arenas = new ArrayList<>();
    /** The arena descriptors the descriptor socket passed (kept open until close, so tests can inspect them). */
    int[] arenaFds = new int[0];

    Engine(Path socket) throws IOException {
        raw = new RawClient(socket);
    }

    /** REGISTER and map the arenas; fails the test unless REGISTERED. */
    Reply.Registered register(String instance, long epoch) {
        Reply r = raw.call(new Request.Register(instance, epoch, NS, FULL));
        assertThat(r).isInstanceOf(Reply.Registered.class);
        Reply.Registered registered = (Reply.Registered) r;
        try {
            arenaFds = DescriptorSocket.fetchArenas(registered.descriptorSocket(), registered.ticket(),
                    registered.arenas().size(), java.time.Duration.ofSeconds(10));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        for (int i = 0; i < arenaFds.length; i++) {
            Reply.ArenaFile f = registered.arenas().get(i);
            try (FileChannel ch = FileChannel.open(Path.of("/proc/self/fd/" + arenaFds[i]), StandardOpenOption.READ,
                    StandardOpenOption.WRITE)) {
                arenas.add(ch.map(FileChannel.MapMode.READ_WRITE, 0, f.sizeBytes(), arena));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return registered;
    }

    static byte[] hash(long prompt, long page) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(prompt * 1_000_003L + page).array();
    }

    static byte[] image(long prompt, long page) {
        byte[] b = new byte[PAGE_BYTES];
        long z = prompt * 31 + page * 104_729L + 1;
        for (int i = 0; i < b.length; i++) {
            z = z * 6364136223846793005L + 1442695040888963407L;
            b[i] = (byte) (z >>> 56);
        }
        return b;
    }

    /** PUBLISH_RESERVE of {@code pages} of {@code prompt}; granted slots get their images written. */
    Reply.Reserved reserve(long prompt, int pages) {
        return reserve(prompt, pages, Optional.empty());
    }

    /** As {@link #reserve(long, int)}, charged to tenant label {@code tenant} (protocol 5.6). */
    Reply.Reserved reserve(long prompt, int pages, Optional<String> tenant) {
        List<Request.PublishPage> entries = new ArrayList<>();
        for (int p = 0; p < pages; p++) {
            entries.add(new Request.PublishPage(0, KeyForm.BLOCK_HASH, Hashes.of(List.of(hash(prompt, p))), PAGE_BYTES));
        }
        Reply.Reserved reserved = (Reply.Reserved) raw.call(new Request.PublishReserve(entries, tenant));
        for (int p = 0; p < pages; p++) {
            if (reserved.outcomes().get(p) instanceof Reply.Granted g) {
                byte[] bytes = image(prompt, p);
                MemorySegment.copy(bytes, 0, arenas.get(g.arenaIndex()), ValueLayout.JAVA_BYTE, g.offsetBytes(), bytes.length);
            }
        }
        return reserved;
    }

    /** Reserves, writes and commits {@code pages} pages; the commit outcomes. */
    List<SettleOutcome> publish(long prompt, int pages) {
        return publish(prompt, pages, Optional.empty());
    }

    /** As {@link #publish(long, int)}, charged to tenant label {@code tenant}. */
    List<SettleOutcome> publish(long prompt, int pages, Optional<String> tenant) {
        Reply.Reserved reserved = reserve(prompt, pages, tenant);
        List<Long> ids = new ArrayList<>();
        for (Reply.ReserveOutcome o : reserved.outcomes()) {
            if (o instanceof Reply.Granted g) ids.add(g.reservationId());
        }
        assertThat(ids).hasSize(pages);
        return ((Reply.Committed) raw.call(new Request.PublishCommit(ids))).outcomes();
    }

    static Request.Query query(long op, int revision, long prompt, int pages) {
        List<byte[]> hashes = new ArrayList<>();
        for (int p = 0; p < pages; p++) hashes.add(hash(prompt, p));
        return new Request.Query(op, revision, CompletionTarget.HOST_READY, (long) pages * PAGE_TOKENS + 1, 0,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes))));
    }

    /** QUERY (HOST_READY) of {@code pages} pages; the first answer (FINAL or PENDING). */
    Reply.QueryResult query(long op, long prompt, int pages) {
        Reply r = raw.call(query(op, 1, prompt, pages));
        assertThat(r).isInstanceOf(Reply.QueryResult.class);
        return (Reply.QueryResult) r;
    }

    /** Asserts the result is a hit leasing pages 0..pages-1, each holding the bytes published for it. */
    void assertHitWithBytes(Reply.QueryResult r, long prompt, int pages) {
        assertThat(r.hit()).isTrue();
        assertThat(r.boundaryTokens()).isEqualTo((long) pages * PAGE_TOKENS);
        int seen = 0;
        for (Reply.GroupResult g : r.groups()) {
            for (Reply.Span s : g.spans()) {
                for (int i = 0; i < s.pages().size(); i++) {
                    assertThat(s.pages().get(i)).isInstanceOf(Reply.Resident.class);
                    Reply.Lease lease = ((Reply.Resident) s.pages().get(i)).lease();
                    byte[] got = arenas.get(lease.arenaIndex()).asSlice(lease.offsetBytes(), lease.lengthBytes())
                            .toArray(ValueLayout.JAVA_BYTE);
                    assertThat(got).as("page %d", s.firstPage() + i).isEqualTo(image(prompt, s.firstPage() + i));
                    seen++;
                }
            }
        }
        assertThat(seen).isEqualTo(pages);
    }

    @Override
    public void close() throws IOException {
        raw.close();
        if (arena.scope().isAlive()) arena.close();
        for (int fd : arenaFds) io.orbitkv.state.unix.UnixSocket.close(fd);
        arenaFds = new int[0];
    }
}
