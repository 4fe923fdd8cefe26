package io.orbitkv.client;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.PageEntries;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.DescriptorTicket;
import io.orbitkv.state.protocol.HintKind;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.unix.UnixSocket;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.state.protocol.SettleOutcome;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.net.SocketTimeoutException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Java client of the OrbitKV engine channel ({@code docs/protocol.md}): one connection to a
 * Manager, one registered engine instance, and the shared-memory mappings that go with it.
 *
 * <p>Usage: {@link #connect}, {@link #register} once, then {@link #publish} pages, {@link #query}
 * (and {@link #awaitSettled} a PENDING answer), read a HOST_READY hit with {@link #readLease} or
 * copy an ENGINE_RESTORE hit into a {@link #registerRegion region} with {@link #restore}, and end
 * each operation with {@link #release} or {@link #cancel}. {@link #close} closes the socket and
 * then unmaps everything.
 *
 * <p>Thread model: thread-safe. Blocking calls may come from any number of threads at once and
 * are pipelined on the one connection ({@link #send} is the non-blocking form); a blocking call
 * reads its own reply when no other thread reads, and a background reader thread reads while
 * none waits ({@link FrameChannel}); either routes replies by request id and COMPLETION events by
 * operation ({@link OperationEvents}). Every blocking call waits at most {@code replyTimeout}.
 *
 * <p>What it owns: the socket, the arena and region mappings, and per live operation only the
 * futures that route its COMPLETIONs. It keeps no copy of leases or coverage: those are the
 * Manager's (docs/architecture.md, "Who owns what"); a {@link Reply.QueryResult} is the
 * caller's value.
 *
 * <p>Errors: a refused request throws {@link OrbitKvException} with the Manager's code (the
 * request had no effect); expected per-page outcomes of publishing are values
 * ({@link PublishOutcome}); transport failures and timeouts are {@link UncheckedIOException}.
 *
 * <p>Design note: blocking methods over a future-based core, because an engine's scheduler
 * step calls one of them at a time per request and reads better straight-line, while
 * {@link #send} keeps pipelining (many QUERYs in flight, one round trip) available to callers
 * and benchmarks; a restore waits on its COMPLETION future, never by polling.
 */
public final class OrbitKvClient implements AutoCloseable {

    /** Default bound on any one blocking wait: long enough for an SSD-staged query, short enough to surface a hang. */
    public static final Duration DEFAULT_REPLY_TIMEOUT = Duration.ofSeconds(30);

    private final OperationEvents events = new OperationEvents();
    private final SharedMappings mappings = new SharedMappings();
    private final Duration replyTimeout;
    private final Object registerLock = new Object();
    private final FrameChannel channel;
    private volatile Registration registration;
    /** The Manager's descriptor socket, from REGISTERED; set once under {@code registerLock}. */
    private volatile String descriptorSocket;

    private OrbitKvClient(Path socket, Duration replyTimeout, long readerGraceNanos) throws IOException {
        this.replyTimeout = Objects.requireNonNull(replyTimeout, "replyTimeout");
        this.channel = FrameChannel.open(socket, events::onFrame, events::failAll, readerGraceNanos);
    }

    /** Connects to the Manager listening at {@code socket}. */
    public static OrbitKvClient connect(Path socket) throws IOException {
        return connect(socket, DEFAULT_REPLY_TIMEOUT);
    }

    /** Connects to the Manager at {@code socket}; each blocking call waits at most {@code replyTimeout}. */
    public static OrbitKvClient connect(Path socket, Duration replyTimeout) throws IOException {
        return new OrbitKvClient(socket, replyTimeout, FrameChannel.READER_GRACE_NANOS);
    }

    /** As {@link #connect(Path, Duration)}, its reader thread reading only {@code readerGrace} after a blocking call; for tests. */
    static OrbitKvClient connect(Path socket, Duration replyTimeout, Duration readerGrace) throws IOException {
        return new OrbitKvClient(socket, replyTimeout, readerGrace.toNanos());
    }

    /**
     * Registers this connection's engine instance, fetches its namespace's arena descriptors from
     * the descriptor socket with REGISTERED's ticket and maps them read-write. A restarted engine registers with a higher {@code epoch}; the Manager answers
     * only after everything of the previous incarnation has drained (protocol.md 9.2).
     *
     * @throws OrbitKvException STALE_EPOCH (a higher or live equal epoch is registered; the Manager
     *         closes the connection), MALFORMED (bad namespace or contract), OUT_OF_ORDER (already
     *         registered), BUSY (too many connections, or the previous incarnation did not drain in
     *         time: call {@code register} again on this connection)
     */
    public Registration register(String instanceId, long epoch, Namespace namespace, RecoveryContract contract) {
        synchronized (registerLock) {
            Reply.Registered r = call(new Request.Register(instanceId, epoch, namespace, contract), Reply.Registered.class);
            try {
                int[] fds = DescriptorSocket.fetchArenas(r.descriptorSocket(), r.ticket(), r.arenas().size(), replyTimeout);
                mappings.mapArenas(r.arenas(), fds);
            } catch (IOException e) {
                throw new UncheckedIOException("receiving the Manager's arenas from " + r.descriptorSocket() + " failed", e);
            }
            descriptorSocket = r.descriptorSocket();
            Registration reg = Registration.of(r);
            registration = reg;
            return reg;
        }
    }

    /** The registration of this connection, once {@link #register} has returned. */
    public Registration registration() {
        Registration reg = registration;
        if (reg == null) throw new IllegalStateException("not registered");
        return reg;
    }

    /**
     * Sends {@code request} without waiting; the future completes with its typed reply, or
     * exceptionally with {@link OrbitKvException} (ERROR) or {@link UncheckedIOException} (the
     * connection ended). Requests sent this way are pipelined: the Manager answers in order.
     */
    public <R extends Reply> CompletableFuture<R> send(Request request, Class<R> replyType) {
        return channel.send(request).thenApply(reply -> switch (reply) {
            case Reply.Error(var code, var message) -> throw new OrbitKvException(code, message);
            default -> {
                if (!replyType.isInstance(reply)) {
                    throw new IllegalStateException(request.type() + " was answered by " + reply.type());
                }
                yield replyType.cast(reply);
            }
        });
    }

    /** Sends a QUERY and returns its first answer, PENDING or FINAL; leases in it are held until release. */
    public Reply.QueryResult query(Request.Query query) {
        return call(query, Reply.QueryResult.class);
    }

    /**
     * Asks the Manager to stage the missing pages of {@code prepare}'s demand into DRAM before its
     * first use (PREPARE, protocol §5.11). The answer is never a hit and leases nothing: the later
     * QUERY of the same demand finds the pages resident. End it early with {@link #cancel}.
     */
    public Reply.Prepared prepare(Request.Prepare prepare) {
        return call(prepare, Reply.Prepared.class);
    }

    /**
     * PREPARE of the demand {@code query} will make (its operation id, prompt, origin and groups),
     * expected in {@code firstUseMillis} ms, at {@code priority} (0..255, higher first).
     */
    public Reply.Prepared prepare(Request.Query query, int firstUseMillis, int priority) {
        return prepare(new Request.Prepare(query.operationId(), firstUseMillis, priority, query.promptTokens(),
                query.originTokens(), query.groups()));
    }

    /** The current result of a live operation at {@code revision} (QUERY_POLL). */
    public Reply.QueryResult poll(long operationId, int revision) {
        return call(new Request.QueryPoll(operationId, revision), Reply.QueryResult.class);
    }

    /**
     * The FINAL result of a query: {@code result} itself if it is FINAL, else waits for its
     * COMPLETION QUERY_SETTLED and polls once.
     */
    public Reply.QueryResult awaitSettled(Reply.QueryResult result) {
        if (result.status() == QueryStatus.FINAL) return result;
        await(events.await(result.operationId(), CompletionEvent.QUERY_SETTLED), "QUERY_SETTLED");
        Reply.QueryResult settled = poll(result.operationId(), result.revision());
        if (settled.status() != QueryStatus.FINAL) {
            throw new IllegalStateException("operation " + result.operationId() + " is PENDING after QUERY_SETTLED");
        }
        return settled;
    }

    /**
     * Publishes page images: PUBLISH_RESERVE, then each image is copied into its granted arena
     * slot through the shared mapping, then PUBLISH_COMMIT seals the written slots. Batches
     * larger than the Manager's {@code maxPagesPerPublish} go in several round trips.
     *
     * @return one outcome per page, in order
     */
    public List<PublishOutcome> publish(List<PageToPublish> pages) {
        return publish(pages, Optional.empty());
    }

    /**
     * As {@link #publish(List)}, charging the pages to tenant {@code tenant} of the namespace (a
     * {@code cache_salt}, 1..64 UTF-8 bytes; empty: the namespace's default tenant). A tenant at its
     * DRAM budget makes room from its own pages; if it cannot, its pages are {@code NO_SPACE}
     * (docs/protocol.md 5.6).
     */
    public List<PublishOutcome> publish(List<PageToPublish> pages, Optional<String> tenant) {
        Registration reg = registration();
        int batch = Math.min(reg.limits().maxPagesPerPublish(), reg.limits().maxIdsPerSettle());
        List<PublishOutcome> out = new ArrayList<>(pages.size());
        for (int from = 0; from < pages.size(); from += batch) {
            out.addAll(publishBatch(pages.subList(from, Math.min(pages.size(), from + batch)), tenant));
        }
        return out;
    }

    private List<PublishOutcome> publishBatch(List<PageToPublish> pages, Optional<String> tenant) {
        Reply.Reserved reserved = call(new Request.PublishReserve(pages.stream().map(PageToPublish::entry).toList(),
                tenant), Reply.Reserved.class);
        PublishOutcome[] out = new PublishOutcome[pages.size()];
        List<Long> granted = new ArrayList<>();
        List<Integer> grantedPage = new ArrayList<>();
        try {
            for (int i = 0; i < pages.size(); i++) {
                switch (reserved.outcomes().get(i)) {
                    case Reply.Granted g -> {
                        granted.add(g.reservationId());
                        grantedPage.add(i);
                        // protocol.md 9.6: once closed or fenced, the slot may already hold another page.
                        RuntimeException ended = channel.failure();
                        if (ended != null) throw ended instanceof OrbitKvException ok ? ok.rethrown() : ended;
                        MemorySegment image = pages.get(i).image();
                        MemorySegment.copy(image, 0, mappings.arena(g.arenaIndex()), g.offsetBytes(), image.byteSize());
                    }
                    case Reply.Refused f -> out[i] = switch (f.reason()) {
                        case ALREADY_RESIDENT -> PublishOutcome.ALREADY_RESIDENT;
                        case NO_SPACE -> PublishOutcome.NO_SPACE;
                        case BUSY -> PublishOutcome.BUSY;
                    };
                }
            }
        } catch (RuntimeException e) {
            if (!granted.isEmpty()) send(new Request.PublishAbort(granted), Reply.Aborted.class);
            throw e;
        }
        if (!granted.isEmpty()) {
            List<SettleOutcome> settled = call(new Request.PublishCommit(granted), Reply.Committed.class).outcomes();
            for (int k = 0; k < settled.size(); k++) {
                out[grantedPage.get(k)] = switch (settled.get(k)) {
                    case SEALED -> PublishOutcome.SEALED;
                    case DISCARDED -> PublishOutcome.DISCARDED;
                    case NOT_FOUND, ABORTED -> PublishOutcome.NOT_FOUND;
                };
            }
        }
        return Arrays.asList(out);
    }

    /**
     * Creates (or grows) the shared-memory file {@code path} to {@code pageBytes * pageCount},
     * maps it read-write and registers it as an ENGINE_RESTORE destination. Keep the file until
     * this client is closed.
     */
    public Region registerRegion(Path path, int pageBytes, int pageCount) {
        long size = Math.multiplyExact((long) pageBytes, pageCount);
        Path absolute = path.toAbsolutePath();
        MemorySegment mapping;
        try {
            mapping = mappings.mapRegion(absolute, size);
        } catch (IOException e) {
            throw new UncheckedIOException("mapping region " + absolute + " failed", e);
        }
        Reply.RegionRegistered r = call(new Request.RegisterRegion(absolute.toString(), size, pageBytes, pageCount),
                Reply.RegionRegistered.class);
        return new Region(r.regionId(), absolute, pageBytes, pageCount, mapping);
    }

    /**
     * Creates a destination region of {@code pageBytes * pageCount} in anonymous shared memory (a
     * memfd: nothing on a file system, so no {@code regionDir} is involved), hands its descriptor
     * to the Manager over the descriptor socket and registers it (protocol §5.2, §6.11). Needs
     * {@link #register} first.
     */
    public Region registerPrivateRegion(int pageBytes, int pageCount) {
        long size = Math.multiplyExact((long) pageBytes, pageCount);
        String socket = descriptorSocket;
        if (socket == null) throw new IllegalStateException("register before registering a region");
        SharedMappings.PrivateRegion region;
        try {
            region = mappings.mapPrivateRegion("orbitkv-region", size);
        } catch (IOException e) {
            throw new UncheckedIOException("creating a " + size + "-byte region failed", e);
        }
        DescriptorTicket handle;
        try {
            handle = DescriptorSocket.handOverRegion(socket, region.fd(), replyTimeout);
        } catch (IOException e) {
            throw new UncheckedIOException("handing the region to " + socket + " failed", e);
        } finally {
            UnixSocket.close(region.fd());
        }
        Reply.RegionRegistered r = call(new Request.RegisterRegion(new Request.FromDescriptor(handle), size, pageBytes,
                pageCount), Reply.RegionRegistered.class);
        return new Region(r.regionId(), Path.of("memfd:orbitkv-region"), pageBytes, pageCount, region.mapping());
    }

    /**
     * Asks the Manager to copy leased RESIDENT pages of an ENGINE_RESTORE operation into
     * {@code region} ({@code mapping}: source page to destination page per group) and waits for
     * COMPLETION RESTORE_DONE. On {@link Reply.Settled#OK} the pages are READY in the region;
     * a FAILED outcome leaves the leases held until {@link #release}.
     */
    public Reply.Completion restore(long operationId, Region region, List<Request.RestorePage> mapping) {
        return await(restoreAsync(operationId, region, mapping), "RESTORE_DONE");
    }

    /** {@link #restore} without waiting: the future completes with COMPLETION RESTORE_DONE. */
    public CompletableFuture<Reply.Completion> restoreAsync(long operationId, Region region,
                                                            List<Request.RestorePage> mapping) {
        return send(new Request.Restore(operationId, region.regionId(), mapping), Reply.RestoreAccepted.class)
                .thenCompose(accepted -> events.await(operationId, CompletionEvent.RESTORE_DONE));
    }

    /** What {@link #queryAndRestore} did: the query's FINAL result, and the restore's COMPLETION when one ran. */
    public record Restored(Reply.QueryResult result, Optional<Reply.Completion> completion) {
        public Restored {
            Objects.requireNonNull(result, "result");
            Objects.requireNonNull(completion, "completion");
        }

        /** True when a restore ran and ended OK: every page of its mapping is READY in the region. */
        public boolean restoredOk() {
            return completion.isPresent() && completion.get().outcome() == Reply.Settled.OK;
        }
    }

    /**
     * An ENGINE_RESTORE hit in one round trip instead of two: sends {@code query} and, right
     * behind it without waiting, a RESTORE of {@code mapping} (the pages the caller expects to be
     * resident), then waits for both replies and the COMPLETION RESTORE_DONE. The Manager handles
     * a connection's requests in order (protocol.md 9.3), so the RESTORE is judged against the
     * QUERY's result: when that is a FINAL hit holding every page of {@code mapping}, the copy
     * starts at once. Otherwise the RESTORE is refused and copies nothing (protocol.md 5.8); then
     * this waits for the result to settle and restores the pages of {@code mapping} it does hold
     * (none: no restore, an empty completion). Either way the operation stays live until
     * {@link #release}.
     *
     * @throws OrbitKvException the QUERY's refusal, or a refusal of the RESTORE that a settled
     *         result does not explain (an unknown region, a destination out of range)
     */
    public Restored queryAndRestore(Request.Query query, Region region, List<Request.RestorePage> mapping) {
        Objects.requireNonNull(region, "region");
        if (mapping.isEmpty()) throw new IllegalArgumentException("an empty restore mapping");
        long op = query.operationId();
        // A RELEASE of this id sent earlier may have been answered already: read it before judging.
        if (events.tracks(op)) channel.readArrived();
        if (events.tracks(op)) {
            // A live operation (a new revision replacing it): a refused QUERY would leave the old
            // revision in place and the pipelined RESTORE would copy its pages, so wait in between.
            return restoreHeld(awaitSettled(query(query)), region, mapping);
        }
        CompletableFuture<Reply.QueryResult> answered = send(query, Reply.QueryResult.class);
        CompletableFuture<Reply.Completion> done = restoreAsync(op, region, mapping);
        // The caller waits once, for the pipeline's last frame (the QUERY_RESULT came before it), not
        // once per reply: a small restore's RESTORE_DONE arrives right behind its RESTORE_ACCEPTED.
        OrbitKvException refused;
        try {
            Reply.Completion completion = await(done, "RESTORE_DONE");
            return new Restored(await(answered, "QUERY"), Optional.of(completion));
        } catch (OrbitKvException e) {
            refused = e;
        }
        // A refused QUERY throws here; its RESTORE was refused too (no such operation) and is dropped.
        Reply.QueryResult result = await(answered, "QUERY");
        if (refused.code() != ErrorCode.NOT_FOUND && refused.code() != ErrorCode.INVALID_DEMAND) throw refused;
        return restoreHeld(awaitSettled(result), region, mapping);
    }

    /** Restores the pages of {@code mapping} that the FINAL {@code settled} holds, if any. */
    private Restored restoreHeld(Reply.QueryResult settled, Region region, List<Request.RestorePage> mapping) {
        List<Request.RestorePage> held = settled.hit() ? heldPages(settled, mapping) : List.of();
        if (held.isEmpty()) return new Restored(settled, Optional.empty());
        return new Restored(settled, Optional.of(restore(settled.operationId(), region, held)));
    }

    /** The entries of {@code mapping} whose source page is RESIDENT in {@code result}. */
    private static List<Request.RestorePage> heldPages(Reply.QueryResult result, List<Request.RestorePage> mapping) {
        List<Request.RestorePage> out = new ArrayList<>(mapping.size());
        for (Request.RestorePage rp : mapping) {
            for (Reply.GroupResult g : result.groups()) {
                if (g.groupId() != rp.groupId()) continue;
                for (Reply.Span s : g.spans()) {
                    long i = rp.sourcePage() - s.firstPage();
                    if (i >= 0 && i < s.entries().size() && s.entries().isResident((int) i)) out.add(rp);
                }
            }
        }
        return out;
    }

    /**
     * RELEASE without waiting: the future completes with RELEASED, or after COMPLETION DRAINED
     * when the reply says I/O is still draining. A request sent after this one on the connection
     * is handled after the release (protocol.md 9.3), so an engine need not wait for it before
     * its next QUERY.
     */
    public CompletableFuture<Reply.Released> releaseAsync(long operationId) {
        return send(new Request.Release(operationId), Reply.Released.class).thenCompose(r -> r.drained()
                ? CompletableFuture.completedFuture(r)
                : events.takeDrained(operationId).thenApply(drained -> r));
    }

    /**
     * Waits for a future this client handed out ({@link #releaseAsync}) as its blocking calls wait:
     * at most the reply timeout, a refusal rethrown as an {@link OrbitKvException}.
     */
    public <T> T join(CompletableFuture<T> future, String what) {
        return await(future, what);
    }

    /**
     * Ends a FINAL operation (RELEASE; of a PENDING one, as CANCEL) and returns once everything
     * it held is released: when the reply says I/O is still draining, after COMPLETION DRAINED.
     */
    public Reply.Released release(long operationId) {
        Reply.Released r = call(new Request.Release(operationId), Reply.Released.class);
        if (!r.drained()) await(events.takeDrained(operationId), "DRAINED");
        return r;
    }

    /** Cancels an operation (CANCEL) and returns once its submitted I/O has drained and all is released. */
    public Reply.Cancelled cancel(long operationId) {
        Reply.Cancelled r = call(new Request.Cancel(operationId), Reply.Cancelled.class);
        if (!r.drained()) await(events.takeDrained(operationId), "DRAINED");
        return r;
    }

    /** The Manager's counters by name (STATS); names a client does not know are kept as well. */
    public Map<String, Long> stats() {
        Map<String, Long> out = new LinkedHashMap<>();
        for (Reply.Counter c : call(new Request.Stats(), Reply.StatsReply.class).counters()) out.put(c.name(), c.value());
        return out;
    }

    /**
     * A value hint for pages of this client's namespace (HINT, protocol §5.12): {@code kind} PIN
     * keeps them in DRAM for {@code durationMillis} (at most the Manager's {@code hintPinMaxMillis},
     * within its per-namespace pinned-byte budget), UNPIN ends that, RETAIN and DEMOTE reorder them
     * for eviction, DROP removes them from DRAM and SSD. {@code durationMillis} is 0 for every kind
     * but PIN. Returns the per-page counts; a page another namespace holds counts as not resident.
     *
     * @throws OrbitKvException with NAMESPACE_MISMATCH for a group the contract lacks
     */
    public Reply.Hinted hint(HintKind kind, int durationMillis, List<Request.QueryGroup> groups) {
        return call(new Request.Hint(kind, durationMillis, groups), Reply.Hinted.class);
    }

    /**
     * Where each named page of this client's namespace is held on the Manager now (CONTAINS,
     * protocol §5.13): one location per page, in the order named, in one round trip. Nothing is
     * leased or staged, so a page reported DRAM or SSD may be gone by the next QUERY; with
     * {@code peers} set, an ABSENT page may be at a peer.
     *
     * @throws OrbitKvException with NAMESPACE_MISMATCH for a group the contract lacks, or
     *         UNKNOWN_OPERATION from a Manager that predates CONTAINS
     */
    public Reply.Contained contains(List<Request.QueryGroup> groups) {
        return call(new Request.Contains(groups), Reply.Contained.class);
    }

    /**
     * A read-only view of a leased RESIDENT page in the shared arena. It stays valid and
     * unchanged until the operation is released, cancelled or replaced, or this client closes.
     */
    public MemorySegment readLease(Reply.Lease lease) {
        return mappings.arena(lease.arenaIndex()).asSlice(lease.offsetBytes(), lease.lengthBytes()).asReadOnly();
    }

    /**
     * A restore mapping for every RESIDENT page of {@code result}, groups in result order, pages
     * ascending, onto consecutive destination pages starting at {@code firstDestinationPage}.
     */
    public static List<Request.RestorePage> residentPages(Reply.QueryResult result, int firstDestinationPage) {
        List<Request.RestorePage> out = new ArrayList<>();
        int destination = firstDestinationPage;
        for (Reply.GroupResult g : result.groups()) {
            for (Reply.Span s : g.spans()) {
                PageEntries pages = s.entries();
                for (int i = 0; i < pages.size(); i++) {
                    if (pages.isResident(i)) {
                        out.add(new Request.RestorePage(g.groupId(), s.firstPage() + i, destination++));
                    }
                }
            }
        }
        return out;
    }

    /** Operations whose COMPLETIONs this client still routes (live or draining on the Manager); for diagnostics. */
    int routedOperations() {
        return events.size();
    }

    /** Closes the socket (the Manager then releases everything of this session after drain), then unmaps. */
    @Override
    public void close() {
        channel.close();
        mappings.close();
    }

    private <R extends Reply> R call(Request request, Class<R> replyType) {
        return await(send(request, replyType), request.type().toString());
    }

    private <T> T await(CompletableFuture<T> future, String what) {
        try {
            long deadline = System.nanoTime() + replyTimeout.toNanos();
            channel.await(future, replyTimeout.toNanos());
            return future.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof OrbitKvException ok) throw ok.rethrown();
            if (cause instanceof RuntimeException re) throw re;
            throw new IllegalStateException(cause);
        } catch (TimeoutException e) {
            throw new UncheckedIOException(new SocketTimeoutException(what + ": no answer within " + replyTimeout));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UncheckedIOException(new InterruptedIOException("interrupted waiting for " + what));
        }
    }
}
