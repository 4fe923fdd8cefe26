package io.orbitkv.core.engine;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.PageLocation;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * CONTAINS (protocol §5.13): where each named page of the session's namespace is held on this
 * Manager now, DRAM or SSD, from index reads alone. One per Manager; stateless apart from its
 * counters ({@code orbitkv_manager_contains_pages_total{location}}).
 *
 * <p>A store keyed by independent chunks (LMCache's L2 lookup, a tier's lookup) asks this for a
 * batch of names in one frame instead of one QUERY per name; a QUERY still decides what an
 * engine may read, with its lease. Nothing here leases, stages, counts a use for an eviction
 * policy or asks peers: the answer can be stale by the next request, and a stale ABSENT or
 * DRAM only costs the caller a miss later. An image or extent of the same key bytes in another
 * namespace is ABSENT, so the reply for another namespace's key is the reply for a key nobody
 * holds; a page reserved but not yet committed is ABSENT (it is not readable yet).
 *
 * <p>Thread model: {@link #locate} runs on session threads under the session's lock and takes
 * no lock of its own; the tiers' index reads are lock-free or take their own short locks.
 */
final class PageLocator {

    private final TieredStore store;
    private final RemotePages remote;
    private final Map<PageLocation, Counter> pages = new EnumMap<>(PageLocation.class);

    PageLocator(TieredStore store, RemotePages remote, MeterRegistry registry) {
        this.store = Objects.requireNonNull(store, "store");
        this.remote = Objects.requireNonNull(remote, "remote");
        for (PageLocation l : PageLocation.values()) {
            pages.put(l, Counter.builder("orbitkv.manager.contains.pages").tag("location", l.name().toLowerCase(Locale.ROOT))
                    .description("pages named by CONTAINS requests, by where they were found").register(registry));
        }
    }

    /**
     * CONTAINED with one location per page of {@code request}, group by group, or ERROR
     * NAMESPACE_MISMATCH (a group the contract lacks; nothing is looked up).
     */
    Reply locate(SessionScope scope, Request.Contains request) {
        for (Request.QueryGroup g : request.groups()) {
            if (scope.contract().group(g.groupId()).isEmpty()) {
                return new Reply.Error(ErrorCode.NAMESPACE_MISMATCH, "group " + g.groupId() + " is not in the contract");
            }
        }
        List<PageLocation> out = new ArrayList<>((int) request.pageCount());
        int[] counts = new int[PageLocation.values().length];
        for (Request.QueryGroup g : request.groups()) {
            for (int i = 0; i < g.hashes().count(); i++) {
                StateKey key = g.form() == KeyForm.BLOCK_HASH
                        ? StateKeys.forBlockHash(scope.digestBytes(), g.groupId(), g.hashes().get(i))
                        : g.hashes().key(i);
                PageLocation at = store.dram().contains(key, scope.namespaceId()) ? PageLocation.DRAM
                        : store.onSsd(key, scope.digest()) ? PageLocation.SSD : PageLocation.ABSENT;
                counts[at.ordinal()]++;
                out.add(at);
            }
        }
        for (PageLocation l : PageLocation.values()) if (counts[l.ordinal()] > 0) pages.get(l).increment(counts[l.ordinal()]);
        return new Reply.Contained(remote.discoverable(), out);
    }
}
