package io.orbitkv.core.engine;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
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

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A test engine: drives one {@link ChannelSession} with {@link Request} records and maps the
 * arena files itself, as a client process would, to write published pages and read leases.
 */
final class Client implements AutoCloseable {

    final RecordingSink sink = new RecordingSink();
    final ChannelSession session;
    private final Arena arena = Arena.ofShared();
    private final List<MemorySegment> arenas = new ArrayList<>();
    Reply.Registered registered;

    /** The arena descriptors the in-process handoff gave for REGISTERED's ticket (the tier's own, borrowed). */
    int[] arenaFds = new int[0];
    private final ManagerFixture fixture;

    Client(ManagerFixture fixture) {
        this.fixture = fixture;
        OpenResult open = fixture.core.openSession(sink, Optional.of(ManagerFixture.self()));
        assertThat(open).isInstanceOf(OpenResult.Opened.class);
        session = ((OpenResult.Opened) open).session();
    }

    Reply send(Request r) {
        return session.handle(r);
    }

    Reply register(String instance, long epoch, Namespace ns, RecoveryContract contract) {
        return send(new Request.Register(instance, epoch, ns, contract));
    }

    void registerOk(String instance, long epoch, Namespace ns, RecoveryContract contract) {
        Reply r = register(instance, epoch, ns, contract);
        assertThat(r).isInstanceOf(Reply.Registered.class);
        mapArenas((Reply.Registered) r);
    }

    /** Registers and maps the arenas; false (nothing mapped) if the REGISTER was refused. */
    boolean tryRegister(String instance, long epoch, Namespace ns, RecoveryContract contract) {
        if (!(register(instance, epoch, ns, contract) instanceof Reply.Registered r)) return false;
        mapArenas(r);
        return true;
    }

    private void mapArenas(Reply.Registered r) {
        registered = r;
        arenaFds = ((InProcessHandoff) fixture.core.descriptorHandoff()).redeem(r.ticket())
                .orElseThrow(() -> new AssertionError("REGISTERED's ticket does not redeem"));
        assertThat(arenaFds).as("one descriptor per arena").hasSize(r.arenas().size());
        for (int i = 0; i < arenaFds.length; i++) {
            Reply.ArenaFile f = registered.arenas().get(i);
            try (FileChannel ch = FileChannel.open(Path.of("/proc/self/fd/" + arenaFds[i]), StandardOpenOption.READ,
                    StandardOpenOption.WRITE)) {
                arenas.add(ch.map(FileChannel.MapMode.READ_WRITE, 0, f.sizeBytes(), arena));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** The 8-byte block hash of page {@code page} of group {@code group} of prompt {@code prompt}. */
    static byte[] hash(long prompt, int group, long page) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(prompt * 1_000_003L + group * 65_537L + page).array();
    }

    /** Deterministic page image bytes, distinct per (prompt, group, page). */
    static byte[] image(long prompt, int group, long page, int length) {
        byte[] b = new byte[length];
        long z = prompt * 31 + group * 7919L + page * 104_729L + 1;
        for (int i = 0; i < length; i++) {
            z = z * 6364136223846793005L + 1442695040888963407L;
            b[i] = (byte) (z >>> 56);
        }
        return b;
    }

    static Hashes hashes(long prompt, int group, int pages) {
        if (pages == 0) return Hashes.packed(8, new byte[0]);
        List<byte[]> h = new ArrayList<>(pages);
        for (int i = 0; i < pages; i++) h.add(hash(prompt, group, i));
        return Hashes.of(h);
    }

    /** Publishes pages {@code pages} of {@code group} (block-hash form) and returns the commit outcomes. */
    List<SettleOutcome> publish(long prompt, int group, long... pages) {
        List<Request.PublishPage> entries = new ArrayList<>();
        for (long p : pages) {
            entries.add(new Request.PublishPage(group, KeyForm.BLOCK_HASH, Hashes.of(List.of(hash(prompt, group, p))),
                    ManagerFixture.PAGE_BYTES));
        }
        if (!(send(new Request.PublishReserve(entries)) instanceof Reply.Reserved reserved)) return List.of();
        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < pages.length; i++) {
            if (reserved.outcomes().get(i) instanceof Reply.Granted g) {
                write(g, image(prompt, group, pages[i], ManagerFixture.PAGE_BYTES));
                ids.add(g.reservationId());
            }
        }
        if (ids.isEmpty()) return List.of();
        return send(new Request.PublishCommit(ids)) instanceof Reply.Committed c ? c.outcomes() : List.of();
    }

    void write(Reply.Granted g, byte[] bytes) {
        MemorySegment.copy(bytes, 0, arenas.get(g.arenaIndex()), ValueLayout.JAVA_BYTE, g.offsetBytes(), bytes.length);
    }

    byte[] read(Reply.Lease lease) {
        return arenas.get(lease.arenaIndex()).asSlice(lease.offsetBytes(), lease.lengthBytes())
                .toArray(ValueLayout.JAVA_BYTE);
    }

    static Request.Query query(long op, int revision, CompletionTarget target, long promptTokens, long originTokens,
                               long prompt, int[] groups, int pages) {
        List<Request.QueryGroup> gs = new ArrayList<>();
        for (int g : groups) gs.add(new Request.QueryGroup(g, KeyForm.BLOCK_HASH, hashes(prompt, g, pages)));
        return new Request.Query(op, revision, target, promptTokens, originTokens, gs);
    }

    /** HOST_READY full-attention query over {@code pages} pages, prompt of pages·P + 1 tokens. */
    Reply.QueryResult queryFull(long op, long prompt, int pages) {
        return (Reply.QueryResult) send(query(op, 0, CompletionTarget.HOST_READY,
                (long) pages * ManagerFixture.PAGE_TOKENS + 1, 0, prompt, new int[] {0}, pages));
    }

    /** Asserts every RESIDENT page of a result holds exactly the bytes published for it. */
    void assertBytes(Reply.QueryResult r, long prompt) {
        for (Reply.GroupResult g : r.groups()) {
            for (Reply.Span s : g.spans()) {
                for (int i = 0; i < s.pages().size(); i++) {
                    if (s.pages().get(i) instanceof Reply.Resident(Reply.Lease lease)) {
                        assertThat(read(lease)).as("group %d page %d", g.groupId(), s.firstPage() + i)
                                .isEqualTo(image(prompt, g.groupId(), s.firstPage() + i, ManagerFixture.PAGE_BYTES));
                    }
                }
            }
        }
    }

    static StateKey key(Namespace ns, long prompt, int group, long page) {
        return io.orbitkv.state.StateKeys.forBlockHash(ns.digest(), group, hash(prompt, group, page));
    }

    static ErrorCode error(Reply r) {
        assertThat(r).isInstanceOf(Reply.Error.class);
        return ((Reply.Error) r).code();
    }

    @Override
    public void close() {
        session.close();
        if (arena.scope().isAlive()) arena.close();
    }
}
