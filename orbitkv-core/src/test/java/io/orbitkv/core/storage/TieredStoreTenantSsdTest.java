package io.orbitkv.core.storage;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.namespace.TenantQuota;
import io.orbitkv.core.namespace.TenantQuotas;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;

import static io.orbitkv.core.storage.TieredStoreTest.BLOCK;
import static io.orbitkv.core.storage.TieredStoreTest.DIGEST;
import static io.orbitkv.core.storage.TieredStoreTest.NS;
import static io.orbitkv.core.storage.TieredStoreTest.SLOT;
import static io.orbitkv.core.storage.TieredStoreTest.key;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * A tenant's SSD cap: under write-through, a tenant at its cap has its further SSD writes skipped
 * ({@code tenant_quota}, the pages stay in DRAM), while another tenant's writes go on; extents the
 * ring or a delete drops give the tenant room again.
 */
class TieredStoreTenantSsdTest {

    private static final int NOISY_PAGES = 8;

    @TempDir
    Path dir;

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private TieredStore store;

    @AfterEach
    void close() {
        if (store != null) store.close();
    }

    private void open(long noisySsdBytes) throws IOException {
        NamespaceTable namespaces = new NamespaceTable(4);
        namespaces.register(NS, DIGEST);
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram")), "tenant-ssd",
                List.of(new SizeClass(SLOT, 64)), 8L * SLOT, 2L * SLOT, 64);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd"))).withMaxPayloadBytes(SLOT)
                .withFiles(2, 2L << 20).withIo(1, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024);
        TenantQuotas quotas = new TenantQuotas(List.of(
                new TenantQuota(DIGEST, Optional.of("noisy"), TenantQuota.UNLIMITED, 0, noisySsdBytes),
                new TenantQuota(DIGEST, Optional.of("quiet"), TenantQuota.UNLIMITED, 0, TenantQuota.UNLIMITED)));
        store = TieredStore.open(new TieredStoreConfig(dram, ssd,
                PublishConfig.defaults(new SsdAdmissionPolicy.WriteThrough()), 1 << 16, 64).withTenants(quotas),
                namespaces, registry);
    }

    private void publish(StateKey key, String tenant) {
        Reservation r = (Reservation) store.reserve(key, NS, BLOCK, tenant);
        assertThat(store.commit(r)).isInstanceOf(CommitResult.Inserted.class);
    }

    private void awaitWritesDone() {
        await().atMost(Duration.ofSeconds(10)).until(() -> store.pipeline().writeThroughQueueDepth() == 0
                && store.pipeline().writeQueuedBytes() == 0);
    }

    private double tenantMeter(String name, String tenant) {
        return registry.get(name).tag("tenant", tenant).meter().measure().iterator().next().getValue();
    }

    @Test
    void aTenantAtItsSsdCapHasItsOwnWritesSkippedAndNoOneElses() throws IOException {
        long footprint = ExtentLayout.footprintBytes(BLOCK);
        open(NOISY_PAGES * footprint);
        for (int i = 0; i < 4; i++) publish(key(i), "quiet");
        for (int i = 100; i < 140; i++) {
            publish(key(i), "noisy");
            awaitWritesDone(); // one at a time, so exactly the first NOISY_PAGES fit
        }
        for (int i = 4; i < 8; i++) publish(key(i), "quiet");
        awaitWritesDone();
        assertThat(IntStream.range(0, 8).filter(i -> store.onSsd(key(i), DIGEST)).toArray()).as("every quiet page").hasSize(8);
        assertThat(IntStream.range(100, 140).filter(i -> store.onSsd(key(i), DIGEST)).toArray()).as("the noisy tenant's cap")
                .containsExactly(IntStream.range(100, 100 + NOISY_PAGES).toArray());
        assertThat(tenantMeter("orbitkv.tenant.ssd.used", "noisy")).isEqualTo(NOISY_PAGES * footprint);
        assertThat(tenantMeter("orbitkv.tenant.ssd.used", "quiet")).isEqualTo(8 * footprint);
        assertThat(tenantMeter("orbitkv.tenant.ssd.refusals", "noisy")).isEqualTo(40 - NOISY_PAGES);
        assertThat(tenantMeter("orbitkv.tenant.ssd.refusals", "quiet")).isZero();
        assertThat(registry.get("orbitkv.publish.ssd.skipped").tag("reason", "tenant_quota").counter().count())
                .isEqualTo(40 - NOISY_PAGES);

        // An extent of the noisy tenant leaves the index: its next page fits again.
        assertThat(store.ssd().delete(key(100))).isTrue();
        publish(key(200), "noisy");
        awaitWritesDone();
        assertThat(store.onSsd(key(200), DIGEST)).isTrue();
        assertThat(tenantMeter("orbitkv.tenant.ssd.used", "noisy")).isEqualTo(NOISY_PAGES * footprint);
    }
}
