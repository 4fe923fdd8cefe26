package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.orbitkv.state.protocol.Refusal;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.state.protocol.SettleOutcome;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Tenant quotas through the public protocol, on the real Manager process: two tenant labels of one
 * namespace, a noisy one capped at 1 MiB of DRAM and a quiet one guaranteed 1 MiB, and an
 * unlabelled flood beside them. The noisy tenant and the flood each publish more than the whole
 * 16 MiB tier; the quiet tenant's pages stay resident and are read back byte for byte, the noisy
 * tenant stays within its cap by evicting its own pages, and only its own reserve is refused
 * NO_SPACE once all of its pages are being written. The tenants' gauges show both. SSD admission is
 * {@code on-evict}, so a sealed page holds no write-through lease and a tenant's pages are evictable
 * as soon as they are sealed.
 */
@ProcessTest
class TenantQuotaProcessTest {

    private static final int PAGES = 16;
    private static final long QUIET_PROMPT = 7;
    private static final long PAGE_SLOT = 64 * 1024;

    @TempDir
    Path dir;

    @Test
    void aNoisyTenantCannotEvictAQuietTenantsPagesAndIsRefusedOnlyForItsOwn() throws Exception {
        String ns = Engine.NS.digestHex();
        String quotas = ns + "/noisy:dramBytes=1m;" + ns + "/quiet:dramGuaranteedBytes=1m";
        try (ManagerProcess m = Managers.start(dir, "--ssd-policy", "on-evict", "--set", "tenantQuotas=" + quotas);
             Engine quiet = new Engine(ManagerProcess.socket(dir));
             Engine noisy = new Engine(ManagerProcess.socket(dir));
             Engine flood = new Engine(ManagerProcess.socket(dir))) {
            quiet.register("quiet", 1);
            noisy.register("noisy", 1);
            flood.register("flood", 1);
            assertThat(quiet.publish(QUIET_PROMPT, PAGES, Optional.of("quiet"))).containsOnly(SettleOutcome.SEALED);

            // 20 MiB of slots each, more than the 16 MiB tier holds.
            for (long prompt = 100; prompt < 120; prompt++) {
                assertThat(noisy.publish(prompt, PAGES, Optional.of("noisy"))).as("noisy prompt %d", prompt)
                        .containsOnly(SettleOutcome.SEALED);
                assertThat(tenantGauge(m, "orbitkv_tenant_dram_used_bytes", "noisy")).isLessThanOrEqualTo(1 << 20);
            }
            for (long prompt = 200; prompt < 220; prompt++) {
                assertThat(flood.publish(prompt, PAGES)).as("flood prompt %d", prompt).containsOnly(SettleOutcome.SEALED);
            }
            assertThat(tenantGauge(m, "orbitkv_tenant_dram_used_bytes", "quiet")).as("the quiet tenant's guarantee")
                    .isEqualTo(PAGES * PAGE_SLOT);
            assertThat(tenantGauge(m, "orbitkv_tenant_dram_evictions_total", "noisy"))
                    .as("the noisy tenant made room from its own pages").isGreaterThanOrEqualTo(19 * PAGES);
            assertThat(tenantGauge(m, "orbitkv_tenant_dram_evictions_total", "quiet")).isZero();

            Reply.QueryResult hit = quiet.query(1, QUIET_PROMPT, PAGES);
            quiet.assertHitWithBytes(hit, QUIET_PROMPT, PAGES);
            assertThat(quiet.raw.call(new Request.Release(1))).isInstanceOf(Reply.Released.class);

            // The noisy tenant's whole cap held by open reservations: its next page is NO_SPACE ...
            Reply.Reserved held = noisy.reserve(300, PAGES + 1, Optional.of("noisy"));
            assertThat(held.outcomes().subList(0, PAGES)).allMatch(o -> o instanceof Reply.Granted);
            assertThat(held.outcomes().get(PAGES)).isEqualTo(new Reply.Refused(Refusal.NO_SPACE));
            // ... and only its own: the quiet tenant and the unlabelled publisher are granted.
            assertThat(quiet.publish(8, 1, Optional.of("quiet"))).containsOnly(SettleOutcome.SEALED);
            assertThat(flood.publish(301, 1)).containsOnly(SettleOutcome.SEALED);
            assertThat(tenantGauge(m, "orbitkv_tenant_dram_refusals_total", "noisy")).isEqualTo(1);
            assertThat(tenantGauge(m, "orbitkv_tenant_dram_refusals_total", "quiet")).isZero();
            List<Long> ids = new ArrayList<>();
            for (Reply.ReserveOutcome o : held.outcomes()) {
                if (o instanceof Reply.Granted g) ids.add(g.reservationId());
            }
            assertThat(noisy.raw.call(new Request.PublishAbort(ids))).isInstanceOf(Reply.Aborted.class);
            assertThat(tenantGauge(m, "orbitkv_tenant_dram_limit_bytes", "noisy")).isEqualTo(1 << 20);
            assertThat(tenantGauge(m, "orbitkv_tenant_ssd_limit_bytes", "noisy")).as("no SSD cap").isEqualTo(-1);
            assertThat(tenantGauge(m, "orbitkv_tenant_dram_guaranteed_bytes", "quiet")).isEqualTo(1 << 20);
            JsonNode tenants = new ObjectMapper().readTree(m.get("/status")).get("tenants");
            assertThat(tenants).hasSize(2);
            assertThat(tenants.get(0).get("tenant").asText()).isEqualTo("noisy");
            assertThat(tenants.get(0).get("refusals").asLong()).isEqualTo(1);
            assertThat(tenants.get(0).get("limitBytes").asLong()).isEqualTo(1 << 20);
            assertThat(tenants.get(1).get("tenant").asText()).isEqualTo("quiet");
            assertThat(tenants.get(1).get("usedBytes").asLong()).isGreaterThanOrEqualTo(1 << 20);
        }
    }

    /** The value of {@code name}'s sample for tenant label {@code tenant}. */
    private static double tenantGauge(ManagerProcess m, String name, String tenant) {
        for (String line : m.metrics().split("\n")) {
            if (line.startsWith(name + "{") && line.contains("tenant=\"" + tenant + "\"")) {
                return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        throw new AssertionError("no " + name + " sample for tenant " + tenant);
    }
}
