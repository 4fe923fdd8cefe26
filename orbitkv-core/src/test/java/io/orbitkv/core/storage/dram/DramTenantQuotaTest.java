package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.namespace.TenantQuota;
import io.orbitkv.core.namespace.TenantQuotas;
import io.orbitkv.core.namespace.TenantTable;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.stream.IntStream;

import static io.orbitkv.core.storage.dram.TestImages.hasCanary;
import static io.orbitkv.core.storage.dram.TestImages.key;
import static io.orbitkv.core.storage.dram.TestImages.writeCanary;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Tenant quotas in the DRAM tier: a tenant over its cap evicts its own least recently used pages
 * and never another's, is refused (only it) when none of its own can go, and global eviction passes
 * over a tenant's pages within its guarantee while an unlimited neighbour floods the tier.
 */
class DramTenantQuotaTest {

    private static final int K4 = 4096;
    /** 20 slots of 4 KiB, 8 KiB reserved and 8 KiB evicted-leased budgets: the index holds 16 images. */
    private static final int INDEX_PAGES = 16;
    private static final int NS_A = 1;
    private static final int NS_B = 2;
    private static final NamespaceDigest A = new NamespaceDigest(1, 1, 1, 1);
    private static final NamespaceDigest B = new NamespaceDigest(2, 2, 2, 2);

    @TempDir
    Path dir;

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private DramTier tier;

    @AfterEach
    void closeTier() {
        if (tier != null) tier.close();
    }

    private DramTier open(DramEviction eviction, TenantQuota... quotas) throws IOException {
        NamespaceTable namespaces = new NamespaceTable(8);
        namespaces.register(NS_A, A);
        namespaces.register(NS_B, B);
        DramTierConfig config = new DramTierConfig(dir, "tenants", List.of(new SizeClass(K4, 20)), 2 * K4, 2 * K4, 64,
                eviction);
        assertThat(config.indexWeightBytes()).isEqualTo((long) INDEX_PAGES * K4);
        tier = DramTier.open(config, new ResidencyStream(4096), registry,
                new TenantTable(new TenantQuotas(List.of(quotas)), namespaces));
        return tier;
    }

    private static TenantQuota quota(NamespaceDigest ns, String label, long dramPages, long guaranteedPages) {
        return new TenantQuota(ns, Optional.ofNullable(label), dramPages < 0 ? TenantQuota.UNLIMITED : dramPages * K4,
                guaranteedPages * K4);
    }

    private ReserveResult publish(StateKey key, int namespaceId, String tenant) {
        ReserveResult r = tier.reserve(key, namespaceId, K4, tenant);
        if (r instanceof Reservation reservation) {
            writeCanary(reservation.segment(), key);
            assertThat(tier.commit(reservation)).isInstanceOf(CommitResult.Inserted.class);
        }
        return r;
    }

    private TenantDramUsage usage(String label) {
        return tier.tenantUsage().stream().filter(u -> u.tenant().equals(label)).findFirst().orElseThrow();
    }

    private long resident(int from, int to) {
        return IntStream.range(from, to).filter(i -> tier.contains(key(i))).count();
    }

    @Test
    void aTenantOverItsCapEvictsItsOwnLeastRecentlyUsedPagesAndNoOtherTenants() throws IOException {
        open(DramEviction.LRU, quota(A, "noisy", 4, 0), quota(A, "quiet", -1, 0));
        for (int i = 0; i < 3; i++) assertThat(publish(key(i), NS_A, "quiet")).isInstanceOf(Reservation.class);
        for (int i = 100; i < 104; i++) publish(key(i), NS_A, "noisy");
        Lease hot = (Lease) tier.acquire(key(100), NS_A); // noisy's oldest becomes its most recent
        hot.release();
        for (int i = 104; i < 120; i++) {
            assertThat(publish(key(i), NS_A, "noisy")).as("noisy page %d", i).isInstanceOf(Reservation.class);
        }
        assertThat(resident(0, 3)).as("the quiet tenant's pages").isEqualTo(3);
        assertThat(resident(100, 120)).as("the noisy tenant keeps its cap").isEqualTo(4);
        assertThat(tier.contains(key(100))).as("used, so not its least recently used").isFalse();
        assertThat(usage("noisy").usedBytes()).isEqualTo(4L * K4);
        assertThat(usage("noisy").selfEvictions()).isEqualTo(16);
        assertThat(usage("quiet").usedBytes()).isEqualTo(3L * K4);
        assertThat(registry.get("orbitkv.dram.evictions").tag("cause", "tenant_quota").functionCounter().count())
                .isEqualTo(16);
        assertThat(registry.get("orbitkv.tenant.dram.used").tag("tenant", "noisy").gauge().value()).isEqualTo(4.0 * K4);
        for (int i = 0; i < 3; i++) {
            Lease lease = (Lease) tier.acquire(key(i), NS_A);
            assertThat(hasCanary(lease.segment(), key(i))).isTrue();
            lease.release();
        }
    }

    @Test
    void aTenantWhoseOwnPagesAreAllLeasedIsRefusedAndOnlyIt() throws IOException {
        open(DramEviction.LRU, quota(A, "noisy", 2, 0));
        publish(key(1), NS_A, "noisy");
        publish(key(2), NS_A, "noisy");
        Lease l1 = (Lease) tier.acquire(key(1), NS_A);
        Lease l2 = (Lease) tier.acquire(key(2), NS_A);
        assertThat(tier.reserve(key(3), NS_A, K4, "noisy"))
                .isEqualTo(new ReserveResult.Full(ReserveResult.FullReason.TENANT_QUOTA));
        assertThat(publish(key(4), NS_A, "another")).as("an unconfigured label of A is not charged to noisy")
                .isInstanceOf(Reservation.class);
        assertThat(publish(key(5), NS_B, "noisy")).as("the same label in another namespace is another tenant")
                .isInstanceOf(Reservation.class);
        assertThat(usage("noisy").refusals()).isEqualTo(1);
        assertThat(registry.get("orbitkv.tenant.dram.refusals").tag("tenant", "noisy").functionCounter().count())
                .isEqualTo(1);
        l1.release();
        assertThat(publish(key(3), NS_A, "noisy")).as("an unleased page of its own makes room")
                .isInstanceOf(Reservation.class);
        assertThat(tier.contains(key(1))).isFalse();
        assertThat(tier.contains(key(2))).isTrue();
        l2.release();
    }

    @Test
    void globalEvictionPassesOverTheQuietTenantsGuaranteeWhileANeighbourFloods() throws IOException {
        // Namespace B's default tenant (no label) is guaranteed 4 pages; namespace A is unlimited.
        open(DramEviction.LRU, quota(B, null, -1, 4));
        for (int i = 0; i < 6; i++) publish(key(i), NS_B, null);
        for (int i = 1000; i < 1000 + 5 * INDEX_PAGES; i++) {
            assertThat(publish(key(i), NS_A, null)).as("the flood is never refused").isInstanceOf(Reservation.class);
            assertThat(usage("").usedBytes()).as("B stays at or above its guarantee").isGreaterThanOrEqualTo(4L * K4);
        }
        assertThat(resident(0, 6)).as("B's pages within its guarantee").isEqualTo(4);
        assertThat(tier.usage().usedBytes()).isLessThanOrEqualTo(tier.config().indexWeightBytes());
        assertThat(publish(key(7), NS_B, "any-label")).as("an unconfigured label is B's default tenant")
                .isInstanceOf(Reservation.class);
        // B now holds one page above its guarantee, and its least recent is the global LRU's next victim.
        assertThat(usage("").usedBytes()).isEqualTo(4L * K4);
        assertThat(tier.contains(key(7))).isTrue();
    }

    @Test
    void anOpenReservationDoesNotMakeAGuaranteedTenantsResidentPagesSpare() throws IOException {
        open(DramEviction.LRU, quota(B, "quiet", -1, 2));
        publish(key(1), NS_B, "quiet");
        publish(key(2), NS_B, "quiet");
        Reservation open = (Reservation) tier.reserve(key(3), NS_B, K4, "quiet");
        for (int i = 1000; i < 1000 + 3 * INDEX_PAGES; i++) publish(key(i), NS_A, null);
        assertThat(resident(1, 3)).as("both resident pages stay while the third is being written").isEqualTo(2);
        tier.abort(open);
    }

    @Test
    void abortsAndDuplicatesReturnTheirChargeAndTheBytesEqualTheSlotsCharged() throws IOException {
        open(DramEviction.LRU, quota(A, "t", 3, 0));
        Reservation r = (Reservation) tier.reserve(key(1), NS_A, K4, "t");
        assertThat(usage("t").usedBytes()).as("a reservation is charged").isEqualTo(K4);
        tier.abort(r);
        assertThat(usage("t").usedBytes()).isZero();
        Reservation first = (Reservation) tier.reserve(key(2), NS_A, K4, "t");
        Reservation second = (Reservation) tier.reserve(key(2), NS_A, K4, "t");
        tier.commit(first);
        assertThat(tier.commit(second)).isInstanceOf(CommitResult.Duplicate.class);
        assertThat(usage("t").usedBytes()).isEqualTo(K4);
        tier.evict(key(2));
        assertThat(usage("t").usedBytes()).isZero();
    }

    @Test
    void aGuaranteeNeedsLruAndMustFitTheIndex() {
        assertThatThrownBy(() -> open(DramEviction.W_TINY_LFU, quota(A, null, -1, 1)))
                .hasMessageContaining("dramEviction=lru");
        assertThatThrownBy(() -> open(DramEviction.LRU, quota(A, null, -1, INDEX_PAGES + 1)))
                .hasMessageContaining("exceed");
    }
}
