package io.orbitkv.bench.trace;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.bench.storage.BenchKeys;
import io.orbitkv.core.storage.dram.ChainLink;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramEviction;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/**
 * Replays a trace through the Manager's own DRAM tier and {@code EvictionPolicy} classes, in
 * process and without a client channel: per request, the chain's resident prefix is leased with
 * {@link DramTier#acquireRun} (the QUERY's lookup) and released, then the blocks past it are
 * reserved and committed in chain order with the {@link ChainLink}s the engine session derives
 * from a PUBLISH_RESERVE (first page under the end of the matched prefix, each later page under
 * the one before it). Counts hits exactly as {@link PrefixSimulator} does, so its numbers sit next
 * to the offline policies; {@code bin/bench-trace} prints them as its "tier" columns.
 *
 * <p>The tier holds exactly {@code capacityBlocks} resident 4 KiB pages (one slot more for the
 * open reservation, no SSD hand-over); page bytes are never touched, so the arena stays sparse.
 * Single-threaded.
 */
public final class TierReplay {

    private static final int PAGE_BYTES = 4096;
    private static final int NAMESPACE = 1;

    private TierReplay() {
    }

    /** Replays {@code trace} through a tier of {@code capacityBlocks} pages under {@code eviction}. */
    public static PrefixSimulator.Result run(List<TraceRequest> trace, int capacityBlocks, DramEviction eviction,
                                             int blockTokens, Path dir) throws IOException {
        if (capacityBlocks < 1) throw new IllegalArgumentException("capacity must be >= 1 block: " + capacityBlocks);
        DramTierConfig config = new DramTierConfig(dir, "trace-" + eviction.word(),
                List.of(new SizeClass(PAGE_BYTES, capacityBlocks + 1)), PAGE_BYTES, 0,
                DramTierConfig.DEFAULT_PRESSURE_SCAN_ENTRIES, eviction);
        long prompt = 0;
        long hit = 0;
        long references = 0;
        long hitReferences = 0;
        int[] perRequest = new int[trace.size()];
        try (DramTier tier = DramTier.open(config, new ResidencyStream(1024), new SimpleMeterRegistry())) {
            for (int q = 0; q < trace.size(); q++) {
                TraceRequest r = trace.get(q);
                int n = r.blocks();
                StateKey[] keys = new StateKey[n];
                Lease[] leases = new Lease[n];
                int k = tier.acquireRun(i -> BenchKeys.key(r.block(i)), 0, n, NAMESPACE, keys, leases);
                tier.releaseAll(leases, k);
                perRequest[q] = k;
                prompt += r.inputLength();
                hit += r.hitTokens(k, blockTokens);
                references += n;
                hitReferences += k;
                for (int i = k; i < n; i++) keys[i] = BenchKeys.key(r.block(i));
                publish(tier, keys, k, n);
                if (tier.usage().residentImages() > capacityBlocks) {
                    throw new IllegalStateException(eviction.word() + " holds " + tier.usage().residentImages()
                            + " pages, over its capacity " + capacityBlocks);
                }
            }
        }
        return new PrefixSimulator.Result("Manager " + eviction.word(), capacityBlocks, trace.size(), prompt, hit,
                references, hitReferences, perRequest);
    }

    /** PUBLISH of the blocks past the hit, one run: pages already resident or refused are skipped. */
    private static void publish(DramTier tier, StateKey[] keys, int from, int n) {
        for (int i = from; i < n; i++) {
            StateKey key = keys[i];
            if (!(tier.reserve(key, NAMESPACE, PAGE_BYTES) instanceof Reservation res)) continue;
            res.chain(new ChainLink(i > 0 ? keys[i - 1] : null, i == from, i == n - 1));
            if (tier.commit(res) instanceof CommitResult.NotOpen) {
                throw new IllegalStateException("a fresh reservation was not open: " + res);
            }
        }
    }
}
