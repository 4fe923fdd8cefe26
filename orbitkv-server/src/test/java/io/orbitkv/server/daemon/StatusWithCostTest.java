package io.orbitkv.server.daemon;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.cost.CostConfig;
import io.orbitkv.core.cost.CostObserver;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/** /status keeps the Manager's fields where they were and adds the cost counts. */
class StatusWithCostTest {

    record Tier(long usedBytes) {}

    record FakeStatus(long leases, Tier dram, List<String> instances) {}

    @Test
    void managerFieldsStayAtTheTopLevelAndCostIsAdded() throws Exception {
        CostObserver on = CostObserver.create(CostConfig.fromEnvironment(Map.of("ORBITKV_COST_OBSERVATIONS", "1")),
                new SimpleMeterRegistry(), System::nanoTime);
        Map<String, Object> body = StatusWithCost.compose(new FakeStatus(3, new Tier(4096), List.of("engine-1")),
                on.status());
        assertThat(body.keySet()).containsExactly("leases", "dram", "instances", "cost");
        JsonNode json = new ObjectMapper().readTree(new ObjectMapper().writeValueAsString(body));
        assertThat(json.get("leases").asLong()).isEqualTo(3);
        assertThat(json.get("dram").get("usedBytes").asLong()).isEqualTo(4096);
        assertThat(json.get("cost").get("enabled").asBoolean()).isTrue();
        assertThat(json.get("cost").get("maxEntries").asInt()).isEqualTo(512);
        assertThat(json.get("cost").get("shadow").has("FASTER")).isTrue();
        assertThat(json.get("cost").get("selection").get("enabled").asBoolean()).isFalse();
        assertThat(json.get("cost").get("selection").get("switched").asLong()).isZero();
        assertThat(json.get("cost").get("boundary").get("shortened").asLong()).isZero();
        assertThat(json.get("cost").get("boundary").get("keptLongest").get("NO_PREFILL_RATE").asLong()).isZero();
    }
}
