package io.orbitkv.reliability.faults;

import io.orbitkv.core.engine.ChannelSession;
import io.orbitkv.core.engine.EventSink;
import io.orbitkv.core.engine.ManagerCore;
import io.orbitkv.core.engine.InProcessHandoff;
import io.orbitkv.core.engine.OpenResult;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

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
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.locks.LockSupport;

/**
 * A simulated engine on one connection: drives a {@link ChannelSession} with {@link Request}
 * records, as the channel server would after decoding, and maps the arena files it is given to
 * write published pages and read leased ones, as an engine process does.
 *
 * <p>Owns its session (closed once, by {@link #close}), its event sink and its mappings.
 * Single-threaded: the schedule's driver.
 */
final class SimClient implements AutoCloseable, EventSink {

    static final RecoveryContract FULL = new RecoveryContract(SimManager.PAGE_TOKENS, List.of(new StateGroup.Full(0)));

    final String instance;
    final int namespaceIndex;
    final long epoch;
    private final ChannelSession session;
    private final List<Reply.Completion> events = new CopyOnWriteArrayList<>();
    private final Arena arena = Arena.ofShared();
    private final List<MemorySegment> arenas = new ArrayList<>();
    private volatile ErrorCode fenced;
    private boolean closed;

    private SimClient(ManagerCore core, String instance, int namespaceIndex, long epoch) {
        this.instance = instance;
        this.namespaceIndex = namespaceIndex;
        this.epoch = epoch;
        if (!(core.openSession(this, Optional.empty()) instanceof OpenResult.Opened opened)) {
            throw new IllegalStateException("the core refused a session");
        }
        this.session = opened.session();
    }

    /** Opens a connection and registers {@code instance} at {@code epoch}; empty when REGISTER was refused. */
    static Optional<SimClient> connect(ManagerCore core, String instance, int namespaceIndex, long epoch) {
        SimClient c = new SimClient(core, instance, namespaceIndex, epoch);
        Reply r = c.send(new Request.Register(instance, epoch, namespace(namespaceIndex), FULL));
        if (!(r instanceof Reply.Registered registered)) {
            c.close();
            return Optional.empty();
        }
        // in the Manager's own JVM: the in-process handoff gives the tier's descriptors for the ticket
        int[] fds = ((InProcessHandoff) core.descriptorHandoff()).redeem(registered.ticket())
                .orElseThrow(() -> new IllegalStateException("REGISTERED's ticket does not redeem"));
        for (int i = 0; i < fds.length; i++) {
            Reply.ArenaFile f = registered.arenas().get(i);
            try (FileChannel ch = FileChannel.open(Path.of("/proc/self/fd/" + fds[i]), StandardOpenOption.READ,
                    StandardOpenOption.WRITE)) {
                c.arenas.add(ch.map(FileChannel.MapMode.READ_WRITE, 0, f.sizeBytes(), c.arena));
            } catch (IOException e) {
                c.close();
                throw new UncheckedIOException(e);
            }
        }
        return Optional.of(c);
    }

    static Namespace namespace(int index) {
        return new Namespace("model-" + index, "r1", "w", "t", "", "bf16", "nhd", SimManager.PAGE_TOKENS, 1, 0, 1, 0, 1);
    }

    Reply send(Request r) {
        if (closed) throw new IllegalStateException("send on a closed client");
        return session.handle(r);
    }

    static byte[] hash(long prompt, long page) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(prompt * 1_000_003L + page).array();
    }

    /** The bytes every publisher of (namespace, prompt, page) writes; distinct per namespace. */
    static byte[] image(int namespaceIndex, long prompt, long page) {
        byte[] b = new byte[SimManager.PAGE_BYTES];
        long z = namespaceIndex * 0x9E3779B97F4A7C15L + prompt * 31 + page * 104_729L + 1;
        for (int i = 0; i < b.length; i++) {
            z = z * 6364136223846793005L + 1442695040888963407L;
            b[i] = (byte) (z >>> 56);
        }
        return b;
    }

    /** PUBLISH_RESERVE of pages {@code first..first+count-1}; writes the granted ones. Null when refused. */
    Reply.Reserved reserve(long prompt, long first, int count) {
        List<Request.PublishPage> entries = new ArrayList<>();
        for (long p = first; p < first + count; p++) {
            entries.add(new Request.PublishPage(0, KeyForm.BLOCK_HASH, Hashes.of(List.of(hash(prompt, p))), SimManager.PAGE_BYTES));
        }
        if (!(send(new Request.PublishReserve(entries)) instanceof Reply.Reserved reserved)) return null;
        for (int i = 0; i < count; i++) {
            if (reserved.outcomes().get(i) instanceof Reply.Granted g) {
                byte[] bytes = image(namespaceIndex, prompt, first + i);
                MemorySegment.copy(bytes, 0, arenas.get(g.arenaIndex()), ValueLayout.JAVA_BYTE, g.offsetBytes(), bytes.length);
            }
        }
        return reserved;
    }

    Reply.QueryResult query(long op, long prompt, int pages) {
        List<byte[]> h = new ArrayList<>(pages);
        for (int i = 0; i < pages; i++) h.add(hash(prompt, i));
        Request.Query q = new Request.Query(op, 0, io.orbitkv.state.protocol.CompletionTarget.HOST_READY,
                (long) pages * SimManager.PAGE_TOKENS + 1, 0,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(h))));
        Reply r = send(q);
        if (r instanceof Reply.QueryResult result) return result;
        return null;
    }

    byte[] read(Reply.Lease lease) {
        return arenas.get(lease.arenaIndex()).asSlice(lease.offsetBytes(), lease.lengthBytes()).toArray(ValueLayout.JAVA_BYTE);
    }

    /** Waits up to {@code timeoutNanos} for the operation's QUERY_SETTLED; false on timeout. */
    boolean awaitSettled(long op, long timeoutNanos) {
        long deadline = System.nanoTime() + timeoutNanos;
        while (true) {
            for (Reply.Completion e : events) {
                if (e.operationId() == op && e.event() == CompletionEvent.QUERY_SETTLED) return true;
            }
            if (System.nanoTime() > deadline) return false;
            LockSupport.parkNanos(20_000);
        }
    }

    boolean fenced() {
        return fenced != null;
    }

    @Override
    public boolean complete(Reply.Completion event) {
        events.add(event);
        return fenced == null;
    }

    @Override
    public void fence(ErrorCode code, String message) {
        fenced = code;
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        session.close();
        if (arena.scope().isAlive()) arena.close();
    }
}
