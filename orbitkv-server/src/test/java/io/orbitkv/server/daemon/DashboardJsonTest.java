package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * {@code docs/grafana/orbitkv.json} is importable as it stands: one Prometheus data source input
 * that every query uses, unique panel ids, every panel inside the 24-column grid with at least one
 * query, and the panels the operations guide names. (Whether each query returns data is
 * {@link OperatorViewsTest}'s job, against a real Prometheus.)
 */
class DashboardJsonTest {

    @Test
    void theDashboardIsImportableWithOneDataSourceAndWellFormedPanels() throws Exception {
        JsonNode d = new ObjectMapper().readTree(OperatorViewsTest.DASHBOARD.toFile());
        assertThat(d.path("__inputs")).singleElement().satisfies(i -> {
            assertThat(i.path("name").asText()).isEqualTo("DS_PROMETHEUS");
            assertThat(i.path("pluginId").asText()).isEqualTo("prometheus");
        });
        assertThat(d.path("uid").asText()).isEqualTo("orbitkv");
        Set<Integer> ids = new HashSet<>();
        Set<String> titles = new HashSet<>();
        for (JsonNode p : d.path("panels")) {
            assertThat(ids.add(p.path("id").asInt())).as("unique panel id %s", p.path("id")).isTrue();
            JsonNode g = p.path("gridPos");
            assertThat(g.path("x").asInt() + g.path("w").asInt()).as("panel %s inside the grid", p.path("title")).isLessThanOrEqualTo(24);
            if (p.path("type").asText().equals("row")) continue;
            titles.add(p.path("title").asText());
            assertThat(p.path("datasource").path("uid").asText()).isEqualTo("${DS_PROMETHEUS}");
            assertThat(p.path("targets")).as("queries of %s", p.path("title")).isNotEmpty();
            for (JsonNode t : p.path("targets")) {
                assertThat(t.path("datasource").path("uid").asText()).isEqualTo("${DS_PROMETHEUS}");
                assertThat(t.path("expr").asText()).isNotBlank().doesNotContain("$__");
            }
        }
        assertThat(titles).contains("Hit ratio by tier (tokens)", "QUERY latency p50 / p99", "RESTORE latency p50 / p99",
                "DRAM", "SSD", "Sessions, operations, reservations", "Membership", "Peer reads");
        assertThat(OperatorViewsTest.dashboardExpressions()).hasSizeGreaterThanOrEqualTo(40);
    }
}
