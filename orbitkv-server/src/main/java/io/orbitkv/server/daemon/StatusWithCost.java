package io.orbitkv.server.daemon;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.orbitkv.core.cost.CostStatus;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The {@code /status} body: the Manager logic's status object with one more top-level field,
 * {@code cost} (cost observation and shadow counts, {@link CostStatus}), so existing readers of
 * the Manager's fields see them unchanged.
 *
 * <p>Stateless and thread-safe (one shared {@link ObjectMapper}, configured like the status
 * server's, is thread-safe after construction).
 *
 * <p>Design note: a map built per request rather than a wrapper record, because the Manager
 * status lives in the engine package (another owner) and nesting it would move every existing
 * field one level down; the conversion costs one tree walk of a few KiB per scrape.
 */
final class StatusWithCost {

    private static final ObjectMapper JSON = new ObjectMapper().disable(SerializationFeature.FAIL_ON_EMPTY_BEANS);
    private static final TypeReference<LinkedHashMap<String, Object>> FIELDS = new TypeReference<>() {};

    private StatusWithCost() {}

    /** {@code managerStatus}'s fields, in order, then {@code cost}. */
    static Map<String, Object> compose(Object managerStatus, CostStatus cost) {
        return compose(managerStatus, cost, Optional.empty());
    }

    /** As above, then {@code peer} (tickets, transfers, fetches, releases) on a clustered Manager. */
    static Map<String, Object> compose(Object managerStatus, CostStatus cost, Optional<?> peer) {
        LinkedHashMap<String, Object> fields = JSON.convertValue(managerStatus, FIELDS);
        fields.put("cost", cost);
        peer.ifPresent(p -> fields.put("peer", p));
        return fields;
    }
}
