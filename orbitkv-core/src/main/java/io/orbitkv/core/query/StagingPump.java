package io.orbitkv.core.query;

import io.orbitkv.core.storage.StageResult;
import io.orbitkv.state.StateKey;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;
import java.util.function.BooleanSupplier;

/**
 * The stagings of one query operation: the required pages no local DRAM lease covers wait in a
 * queue and are submitted in a window, local ones (SSD, or a peer after a local refusal) one by
 * one through {@link SourceSelector}, pages only peers hold in one {@link RemotePages#fetchAll}
 * batch at a time.
 *
 * <p>Thread model: confined to the session lock, like its {@link QueryOperation}. A staging
 * completes on an I/O thread, hops to {@link QueryServices#callbacks()}, takes the lock, counts
 * itself out ({@link #landed}) and hands its result to the operation.
 *
 * <p>States, all transitions in {@link #transition}: IDLE (nothing queued or in flight) ⇄
 * RUNNING (pages queued or in flight) → STOPPED (the operation stopped: the queue was dropped and
 * nothing more is submitted; what is in flight still lands).
 *
 * <p>Invariants: {@code inFlight} counts the STAGING pages submitted and not landed (ABANDONED ones
 * are the peer wait's), {@code remoteInFlight <= inFlight}; at most {@code stagesPerOperation}
 * local stagings and one peer batch of at most as many pages are in flight; a page's staging bytes
 * are given back exactly once, when it is dropped from the queue or when its staging lands.
 *
 * <p>Design note: the window (64 by default) bounds what a CANCEL waits for: a 65,536-page PENDING
 * query drops its unsubmitted rest without any I/O and waits only for the ≤ 64 reads already
 * submitted. Peer pages go as one batch per window so that one source serves them in one request.
 */
final class StagingPump {

    /** The pump's life; see the class comment. */
    enum State { IDLE, RUNNING, STOPPED }

    private final QueryServices services;
    private final SessionCallback session;
    private final SessionScope scope;
    private final BiConsumer<PageSlot, StageResult> onLanded;
    /** Whether a new read may be submitted now (a prepare's pump closes it while QUERY stagings run). */
    private final BooleanSupplier gate;
    private final ArrayDeque<PageSlot> queue = new ArrayDeque<>();
    private State state = State.IDLE;
    private int inFlight;
    private int remoteInFlight;
    private SourceSelector sources;

    /** @param onLanded gets each landed page and its result, under the session lock, after {@link #landed} */
    StagingPump(QueryServices services, SessionCallback session, SessionScope scope,
                BiConsumer<PageSlot, StageResult> onLanded) {
        this(services, session, scope, onLanded, () -> true);
    }

    /** As above, submitting a read only while {@code gate} holds; a closed gate leaves the page queued. */
    StagingPump(QueryServices services, SessionCallback session, SessionScope scope,
                BiConsumer<PageSlot, StageResult> onLanded, BooleanSupplier gate) {
        this.services = services;
        this.session = session;
        this.scope = scope;
        this.onLanded = onLanded;
        this.gate = gate;
    }

    /** Queues the QUEUED pages of {@code spans} and submits what the window allows; false if there were none. */
    boolean start(List<QueryPlan.SlotSpan> spans) {
        for (QueryPlan.SlotSpan s : spans) {
            for (PageSlot p : s.pages()) if (p.state == PageSlot.State.QUEUED) queue.add(p);
        }
        if (queue.isEmpty()) return false;
        transition(State.RUNNING);
        pump();
        return true;
    }

    /** Whether pages are queued or in flight. */
    boolean busy() {
        return state == State.RUNNING;
    }

    /** Pages queued and not yet submitted. */
    int queued() {
        return queue.size();
    }

    /** Stagings submitted and not landed (abandoned peer fetches excluded). */
    int inFlight() {
        return inFlight;
    }

    /**
     * Submits queued stagings: local pages one by one up to {@code stagesPerOperation} in flight;
     * pages only peers hold in one batch (one request per source), the next batch when the
     * previous one has landed.
     */
    void pump() {
        switch (state) {
            case IDLE, STOPPED -> {
                return;
            }
            case RUNNING -> { }
        }
        int window = services.bounds().stagesPerOperation();
        int peerBatch = remoteInFlight == 0 ? window : 0;
        List<PageSlot> peers = new ArrayList<>();
        for (Iterator<PageSlot> it = queue.iterator(); it.hasNext(); ) {
            PageSlot slot = it.next();
            if (slot.remote ? peers.size() >= peerBatch : inFlight - remoteInFlight >= window) continue;
            if (!gate.getAsBoolean()) break;
            it.remove();
            slot.state = PageSlot.State.STAGING;
            inFlight++;
            if (slot.remote) {
                peers.add(slot);
                continue;
            }
            land(slot, selector().stage(SourceSelector.routes(services.store(), services.planner().remote(), slot.key,
                    scope, slot.stagingBytes), miss(slot.key)));
        }
        if (!peers.isEmpty()) fetchFromPeers(peers);
    }

    private void fetchFromPeers(List<PageSlot> peers) {
        remoteInFlight += peers.size();
        List<StateKey> keys = new ArrayList<>(peers.size());
        for (PageSlot p : peers) keys.add(p.key);
        List<CompletableFuture<StageResult>> fetches;
        try {
            fetches = services.planner().remote().fetchAll(keys, scope);
        } catch (RuntimeException e) {
            SourceSelector.unexpected("StagingPump.fetchFromPeers", e);
            fetches = List.of();
        }
        for (int i = 0; i < peers.size(); i++) {
            PageSlot slot = peers.get(i);
            land(slot, i < fetches.size() ? fetches.get(i) : CompletableFuture.completedFuture(miss(slot.key)));
        }
    }

    /** When {@code staging} completes: hop to a callback thread, take the lock, count it out, tell the operation. */
    private void land(PageSlot slot, CompletableFuture<StageResult> staging) {
        staging.whenCompleteAsync((result, failure) -> {
            StageResult r = result;
            if (failure != null || result == null) {
                SourceSelector.unexpected("StagingPump.land", failure != null ? failure
                        : new IllegalStateException("a staging completed without a result"));
                r = miss(slot.key);
            }
            synchronized (session.lock()) {
                landed(slot);
                onLanded.accept(slot, r);
            }
        }, services.callbacks());
    }

    /** A staging landed: its bytes go back to the budget and, unless it was abandoned, it leaves the window. */
    private void landed(PageSlot slot) {
        services.stagingBytes().release(slot.stagingBytes);
        slot.stagingBytes = 0;
        if (slot.state == PageSlot.State.ABANDONED) return;
        inFlight--;
        if (slot.remote) remoteInFlight--;
        idleCheck();
    }

    /** Drops a QUEUED page (given up at the peer wait bound): its bytes back at once, the page FAILED. */
    void drop(PageSlot slot) {
        queue.remove(slot);
        services.stagingBytes().release(slot.stagingBytes);
        slot.stagingBytes = 0;
        slot.state = PageSlot.State.FAILED;
        idleCheck();
    }

    /** Takes a STAGING peer page out of the window: it is ABANDONED, and its bytes come back when it lands. */
    void abandon(PageSlot slot) {
        slot.state = PageSlot.State.ABANDONED;
        inFlight--;
        remoteInFlight--;
        idleCheck();
    }

    /** The operation stopped: drops the queue (bytes back, pages FAILED); nothing more is submitted. */
    void stop() {
        for (PageSlot p : queue) {
            services.stagingBytes().release(p.stagingBytes);
            p.stagingBytes = 0;
            p.state = PageSlot.State.FAILED;
        }
        queue.clear();
        transition(State.STOPPED);
    }

    private void idleCheck() {
        if (state == State.RUNNING && inFlight == 0 && queue.isEmpty()) transition(State.IDLE);
    }

    private SourceSelector selector() {
        if (sources == null) sources = new SourceSelector(services.store().costObserver());
        return sources;
    }

    private static StageResult miss(StateKey key) {
        return new StageResult.Miss(key, StageResult.MissReason.NOT_FOUND);
    }

    private void transition(State next) {
        boolean legal = switch (state) {
            case IDLE -> next == State.RUNNING || next == State.STOPPED;
            case RUNNING -> next == State.IDLE || next == State.STOPPED;
            case STOPPED -> next == State.STOPPED;
        };
        if (!legal) throw new IllegalStateException("staging pump: " + state + " -> " + next);
        state = next;
    }
}
