package io.orbitkv.engine;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PeerWait;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.PageRange;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.Requirement;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * A {@link KvPageStore} backed by an OrbitKV Manager: QUERY with target HOST_READY for the
 * prompt's page keys, read the leased images from the mapped arena, RELEASE after the copy;
 * publish through PUBLISH_RESERVE, a write into the granted slot, PUBLISH_COMMIT.
 *
 * <p>Owns its {@link OrbitKvClient} (one connection, one registered engine instance), the
 * operation-id counter, at most one RELEASE in flight and, in {@link PublishMode.Background}, a
 * {@link BackgroundPublisher} (its queue and its one daemon thread). Thread model: confined to the
 * runner's thread (the client itself is thread-safe; the counter is not); the background
 * publisher's thread shares only the client. Invariants: every QUERY is ended
 * by a RELEASE, on a hit after the images were copied ({@link PrefixLookup.Hit#close()}), on a
 * miss at once; a prefix hit's RELEASE is sent without waiting, and its answer is checked before
 * the store's next lookup or publish, so a refusal still surfaces; a QUERY or PUBLISH the Manager
 * refuses BUSY or NO_SPACE (a full table or budget, under load) is a miss or a page not cached,
 * never a failed request; a hit
 * hands out only a gap-free run of RESIDENT pages starting at page 0 whose lease length is the
 * page size, so a short or odd lease shortens the prefix, never corrupts a restore.
 *
 * <p>Engine-neutral: the Jlama and llama.cpp adapters both use it; the image bytes are the
 * adapter's page layout, opaque here. A recurrent or hybrid model registers its own contract
 * ({@link #connect(Path, String, long, Namespace, RecoveryContract)}) and uses
 * {@link #lookupBoundary}, which hands out every group's requirement at one boundary or nothing.
 *
 * <p>Design note: HOST_READY rather than ENGINE_RESTORE because neither engine exposes its KV
 * cache as one registerable region (Jlama keeps each (layer, position) vector as its own tensor;
 * llama.cpp takes K/V only through {@code llama_state_seq_set_data}); the runner copies out of
 * the shared arena mapping. Publishing builds each image in a confined arena first because the client copies it
 * into the slot it is granted; one extra copy of an 8 KiB (CI) to 256 KiB (bench) page.
 *
 * <p>Design note (background publish, {@link PublishMode.Background}): the synchronous publish
 * keeps the engine from its next request for two UDS round trips and the Manager's reserve and
 * seal: 1.5-1.7 ms p50 for 16 pages of 128 KiB on a quiet machine, more when the Manager waits
 * for a core (PublishCost; 2026-12-06). In the background mode the request path only copies the
 * images out of the engine (the engine's memory changes afterwards) and queues them, 0.2 ms. A
 * page still queued is a miss to another engine's lookup, never a wrong answer; this store's own
 * lookups wait (at most {@link #OWN_PUBLISH_WAIT}) for its queued batches that hold their keys,
 * because without the wait the next turn of a conversation recomputed the pages its previous turn
 * had just queued (bench-serve, working set "fits": 88-121 prefilled tokens per request against
 * 83-107 synchronous). Synchronous stays the default: a caller that reads the report's sealed
 * counts (the parity gates) needs them at return.
 *
 * <p>Design note (pipelined RELEASE): a prefix hit's lease ends once the runner copied the images,
 * before the prefill; waiting there for the Manager's answer put one UDS round trip into every
 * hit's time to first token. The Manager handles a connection's requests in order (protocol.md
 * 9.3), so a QUERY or PUBLISH sent after the RELEASE is judged after it; the answer is read when
 * the next request starts, by then usually long arrived.
 */
public final class OrbitKvPageStore implements KvPageStore {

    /**
     * How long a lookup waits for this store's own queued publishes of the pages it asks for:
     * about what recomputing one or two 16-token pages costs the bench model on a loaded core,
     * so a stalled Manager cannot make the wait dearer than the miss.
     */
    static final Duration OWN_PUBLISH_WAIT = Duration.ofMillis(200);

    /** Default byte budget of the background publish queue: 512 pages of 128 KiB. */
    public static final long DEFAULT_PUBLISH_QUEUE_BYTES = 64L << 20;

    /** How {@link #publish} reaches the Manager. */
    public sealed interface PublishMode {
        /** The default: the caller waits for PUBLISH_RESERVE, the copy and PUBLISH_COMMIT; the report holds every outcome. */
        PublishMode SYNCHRONOUS = new Synchronous();

        /** Background with {@link #DEFAULT_PUBLISH_QUEUE_BYTES}. */
        static PublishMode background() {
            return new Background(DEFAULT_PUBLISH_QUEUE_BYTES);
        }

        record Synchronous() implements PublishMode {
        }

        /**
         * The caller copies the images into an owned buffer and returns; one thread of the store
         * publishes queued batches in order. A batch that would take the queued image bytes over
         * {@code publishQueueBytes} is dropped and counted ({@link PublishStats#droppedFull}).
         */
        record Background(long publishQueueBytes) implements PublishMode {
            public Background {
                if (publishQueueBytes <= 0) throw new IllegalArgumentException("publishQueueBytes must be > 0: " + publishQueueBytes);
            }
        }
    }

    private final OrbitKvClient client;
    private final RecoveryContract contract;
    /** The background publisher; null in {@link PublishMode.Synchronous}. */
    private final BackgroundPublisher publisher;
    /** Cumulative outcomes of synchronous publishes. */
    private long syncSealed;
    private long syncPresent;
    private long syncRefused;
    private long nextOperationId = 1;
    /** The last prefix hit's RELEASE, sent and not yet checked; null when none. */
    private CompletableFuture<Reply.Released> releaseInFlight;
    /** The runner's last measured prefill rate in tokens/s, sent in every QUERY; 0 = unknown. */
    private int prefillTokensPerSecond;
    private boolean closed;

    private OrbitKvPageStore(OrbitKvClient client, RecoveryContract contract, PublishMode mode, String instanceId) {
        this.client = client;
        this.contract = contract;
        this.publisher = switch (mode) {
            case PublishMode.Synchronous ignored -> null;
            case PublishMode.Background b -> new BackgroundPublisher("orbitkv-publisher-" + instanceId,
                    b.publishQueueBytes(), client::publish, OrbitKvPageStore::refusedForNow);
        };
    }

    /**
     * Connects to the Manager at {@code socket} and registers engine {@code instanceId} at
     * {@code epoch} (a restarted engine passes a higher epoch) with {@code namespace} and the
     * full-attention contract of {@link FullAttention#contract}.
     */
    public static OrbitKvPageStore connect(Path socket, String instanceId, long epoch, Namespace namespace)
            throws IOException {
        return connect(socket, instanceId, epoch, namespace, FullAttention.contract(namespace.pageTokens()));
    }

    /**
     * As {@link #connect(Path, String, long, Namespace)}, registering {@code contract} (a recurrent
     * or hybrid model's groups); {@link #lookupBoundary} queries every group of it.
     */
    public static OrbitKvPageStore connect(Path socket, String instanceId, long epoch, Namespace namespace,
                                           RecoveryContract contract) throws IOException {
        return connect(socket, instanceId, epoch, namespace, contract, PublishMode.SYNCHRONOUS);
    }

    /** As {@link #connect(Path, String, long, Namespace)}, publishing as {@code mode} says. */
    public static OrbitKvPageStore connect(Path socket, String instanceId, long epoch, Namespace namespace,
                                           PublishMode mode) throws IOException {
        return connect(socket, instanceId, epoch, namespace, FullAttention.contract(namespace.pageTokens()), mode);
    }

    /** As {@link #connect(Path, String, long, Namespace, RecoveryContract)}, publishing as {@code mode} says. */
    public static OrbitKvPageStore connect(Path socket, String instanceId, long epoch, Namespace namespace,
                                           RecoveryContract contract, PublishMode mode) throws IOException {
        OrbitKvClient client = OrbitKvClient.connect(socket);
        try {
            client.register(instanceId, epoch, namespace, contract);
            return new OrbitKvPageStore(client, contract, mode, instanceId);
        } catch (RuntimeException e) {
            client.close();
            throw e;
        }
    }

    /** The Manager's counters (STATS), for reports. */
    public java.util.Map<String, Long> stats() {
        return client.stats();
    }

    /**
     * Records the runner's measured prefill rate (tokens/s; 0 = unknown), sent in the next QUERYs
     * so that the Manager can prefer a shorter DRAM-only prefix over a slow SSD or peer restore
     * (docs/protocol.md 5.3). Until a runner calls this, QUERYs carry 0 and the Manager answers
     * the longest legal prefix.
     */
    public void prefillRate(int tokensPerSecond) {
        if (tokensPerSecond < 0) throw new IllegalArgumentException("prefill rate must be >= 0: " + tokensPerSecond);
        this.prefillTokensPerSecond = tokensPerSecond;
    }

    /**
     * Folds one measured prefill into the rate sent with later QUERYs: an EWMA (weight 1/4) of
     * tokens per second, so one slow request under load does not swing the Manager's choice.
     * Prefills shorter than {@value #MIN_RATE_SAMPLE_TOKENS} tokens are ignored: their time is
     * dominated by per-call overhead, not by the per-token cost the Manager needs.
     */
    @Override
    public void prefillObserved(long tokens, long nanos) {
        if (tokens < MIN_RATE_SAMPLE_TOKENS || nanos <= 0) return;
        double rate = tokens * 1e9 / nanos;
        double smoothed = prefillTokensPerSecond == 0 ? rate : prefillTokensPerSecond + (rate - prefillTokensPerSecond) / 4;
        prefillRate((int) Math.min(Integer.MAX_VALUE, Math.max(1, Math.round(smoothed))));
    }

    /** Prefills shorter than this many tokens do not train the rate. */
    static final int MIN_RATE_SAMPLE_TOKENS = 8;

    /** The rate the next QUERY carries (tokens/s; 0 = unknown). */
    public int prefillRate() {
        return prefillTokensPerSecond;
    }

    @Override
    public PrefixLookup lookupPrefix(List<StateKey> pageKeys, long promptTokens) {
        settleRelease();
        awaitOwnPublishes(pageKeys);
        long operationId = nextOperationId++;
        // A clustered Manager may wait for peers as long as recomputing the prompt would take.
        Request.Query query = new Request.Query(operationId, 0, CompletionTarget.HOST_READY, promptTokens, 0,
                prefillTokensPerSecond, PeerWait.millisFor(promptTokens, prefillTokensPerSecond),
                List.of(new Request.QueryGroup(FullAttention.GROUP, KeyForm.STATE_KEY, Hashes.ofKeys(pageKeys))));
        Settled settled = settle(query);
        if (settled.refusal() != null) return new PrefixLookup.Miss(settled.refusal());
        Reply.QueryResult result = settled.result();
        HitSource source = settled.source();
        List<MemorySegment> images = result.hit() ? leasedPrefix(result, pageKeys.size()) : List.of();
        if (images.isEmpty()) {
            release(operationId);
            return new PrefixLookup.Miss(result.hit() ? "hit without a usable page 0" : "boundary " + result.boundaryTokens());
        }
        return new PrefixLookup.Hit(images, source, () -> releaseInFlight = client.releaseAsync(operationId));
    }

    /**
     * PREPARE of the prefix {@link #lookupPrefix} will ask for (its own operation id: the Manager
     * ends it once a QUERY consumed its pages, or at first use plus its grace). A refusal for now
     * (BUSY, or a speculation budget that is full) is {@code false}, not an error.
     */
    @Override
    public boolean prepare(List<StateKey> pageKeys, long promptTokens, int firstUseMillis) {
        if (pageKeys.isEmpty()) return false;
        Request.Prepare prepare = new Request.Prepare(nextOperationId++, firstUseMillis, 0, promptTokens, 0,
                List.of(new Request.QueryGroup(FullAttention.GROUP, KeyForm.STATE_KEY, Hashes.ofKeys(pageKeys))));
        try {
            return client.prepare(prepare).outcome() != Reply.PrepareOutcome.REFUSED;
        } catch (OrbitKvException e) {
            if (!refusedForNow(e)) throw e;
            return false;
        }
    }

    /** A settled QUERY and where its first answer said the hit comes from; or only why the Manager refused it. */
    private record Settled(Reply.QueryResult result, HitSource source, String refusal) {
    }

    /** Sends {@code query} and waits until it settled; a refusal for now ({@link #refusedForNow}) is returned, not thrown. */
    private Settled settle(Request.Query query) {
        Reply.QueryResult first;
        try {
            first = client.query(query);
        } catch (OrbitKvException e) {
            if (!refusedForNow(e)) throw e;
            return new Settled(null, HitSource.NONE, refusal("QUERY", e));
        }
        HitSource source = first.status() == QueryStatus.FINAL ? HitSource.DRAM : HitSource.STAGED;
        return new Settled(client.awaitSettled(first), source, null);
    }

    private List<MemorySegment> leasedPrefix(Reply.QueryResult result, int maxPages) {
        List<MemorySegment> images = new ArrayList<>();
        long expectedLength = -1;
        for (Reply.GroupResult group : result.groups()) {
            if (group.groupId() != FullAttention.GROUP) continue;
            for (Reply.Span span : group.spans()) {
                if (span.firstPage() != images.size()) return images;
                for (Reply.PageResult page : span.pages()) {
                    if (images.size() == maxPages || !(page instanceof Reply.Resident resident)) return images;
                    if (expectedLength == -1) expectedLength = resident.lease().lengthBytes();
                    if (resident.lease().lengthBytes() != expectedLength) return images;
                    images.add(client.readLease(resident.lease()));
                }
            }
        }
        return images;
    }

    /**
     * QUERYs every group of the registered contract (entry {@code i} of a recurrent group names the
     * checkpoint at {@code (i+1)*P}) and, on a hit at {@code t}, takes each group's requirement
     * ({@link RecoveryContract#requiredRanges}) from the result as RESIDENT leases. A group whose
     * requirement is not wholly RESIDENT turns the whole answer into a miss (the operation is
     * released at once): a hybrid model's attention pages never restore without the checkpoint at
     * the same boundary. Work is bounded by the pages the requirement names.
     */
    @Override
    public StateLookup lookupBoundary(Map<Integer, List<StateKey>> keysByGroup, long promptTokens) {
        settleRelease();
        List<Request.QueryGroup> groups = new ArrayList<>(contract.groups().size());
        for (StateGroup g : contract.groups()) {
            List<StateKey> keys = keysByGroup.get(g.id());
            if (keys == null) throw new IllegalArgumentException("no keys for group " + g.id() + " of the contract");
            groups.add(new Request.QueryGroup(g.id(), KeyForm.STATE_KEY, Hashes.ofKeys(keys)));
        }
        if (keysByGroup.size() != groups.size()) {
            throw new IllegalArgumentException("keys for groups " + keysByGroup.keySet() + ", contract " + contract.groups());
        }
        awaitOwnPublishes(keysByGroup.values().stream().flatMap(List::stream).toList());
        long operationId = nextOperationId++;
        Request.Query query = new Request.Query(operationId, 0, CompletionTarget.HOST_READY, promptTokens, 0,
                prefillTokensPerSecond, PeerWait.millisFor(promptTokens, prefillTokensPerSecond), groups);
        Settled settled = settle(query);
        if (settled.refusal() != null) return new StateLookup.Miss(settled.refusal());
        Reply.QueryResult result = settled.result();
        HitSource source = settled.source();
        if (!result.hit()) {
            release(operationId);
            return new StateLookup.Miss("no legal boundary (boundary " + result.boundaryTokens() + ")");
        }
        long t = result.boundaryTokens();
        Map<Integer, List<MemorySegment>> images = new HashMap<>();
        for (Requirement required : contract.requiredRanges(t, 0)) {
            List<MemorySegment> leased = leased(result, required);
            if (leased.isEmpty()) {
                release(operationId);
                return new StateLookup.Miss("group " + required.groupId() + " not wholly resident at boundary " + t
                        + ": the groups restore together or not at all");
            }
            images.put(required.groupId(), leased);
        }
        return new StateLookup.Hit(t, images, source, () -> release(operationId));
    }

    /** The RESIDENT images of exactly the pages {@code required} names, in order; empty if any is missing. */
    private List<MemorySegment> leased(Reply.QueryResult result, Requirement required) {
        List<PageRange> ranges = switch (required) {
            case Requirement.Pages pages -> pages.ranges();
            case Requirement.Checkpoint c -> List.of(new PageRange(c.boundaryTokens() / contract.pageTokens() - 1,
                    c.boundaryTokens() / contract.pageTokens()));
        };
        Map<Long, Reply.Resident> resident = new HashMap<>();
        for (Reply.GroupResult group : result.groups()) {
            if (group.groupId() != required.groupId()) continue;
            for (Reply.Span span : group.spans()) {
                for (int i = 0; i < span.pages().size(); i++) {
                    if (span.pages().get(i) instanceof Reply.Resident r) resident.put(span.firstPage() + i, r);
                }
            }
        }
        List<MemorySegment> out = new ArrayList<>();
        for (PageRange range : ranges) {
            for (long page = range.startPage(); page < range.endPage(); page++) {
                Reply.Resident r = resident.get(page);
                if (r == null) return List.of();
                out.add(client.readLease(r.lease()));
            }
        }
        return out;
    }

    /**
     * In background mode, waits (at most {@link #OWN_PUBLISH_WAIT}) until no batch this store
     * queued holds one of {@code keys}: the engine's next turn of a conversation looks up the pages
     * its last request computed, and without the wait finds them still queued and recomputes them.
     * An interrupt ends the wait (the flag is kept); the lookup then misses those pages.
     */
    private void awaitOwnPublishes(List<StateKey> keys) {
        if (publisher == null) return;
        try {
            publisher.awaitKeysPublished(keys, OWN_PUBLISH_WAIT);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void release(long operationId) {
        try {
            client.release(operationId);
        } catch (OrbitKvException e) {
            requireReleased(e);
        }
    }

    /** Waits for the pipelined RELEASE of the last prefix hit, if one is in flight; a refusal is thrown. */
    private void settleRelease() {
        CompletableFuture<Reply.Released> inFlight = releaseInFlight;
        if (inFlight == null) return;
        releaseInFlight = null;
        try {
            client.join(inFlight, "RELEASE");
        } catch (OrbitKvException e) {
            requireReleased(e);
        }
    }

    /**
     * True for the refusals a busy Manager gives any request (protocol.md 7.2: BUSY, a bounded
     * table is full; NO_SPACE, no room for the bytes now): the engine computes instead, as on a
     * miss. Every other error is a fault of the caller or the connection and is thrown.
     */
    static boolean refusedForNow(OrbitKvException e) {
        return e.code() == ErrorCode.BUSY || e.code() == ErrorCode.NO_SPACE;
    }

    private static String refusal(String request, OrbitKvException e) {
        return "the Manager refused the " + request + " for now (" + e.code() + "): " + e.getMessage();
    }

    /** A FINAL miss may hold nothing the Manager still tracks: NOT_FOUND ends it as well; anything else is thrown. */
    private static void requireReleased(OrbitKvException e) {
        if (e.code() != ErrorCode.NOT_FOUND) throw e;
    }

    @Override
    public PublishReport publish(List<StateKey> pageKeys, long imageBytes, PageImageWriter writer) {
        return publish(FullAttention.GROUP, pageKeys, imageBytes, writer);
    }

    /**
     * Publishes one image per key. Synchronous mode: as {@link KvPageStore#publish}, the report
     * holds every page's outcome. Background mode: the images are copied on this thread into a
     * queued buffer and the report says {@link PublishReport#queued queued} (or refused, when the
     * queue's budget is full); outcomes reach {@link #publishStats()}.
     */
    @Override
    public PublishReport publish(int groupId, List<StateKey> pageKeys, long imageBytes, PageImageWriter writer) {
        settleRelease();
        if (pageKeys.isEmpty()) return PublishReport.NONE;
        if (publisher != null) return publisher.offer(groupId, pageKeys, imageBytes, writer);
        try (Arena images = Arena.ofConfined()) {
            List<PageToPublish> pages = new ArrayList<>(pageKeys.size());
            for (int i = 0; i < pageKeys.size(); i++) {
                MemorySegment image = images.allocate(imageBytes, 64);
                writer.write(i, image);
                pages.add(PageToPublish.ofKey(groupId, pageKeys.get(i), image));
            }
            List<PublishOutcome> outcomes;
            try {
                outcomes = client.publish(pages);
            } catch (OrbitKvException e) {
                if (!refusedForNow(e)) throw e;
                // not cached this time, the request's result stands; counted refused as a whole, though
                // an earlier batch of a multi-batch publish may have sealed
                syncRefused += pages.size();
                return new PublishReport(0, 0, pages.size());
            }
            int sealed = 0;
            int present = 0;
            int refused = 0;
            for (PublishOutcome outcome : outcomes) {
                switch (outcome) {
                    case SEALED -> sealed++;
                    case DISCARDED, ALREADY_RESIDENT -> present++;
                    case NO_SPACE, BUSY, NOT_FOUND -> refused++;
                }
            }
            syncSealed += sealed;
            syncPresent += present;
            syncRefused += refused;
            return new PublishReport(sealed, present, refused);
        }
    }

    /**
     * Waits at most {@code timeout} until every batch queued before this call has been published,
     * refused or dropped; true at once in synchronous mode.
     */
    @Override
    public boolean awaitPublished(Duration timeout) throws InterruptedException {
        return publisher == null || publisher.awaitPublished(timeout);
    }

    /** Cumulative publish counts since this store connected (the background queue's included). */
    public PublishStats publishStats() {
        if (publisher == null) return new PublishStats(0, syncSealed, syncPresent, syncRefused, 0, 0, 0, 0, 0, 0, 0);
        return publisher.stats();
    }

    /**
     * Closes the connection once; later calls do nothing (the client's own close is not idempotent).
     * In background mode the batches still queued are abandoned (freed, counted dropped) and the one
     * in flight is finished first: call {@link #awaitPublished} before to publish everything.
     */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        releaseInFlight = null;   // a closed connection ends its operations anyway (protocol.md 9.6)
        try {
            if (publisher != null) publisher.close();
        } finally {
            client.close();
        }
    }
}
