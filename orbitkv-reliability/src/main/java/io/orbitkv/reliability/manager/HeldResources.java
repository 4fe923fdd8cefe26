package io.orbitkv.reliability.manager;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What a Manager holds on behalf of clients, read from {@code /status} and {@code /metrics}:
 * sessions, operations, leases (table and DRAM bytes), reservations, regions, staging bytes,
 * SSD stages in flight, restore tasks and SSD reader pins. After every client is gone and its
 * I/O has drained, each is 0 (docs/protocol.md 9.6); anything else is a leak. Value.
 */
public record HeldResources(Map<String, Long> counts) {

    public HeldResources {
        counts = Map.copyOf(counts);
    }

    /** The Manager's current counts. */
    public static HeldResources of(ManagerNode manager) throws IOException, InterruptedException {
        JsonNode s = manager.status();
        Map<String, Long> c = new LinkedHashMap<>();
        for (String field : new String[] {"sessions", "operations", "leases", "reservations", "regions", "stagingBytes",
            "ssdInflightStages", "restoreTasks"}) {
            JsonNode v = s.get(field);
            if (v == null) throw new IOException("/status has no field " + field);
            c.put(field, v.asLong());
        }
        c.put("dram.leasedBytes", s.path("dram").path("leasedBytes").asLong());
        c.put("ssdPins", (long) ManagerNode.sum(manager.metrics(), "orbitkv_ssd_pins"));
        return new HeldResources(c);
    }

    /** True when nothing is held. */
    public boolean none() {
        return counts.values().stream().allMatch(v -> v == 0);
    }

    /** The non-zero counts, e.g. {@code leases=3 stagingBytes=65536}; {@code none} when empty. */
    public String held() {
        StringBuilder b = new StringBuilder();
        counts.entrySet().stream().filter(e -> e.getValue() != 0).sorted(Map.Entry.comparingByKey())
                .forEach(e -> b.append(b.isEmpty() ? "" : " ").append(e.getKey()).append('=').append(e.getValue()));
        return b.isEmpty() ? "none" : b.toString();
    }

    /**
     * Polls every 20 ms until nothing is held or {@code timeoutMillis} passes; the last reading.
     * 20 ms because a client waiting on the same state (a restarted engine re-registering) would
     * poll no faster, and the drain it waits for is bounded by the Manager's own I/O timeouts.
     */
    public static HeldResources awaitNone(ManagerNode manager, long timeoutMillis) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + timeoutMillis * 1_000_000;
        HeldResources last = of(manager);
        while (!last.none() && System.nanoTime() < deadline) {
            Thread.sleep(20);
            last = of(manager);
        }
        return last;
    }
}
