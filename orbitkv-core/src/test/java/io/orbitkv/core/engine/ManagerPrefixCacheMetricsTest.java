package io.orbitkv.core.engine;

import io.orbitkv.core.query.QueryMetrics.TierCounts;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * The prefix-cache meters count what engines count: prompt tokens asked about, hit tokens by the
 * tier their pages came from (a DRAM hit, a hit staged from SSD, a miss), payload bytes by tier,
 * one latency sample per settled query; and {@code /status}'s totals equal the meters.
 */
class ManagerPrefixCacheMetricsTest {

    static final Namespace NS = ManagerFixture.namespace("model-a");
    static final int T = ManagerFixture.PAGE_TOKENS;

    @TempDir
    Path dir;
    ManagerFixture m;

    @AfterEach
    void close() {
        if (m != null) m.close();
    }

    private double counter(String name, String tier) {
        var search = m.registry.get(name);
        return (tier == null ? search : search.tag("tier", tier)).counter().count();
    }

    private long latencySamples(String outcome) {
        return m.registry.get("orbitkv.query.duration").tag("outcome", outcome).timer().count();
    }

    @Test
    void hitTokensAndBytesAreCountedByTierAndMissesCountOnlyQueriedTokens() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            // DRAM: 3 pages published and resident; the prompt is 3 pages + 1 token
            c.publish(1, 0, 0, 1, 2);
            Reply.QueryResult dram = c.queryFull(1, 1, 3);
            assertThat(dram.hit()).isTrue();
            assertThat(dram.boundaryTokens()).isEqualTo(3L * T);
            c.send(new Request.Release(1));
            assertThat(counter("orbitkv.prefix.cache.queried.tokens", null)).isEqualTo(3 * T + 1);
            assertThat(counter("orbitkv.prefix.cache.hit.tokens", "dram")).isEqualTo(3 * T);
            assertThat(counter("orbitkv.prefix.cache.hit.bytes", "dram")).isEqualTo(3.0 * ManagerFixture.PAGE_BYTES);
            assertThat(latencySamples("hit")).isEqualTo(1);

            // SSD: page 0 resident, pages 1 and 2 only on SSD: 16 tokens from DRAM, 32 from SSD
            c.publish(4, 0, 0);
            for (long p : new long[] {1, 2}) {
                c.publish(4, 0, p);
                StateKey key = Client.key(NS, 4, 0, p);
                await().atMost(RecordingSink.WAIT).until(() -> m.store.ssd().contains(key));
                await().atMost(RecordingSink.WAIT).until(() -> m.store.dram().evict(key) || !m.store.dram().contains(key));
            }
            Reply.QueryResult first = c.queryFull(2, 4, 3);
            if (first.status() == QueryStatus.PENDING) {
                assertThat(c.sink.await(2, CompletionEvent.QUERY_SETTLED).outcome()).isEqualTo(Reply.Settled.OK);
            }
            Reply.QueryResult mixed = (Reply.QueryResult) c.send(new Request.QueryPoll(2, 0));
            assertThat(mixed.hit()).isTrue();
            assertThat(mixed.boundaryTokens()).isEqualTo(3L * T);
            c.send(new Request.Release(2));
            assertThat(counter("orbitkv.prefix.cache.hit.tokens", "dram")).isEqualTo(3 * T + T);
            assertThat(counter("orbitkv.prefix.cache.hit.tokens", "ssd")).isEqualTo(2 * T);
            assertThat(counter("orbitkv.prefix.cache.hit.bytes", "ssd")).isEqualTo(2.0 * ManagerFixture.PAGE_BYTES);
            assertThat(counter("orbitkv.prefix.cache.hit.tokens", "peer")).isZero();
            assertThat(latencySamples("hit")).as("one sample per settled query, PENDING answers not counted").isEqualTo(2);

            // a miss: its prompt tokens are queried, nothing is hit
            Reply.QueryResult miss = c.queryFull(3, 99, 2);
            assertThat(miss.hit()).isFalse();
            c.send(new Request.Release(3));
            assertThat(counter("orbitkv.prefix.cache.queried.tokens", null)).isEqualTo(2 * (3 * T + 1) + (2 * T + 1));
            assertThat(latencySamples("miss")).isEqualTo(1);
        }
        ManagerStatus.PrefixCache totals = m.core.status().prefixCache();
        assertThat(totals.queriedTokens()).isEqualTo((long) counter("orbitkv.prefix.cache.queried.tokens", null));
        assertThat(totals.hitTokens()).isEqualTo(new TierCounts(4L * T, 2L * T, 0));
        assertThat(totals.hitBytes()).isEqualTo(new TierCounts(4L * ManagerFixture.PAGE_BYTES, 2L * ManagerFixture.PAGE_BYTES, 0));
        m.assertNothingHeld();
    }
}
