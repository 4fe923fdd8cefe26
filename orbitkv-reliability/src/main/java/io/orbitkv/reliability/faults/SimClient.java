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
import io.orbitkv.state.protocol.CompletionTarget;
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
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.locks.LockSupport;

/**
 * A simulated engine on one connection: drives a {@link ChannelSession} with {@link Request}
 * records, as the channel server would after decoding, and maps the arena files it is given to
 * write published pages and read leased ones, as an engine process does. With a region directory
 * it also registers a destination region (a file of {@link #REGION_PAGES} pages it owns) for
 * ENGINE_RESTORE, maps it, and reads what the Manager restored into it.
 *
 * <p>Owns its session (closed once, by {@link #close}), its event sink, its mappings and its
 * region files (kept until the schedule's directory goes: the protocol asks the engine to keep
 * a region's file until its connection is closed).
 * Single-threaded: the schedule's driver.
 */
final class SimClient implements AutoCloseable, EventSink {

    /** Destination pages of a region: one more than the longest query. */
    static final int REGION_PAGES = 8;

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
    /** The registered region: its id, file and mapping (null without a region directory). */
    private Region region;

    record Region(int id, Path file, MemorySegment pages) {}

    private SimClient(ManagerCore core, String instance, int namespaceIndex, long epoch, Optional<UserPrincipal> user) {
        this.instance = instance;
        this.namespaceIndex = namespaceIndex;
        this.epoch = epoch;
        if (!(core.openSession(this, user) instanceof OpenResult.Opened opened)) {
            throw new IllegalStateException("the core refused a session");
        }
        this.session = opened.session();
    }

    /** Opens a connection and registers {@code instance} at {@code epoch}; empty when REGISTER was refused. */
    static Optional<SimClient> connect(ManagerCore core, String instance, int namespaceIndex, long epoch) {
        return connect(core, instance, namespaceIndex, epoch, Optional.empty(), null);
    }

    /**
     * As above, as the process {@code user}; with {@code regionFile} it then registers a region
     * in the file that names (refused: {@link IllegalStateException}, the Manager must accept its
     * own user's file).
     */
    static Optional<SimClient> connect(ManagerCore core, String instance, int namespaceIndex, long epoch,
                                       Optional<UserPrincipal> user, Path regionFile) {
        SimClient c = new SimClient(core, instance, namespaceIndex, epoch, user);
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
        if (regionFile != null) c.registerRegion(regionFile);
        return Optional.of(c);
    }

    /** Creates the region file {@code file}, maps it and registers it; it replaces the current region. */
    void registerRegion(Path file) {
        long size = (long) REGION_PAGES * SimManager.PAGE_BYTES;
        MemorySegment pages;
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            ch.truncate(size);
            ch.write(ByteBuffer.wrap(new byte[] {0}), size - 1);
            pages = ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Reply r = send(new Request.RegisterRegion(file.toString(), size, SimManager.PAGE_BYTES, REGION_PAGES));
        if (!(r instanceof Reply.RegionRegistered registered)) {
            throw new IllegalStateException("REGISTER_REGION of the client's own file was refused: " + r);
        }
        region = new Region(registered.regionId(), file, pages);
    }

    /** The registered region, or null. */
    Region region() {
        return region;
    }

    /**
     * Makes the region's file too short for its registered size, as an engine that truncates or
     * replaces it would. The mapping is not read again (it would fault past the end).
     */
    void truncateRegion() {
        try (FileChannel ch = FileChannel.open(region.file(), StandardOpenOption.WRITE)) {
            ch.truncate(SimManager.PAGE_BYTES / 2);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Zeroes destination page {@code page}, so a copy that did not happen cannot pass for one. */
    void clearDestination(int page) {
        region.pages().asSlice((long) page * SimManager.PAGE_BYTES, SimManager.PAGE_BYTES).fill((byte) 0);
    }

    /** The first {@code length} bytes of destination page {@code page}. */
    byte[] destination(int page, int length) {
        return region.pages().asSlice((long) page * SimManager.PAGE_BYTES, length).toArray(ValueLayout.JAVA_BYTE);
    }

    /** The process's user as the kernel would report it for the socket: the owner of a file it created. */
    static Optional<UserPrincipal> user(Path dir) {
        try {
            return Optional.of(Files.getOwner(dir));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
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
        return query(op, prompt, pages, CompletionTarget.HOST_READY, 0);
    }

    /** QUERY of the first {@code pages} pages of {@code prompt}; a positive {@code peerWaitMillis} may wait for peers. */
    Reply.QueryResult query(long op, long prompt, int pages, CompletionTarget target, int peerWaitMillis) {
        List<byte[]> h = new ArrayList<>(pages);
        for (int i = 0; i < pages; i++) h.add(hash(prompt, i));
        Request.Query q = new Request.Query(op, 0, target, (long) pages * SimManager.PAGE_TOKENS + 1, 0, 0,
                peerWaitMillis, List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(h))));
        Reply r = send(q);
        if (r instanceof Reply.QueryResult result) return result;
        return null;
    }

    byte[] read(Reply.Lease lease) {
        return arenas.get(lease.arenaIndex()).asSlice(lease.offsetBytes(), lease.lengthBytes()).toArray(ValueLayout.JAVA_BYTE);
    }

    /** Waits up to {@code timeoutNanos} for the operation's QUERY_SETTLED; false on timeout. */
    boolean awaitSettled(long op, long timeoutNanos) {
        return awaitEvent(op, CompletionEvent.QUERY_SETTLED, timeoutNanos).isPresent();
    }

    /** Waits up to {@code timeoutNanos} for the operation's {@code event}; empty on timeout. */
    Optional<Reply.Completion> awaitEvent(long op, CompletionEvent event, long timeoutNanos) {
        long deadline = System.nanoTime() + timeoutNanos;
        while (true) {
            for (Reply.Completion e : events) {
                if (e.operationId() == op && e.event() == event) return Optional.of(e);
            }
            if (System.nanoTime() > deadline) return Optional.empty();
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
