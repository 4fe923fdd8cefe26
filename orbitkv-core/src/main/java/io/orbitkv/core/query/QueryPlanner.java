package io.orbitkv.core.query;

import io.orbitkv.core.storage.LookupResult;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.ssd.Pin;
import io.orbitkv.state.BoundarySelection;
import io.orbitkv.state.Coverage;
import io.orbitkv.state.GroupCoverage;
import io.orbitkv.state.PageRange;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.Requirement;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.PageEntries;
import io.orbitkv.state.protocol.PageState;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * Turns a QUERY into a {@link QueryPlan}: derives each page's key in the session's namespace,
 * looks every candidate page up in the {@link TieredStore} (DRAM lease, SSD pin, or miss),
 * builds the coverage, lets {@link RecoveryContract#select} pick the largest legal boundary, and
 * keeps exactly the required pages: DRAM leases are kept, SSD pages become staging slots, every
 * other lease and every pin is let go before it returns.
 *
 * <p>Stateless apart from the store and a lock-free cache of derived block-hash keys
 * ({@link BlockKeyCache}); thread-safe. Never blocks on I/O (lookups are index reads).
 *
 * <p>Namespace isolation: a block-hash page's key is {@code StateKeys.forBlockHash(session
 * digest, group, hash)}, so it can only name this namespace's pages; a STATE_KEY page is served
 * only if the DRAM image's namespace id, or the SSD extent's namespace digest, is the session's,
 * otherwise it is a MISS.
 *
 * <p>Design note: only pages that can matter are looked up: page {@code i} of a group for
 * {@code origin/P <= i < cap/P} (a recurrent group's page {@code i} names the checkpoint at
 * {@code (i+1)·P}, which is a candidate exactly in that range), and below the first page a full
 * attention group lacks, since no legal boundary passes it: full groups are looked up first, so
 * a cold QUERY of 1,024 pages derives and looks up one key per full group, not 1,024. Looking up leases every resident
 * page; the pages the selection does not require are released at once. The alternative, a
 * lease-free probe followed by leasing the required pages, would need a second pass and a retry
 * when an image is evicted between the two; the lease pins it instead, and a lookup is ~100 ns,
 * so a 65,536-page query spends ~7 ms here, against the ~30 ms of SHA-256 key derivation.
 */
public final class QueryPlanner {

    private final TieredStore store;
    private final BlockKeyCache keys = new BlockKeyCache();
    private final RemotePages remote;

    public QueryPlanner(TieredStore store) {
        this(store, RemotePages.NONE);
    }

    /** A planner whose local misses may be served by peers through {@code remote}. */
    public QueryPlanner(TieredStore store, RemotePages remote) {
        this.store = Objects.requireNonNull(store, "store");
        this.remote = Objects.requireNonNull(remote, "remote");
    }

    /** The peer routes this planner offers after local DRAM and SSD. */
    public RemotePages remote() {
        return remote;
    }

    /** The error a QUERY deserves before any lookup, or empty if it fits the session's contract. */
    public Optional<Reply.Error> check(Request.Query query, SessionScope scope) {
        RecoveryContract contract = scope.contract();
        for (Request.QueryGroup g : query.groups()) {
            if (contract.group(g.groupId()).isEmpty()) {
                return Optional.of(new Reply.Error(ErrorCode.NAMESPACE_MISMATCH,
                        "group " + g.groupId() + " is not in the registered contract"));
            }
        }
        if (query.originTokens() % contract.pageTokens() != 0) {
            return Optional.of(new Reply.Error(ErrorCode.INVALID_DEMAND, "origin_tokens " + query.originTokens()
                    + " is not a multiple of page_tokens " + contract.pageTokens()));
        }
        for (StateGroup g : contract.groups()) {
            if (query.groups().stream().noneMatch(q -> q.groupId() == g.id())) {
                return Optional.of(new Reply.Error(ErrorCode.INVALID_DEMAND, "contract group " + g.id() + " is missing"));
            }
        }
        return Optional.empty();
    }

    /** Which sources a plan may use. */
    enum Sources {
        /** Local DRAM, local SSD and peers (the candidates known now). */
        ALL,
        /** Local DRAM and local SSD: past a QUERY's peer wait bound. */
        LOCAL,
        /** Local DRAM only: nothing to stage. */
        DRAM
    }

    /** Plans {@code query} from every source, without a staging cap. */
    QueryPlan plan(Request.Query query, SessionScope scope, Set<StateKey> excluded, boolean dramOnly) {
        return plan(query, scope, excluded, dramOnly ? Sources.DRAM : Sources.ALL, Long.MAX_VALUE);
    }

    /**
     * Plans {@code query} (which passed {@link #check}). {@code excluded} keys count as missing
     * (their staging failed earlier); {@code sources} says which sources count; pages to stage are
     * admitted in lookup order (full groups first, each in page order) while their padded bytes
     * sum to at most {@code stagingCapBytes}, and count as missing past it, so a staging set too
     * large for the budget yields the longest legal boundary that fits rather than a refusal.
     */
    QueryPlan plan(Request.Query query, SessionScope scope, Set<StateKey> excluded, Sources sources,
                   long stagingCapBytes) {
        boolean dramOnly = sources == Sources.DRAM;
        long[] stagingLeft = {stagingCapBytes};
        RecoveryContract contract = scope.contract();
        int p = contract.pageTokens();
        long originPage = query.originTokens() / p;
        long capPage = contract.capTokens(query.promptTokens()) / p;
        Map<Integer, Request.QueryGroup> byId = new HashMap<>();
        for (Request.QueryGroup g : query.groups()) byId.put(g.groupId(), g);

        // Full groups first: no boundary passes a full group's first missing page, so the other
        // groups are looked up only below the lowest such page (a cold miss costs one lookup).
        Map<Integer, Found> byGroup = new HashMap<>();
        long bound = capPage;
        for (StateGroup group : contract.groups()) {
            if (!(group instanceof StateGroup.Full)) continue;
            Request.QueryGroup qg = byId.get(group.id());
            Found f = lookUp(qg, scope, originPage, Math.min(bound, qg.hashes().count()), excluded, sources,
                    stagingLeft, true);
            byGroup.put(group.id(), f);
            bound = Math.min(bound, f.firstMissingPage());
        }
        List<Found> found = new ArrayList<>(contract.groups().size());
        Map<Integer, GroupCoverage> coverage = new HashMap<>();
        for (StateGroup group : contract.groups()) {
            Request.QueryGroup qg = byId.get(group.id());
            Found f = byGroup.containsKey(group.id()) ? byGroup.get(group.id())
                    : lookUp(qg, scope, originPage, Math.min(bound, qg.hashes().count()), excluded, sources,
                            stagingLeft, false);
            found.add(f);
            coverage.put(group.id(), switch (group) {
                case StateGroup.Recurrent r -> GroupCoverage.checkpoints(f.checkpoints(p));
                case StateGroup.Full ignored -> GroupCoverage.pages(f.ranges());
                case StateGroup.SlidingWindow ignored -> GroupCoverage.pages(f.ranges());
            });
        }
        BoundarySelection selection = contract.select(Coverage.of(coverage), candidatePrompt(query, p),
                query.originTokens(), 0);
        return switch (selection) {
            case BoundarySelection.Hit hit -> keepRequired(hit, found, p);
            case BoundarySelection.NoHit ignored -> {
                for (Found f : found) f.letGo();
                yield new QueryPlan.Miss(missGroups(found));
            }
        };
    }

    /**
     * Keys of the pages a peer might add to {@code plan}: in every group, the candidate pages at or
     * above the plan's boundary page (from the origin for a miss) and below the prompt's cap that
     * no local tier holds now, page order per group, at most {@code limit} in all. Index reads only
     * (no lease, no pin, no catalog call); key derivation is the cost (~0.5 µs a page).
     */
    List<StateKey> missingLocally(Request.Query query, SessionScope scope, QueryPlan plan, int limit) {
        RecoveryContract contract = scope.contract();
        int p = contract.pageTokens();
        long fromPage = (plan instanceof QueryPlan.Hit h ? h.boundaryTokens() : query.originTokens()) / p;
        long capPage = contract.capTokens(query.promptTokens()) / p;
        List<StateKey> out = new ArrayList<>();
        for (Request.QueryGroup qg : query.groups()) {
            long to = Math.min(capPage, qg.hashes().count());
            DramTier.RunKeys groupKeys = keysOf(qg, scope);
            for (long page = Math.max(fromPage, query.originTokens() / p); page < to && out.size() < limit; page++) {
                StateKey key = groupKeys.key((int) page);
                if (!store.holdsLocally(key, scope.namespaceId(), scope.digest())) {
                    out.add(key);
                }
            }
        }
        return out;
    }

    /**
     * The prompt length the boundary scan may consider: {@code prompt_tokens}, but no more than
     * the pages the QUERY names, since no boundary beyond its last named page can be legal (a full
     * or window group needs the page below the boundary, a recurrent group a checkpoint named by a
     * page). {@code RecoveryContract.select} scans candidates one page at a time from the cap down,
     * so this keeps a QUERY's work proportional to its frame ({@code maxPagesPerQuery} pages at
     * most), never to a {@code prompt_tokens} the client chose (2^62 would scan for ever).
     */
    static long candidatePrompt(Request.Query query, int pageTokens) {
        long pages = 0;
        for (Request.QueryGroup g : query.groups()) pages = Math.max(pages, g.hashes().count());
        // hash i names page i of the prompt (absolute, pages below the origin included)
        return Math.min(query.promptTokens(), pages * pageTokens + 1);
    }

    /** Looks up pages {@code [from, to)}; with {@code stopAtMiss}, stops after the first unavailable one. */
    private Found lookUp(Request.QueryGroup qg, SessionScope scope, long from, long to, Set<StateKey> excluded,
                         Sources sources, long[] stagingLeft, boolean stopAtMiss) {
        boolean dramOnly = sources == Sources.DRAM;
        int n = (int) Math.max(0, to - from);
        Found f = new Found(qg.groupId(), from, n);
        DramTier.RunKeys groupKeys = keysOf(qg, scope);
        // the run's index i is page from + i of the prompt
        DramTier.RunKeys keyOf = new DramTier.RunKeys() {
            @Override
            public StateKey key(int i) {
                return groupKeys.key((int) (from + i));
            }

            @Override
            public Object hint(int i) {
                return groupKeys.hint((int) (from + i));
            }

            @Override
            public void remember(int i, Object found) {
                groupKeys.remember((int) (from + i), found);
            }
        };
        // Runs of DRAM-resident pages are leased in bulk (one slot-table lock trip per run); the
        // page a run stops at, and every page when some keys are excluded, takes the full lookup.
        boolean runs = excluded.isEmpty();
        for (int i = 0; i < n; i++) {
            if (stopAtMiss && i > 0 && !f.available(i - 1)) return f.truncate(i);
            StateKey key;
            if (runs) {
                i = store.leaseRun(keyOf, i, n, scope.namespaceId(), f.keys, f.leases);
                if (i == n) break;
                key = f.keys[i];
            } else {
                key = keyOf.key(i);
                f.keys[i] = key;
                if (excluded.contains(key)) continue;
            }
            switch (store.lookup(key, scope.namespaceId(), scope.digest())) {
                case LookupResult.InDram(Lease lease) -> f.leases[i] = lease;
                case LookupResult.OnSsd(Pin pin) -> {
                    if (!dramOnly) f.stagingBytes[i] = pin.paddedPayloadBytes();
                    store.unpin(pin);
                }
                case LookupResult.Miss ignored -> {
                    // Routes 3-4: a page only peers hold is staged like an SSD page (CANDIDATE ->
                    // RESERVED -> RESIDENT), so PENDING/settle and the staging budget cover it too.
                    if (sources == Sources.ALL) {
                        f.stagingBytes[i] = remote.stagingBytes(key, scope);
                        f.remote[i] = f.stagingBytes[i] > 0;
                    }
                }
            }
            if (f.stagingBytes[i] > stagingLeft[0]) {
                f.stagingBytes[i] = 0; // past the staging cap: missing for this plan
                f.remote[i] = false;
            } else {
                stagingLeft[0] -= f.stagingBytes[i];
            }
        }
        return f;
    }

    /**
     * The key source of one group of a QUERY, indexed by page of the prompt: block hashes through
     * {@link BlockKeyCache#prompt} (which also keeps the DRAM tier's hints), StateKeys as sent.
     */
    private DramTier.RunKeys keysOf(Request.QueryGroup qg, SessionScope scope) {
        if (qg.form() != KeyForm.BLOCK_HASH) return qg.hashes()::key;
        return keys.prompt(scope, qg.groupId(), qg.hashes());
    }

    private static QueryPlan.Hit keepRequired(BoundarySelection.Hit hit, List<Found> found, int p) {
        List<QueryPlan.SlotSpan> spans = new ArrayList<>();
        for (int g = 0; g < found.size(); g++) {
            Found f = found.get(g);
            Requirement r = hit.required().get(g);
            List<PageRange> ranges = switch (r) {
                case Requirement.Pages pages -> pages.ranges();
                case Requirement.Checkpoint c -> List.of(new PageRange(c.boundaryTokens() / p - 1, c.boundaryTokens() / p));
            };
            for (PageRange range : ranges) {
                if (range.pages() == 0) continue;
                PageSlot[] slots = new PageSlot[(int) range.pages()];
                for (long page = range.startPage(); page < range.endPage(); page++) {
                    int i = (int) (page - f.from);
                    slots[(int) (page - range.startPage())] = f.leases[i] != null
                            ? PageSlot.resident(f.groupId, page, f.take(i))
                            : PageSlot.toStage(f.groupId, page, f.keys[i], f.stagingBytes[i], f.remote[i]);
                }
                spans.add(new QueryPlan.SlotSpan(f.groupId, range.startPage(), slots));
            }
            f.letGo();
        }
        return new QueryPlan.Hit(hit.boundaryTokens(), hit.required(), spans);
    }

    /** One span per group over the looked-up pages: CANDIDATE where a replica was found, else MISS. */
    private static List<Reply.GroupResult> missGroups(List<Found> found) {
        List<Reply.GroupResult> out = new ArrayList<>(found.size());
        for (Found f : found) {
            if (f.keys.length == 0) {
                out.add(new Reply.GroupResult(f.groupId, List.of()));
                continue;
            }
            PageEntries.Builder pages = PageEntries.builder(f.keys.length);
            for (int i = 0; i < f.keys.length; i++) pages.unleased(f.available(i) ? PageState.CANDIDATE : PageState.MISS);
            out.add(new Reply.GroupResult(f.groupId, List.of(new Reply.Span(f.from, pages.build()))));
        }
        return out;
    }

    /** One group's looked-up pages {@code [from, from + n)}: keys, leases held, SSD bytes to stage. */
    private static final class Found {
        final int groupId;
        final long from;
        final StateKey[] keys;
        final Lease[] leases;
        final long[] stagingBytes;
        /** Whether a page to stage is held only by peers (fetched in one batch per source). */
        final boolean[] remote;

        Found(int groupId, long from, int n) {
            this(groupId, from, new StateKey[n], new Lease[n], new long[n], new boolean[n]);
        }

        private Found(int groupId, long from, StateKey[] keys, Lease[] leases, long[] stagingBytes, boolean[] remote) {
            this.groupId = groupId;
            this.from = from;
            this.keys = keys;
            this.leases = leases;
            this.stagingBytes = stagingBytes;
            this.remote = remote;
        }

        /** The first {@code n} pages only (nothing is held beyond them). */
        Found truncate(int n) {
            return new Found(groupId, from, Arrays.copyOf(keys, n), Arrays.copyOf(leases, n),
                    Arrays.copyOf(stagingBytes, n), Arrays.copyOf(remote, n));
        }

        /** The first page looked up that is not available, or one past the last looked up. */
        long firstMissingPage() {
            for (int i = 0; i < keys.length; i++) if (!available(i)) return from + i;
            return from + keys.length;
        }

        boolean available(int i) {
            return leases[i] != null || stagingBytes[i] > 0;
        }

        Lease take(int i) {
            Lease l = leases[i];
            leases[i] = null;
            return l;
        }

        /** Releases every lease still held (those not taken into the plan). */
        void letGo() {
            for (int i = 0; i < leases.length; i++) {
                if (leases[i] != null) {
                    leases[i].release();
                    leases[i] = null;
                }
            }
        }

        List<PageRange> ranges() {
            List<PageRange> out = new ArrayList<>();
            int i = 0;
            while (i < keys.length) {
                if (!available(i)) {
                    i++;
                    continue;
                }
                int start = i;
                while (i < keys.length && available(i)) i++;
                out.add(new PageRange(from + start, from + i));
            }
            return out;
        }

        long[] checkpoints(int p) {
            long[] out = new long[keys.length];
            int n = 0;
            for (int i = 0; i < keys.length; i++) if (available(i)) out[n++] = (from + i + 1) * p;
            return Arrays.copyOf(out, n);
        }
    }
}
