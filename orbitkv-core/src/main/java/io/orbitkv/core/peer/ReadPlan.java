package io.orbitkv.core.peer;

import io.orbitkv.state.StateKey;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * The ordered routes by which one page may be read (the seed's ReadPlan): local DRAM, local SSD,
 * then peer candidates, DRAM before SSD, ties broken by owner id so two planners agree.
 * Immutable; a refusal produces a new plan without the refused owner.
 *
 * @param key       the page
 * @param localDram whether this Manager's DRAM holds it
 * @param localSsd  whether this Manager's SSD holds it
 * @param peers     peer candidates in route order (at most one per owner and medium)
 */
public record ReadPlan(StateKey key, boolean localDram, boolean localSsd, List<PeerCandidate> peers) {

    private static final Comparator<PeerCandidate> ORDER =
            Comparator.comparing(PeerCandidate::route).thenComparing(PeerCandidate::ownerId);

    public ReadPlan {
        Objects.requireNonNull(key, "key");
        List<PeerCandidate> sorted = new ArrayList<>(peers);
        for (PeerCandidate c : sorted) {
            if (!c.key().equals(key)) throw new IllegalArgumentException("candidate for another key: " + c);
        }
        sorted.sort(ORDER);
        peers = List.copyOf(sorted);
    }

    /** The first route to try, or empty when nothing holds the page (a miss: recompute). */
    public Optional<ReadRoute> firstRoute() {
        if (localDram) return Optional.of(ReadRoute.LOCAL_DRAM);
        if (localSsd) return Optional.of(ReadRoute.LOCAL_SSD);
        return peers.isEmpty() ? Optional.empty() : Optional.of(peers.getFirst().route());
    }

    /** The peer candidate to try next, when local routes are exhausted. */
    public Optional<PeerCandidate> nextPeer() {
        return peers.isEmpty() ? Optional.empty() : Optional.of(peers.getFirst());
    }

    /** This plan without {@code candidate} (it was refused for this page only). */
    public ReadPlan without(PeerCandidate candidate) {
        List<PeerCandidate> rest = new ArrayList<>(peers);
        rest.remove(candidate);
        return new ReadPlan(key, localDram, localSsd, rest);
    }

    /** This plan without any candidate of {@code ownerId} (the owner refused or is unreachable). */
    public ReadPlan withoutOwner(String ownerId) {
        return new ReadPlan(key, localDram, localSsd,
                peers.stream().filter(c -> !c.ownerId().equals(ownerId)).toList());
    }
}
