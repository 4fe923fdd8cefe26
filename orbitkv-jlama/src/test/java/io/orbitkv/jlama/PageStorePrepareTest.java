package io.orbitkv.jlama;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.PrefixLookup;
import io.orbitkv.engine.SyntheticKeys;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The engine page store's {@code prepare} against a real Manager restarted over its SSD store:
 * the prefix a queued request will look up is staged while it waits, so the lookup is a DRAM hit
 * (first answer FINAL) where it would have been staged.
 */
@ProcessTest
class PageStorePrepareTest {

    private static final int PAGE_TOKENS = 16;
    private static final int PAGES = 3;

    @TempDir
    Path dir;

    private static List<StateKey> keys(Namespace ns, int seed) {
        return SyntheticKeys.of(ns.digest(), seed, PAGES);
    }

    private ManagerProcess start(String... options) throws Exception {
        return ManagerProcess.over(dir).jvm(ManagerProcess.TEST_JVM)
                .options("--dram-bytes", "16m", "--ssd-bytes", "32m", "--set", "dramSlotBytes=64k").options(options).start();
    }

    @Test
    void aPreparedPrefixIsADramHitWhereTheUnpreparedOneIsStaged() throws Exception {
        Namespace ns = new Namespace("prepare-store", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS,
                1, 0, 1, 0, 1);
        long prompt = PAGES * PAGE_TOKENS + 1;
        try (ManagerProcess m = start("--ssd-policy", "write-through")) {
            try (OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "engine", 1, ns)) {
                for (int seed : new int[] {1, 2}) {
                    KvPageStore.PublishReport r = store.publish(keys(ns, seed), 4096, (i, slot) -> slot.fill((byte) (seed + i)));
                    assertThat(r.sealed()).isEqualTo(PAGES);
                }
            }
            await().atMost(Duration.ofSeconds(20)).until(() -> m.metric("orbitkv_ssd_writes_total") >= 2 * PAGES);
            assertThat(m.terminate()).isZero();
        }
        try (ManagerProcess m = start(); OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "engine", 2, ns)) {
            assertThat(store.prepare(keys(ns, 1), prompt, 0)).isTrue();
            await().atMost(Duration.ofSeconds(20)).until(() -> m.metric("orbitkv_manager_prepared_pages_held") == PAGES);
            try (PrefixLookup.Hit warm = (PrefixLookup.Hit) store.lookupPrefix(keys(ns, 1), prompt)) {
                assertThat(warm.source()).isEqualTo(HitSource.DRAM);
                assertThat(warm.pages()).isEqualTo(PAGES);
            }
            try (PrefixLookup.Hit cold = (PrefixLookup.Hit) store.lookupPrefix(keys(ns, 2), prompt)) {
                assertThat(cold.source()).isEqualTo(HitSource.STAGED);
            }
            await().atMost(Duration.ofSeconds(20)).until(() -> m.metric("orbitkv_manager_speculation_held_bytes") == 0
                    && m.metric("orbitkv_manager_prepares") == 0);
        }
    }
}
