package io.orbitkv.router.daemon;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One engine worker the router routes to, and where its KV events come from: the Manager's (or
 * engine's) PUB endpoint, the topic of its events (the engine instance id a Manager publishes
 * under, docs/kv-events.md) and, optionally, the replay endpoint that repairs gaps.
 *
 * <p>Written on the command line as {@code name=W,topic=T,events=tcp://H:P[,replay=tcp://H:P]}.
 */
public record WorkerEndpoint(String name, String topic, String eventsEndpoint, String replayEndpoint) {

    public WorkerEndpoint {
        if (name == null || name.isEmpty()) throw new IllegalArgumentException("a worker needs name=");
        if (topic == null || topic.isEmpty()) {
            // sequences are per topic: a subscription to all topics would see every batch as a gap
            throw new IllegalArgumentException("worker " + name + " needs topic= (the engine instance id)");
        }
        tcp(name, "events", eventsEndpoint);
        if (replayEndpoint == null) replayEndpoint = "";
        if (!replayEndpoint.isEmpty()) tcp(name, "replay", replayEndpoint);
    }

    private static void tcp(String name, String what, String endpoint) {
        if (endpoint == null || !endpoint.matches("tcp://[^:/]+:[0-9]{1,5}")) {
            throw new IllegalArgumentException("worker " + name + ": " + what + "= must be tcp://HOST:PORT, not " + endpoint);
        }
    }

    /** Parses {@code name=W,topic=T,events=tcp://H:P[,replay=tcp://H:P]}. */
    public static WorkerEndpoint parse(String text) {
        Map<String, String> kv = new LinkedHashMap<>();
        for (String part : text.split(",")) {
            int eq = part.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("worker spec '" + text + "': expected KEY=VALUE, got '" + part + "'");
            String key = part.substring(0, eq).strip();
            if (!key.equals("name") && !key.equals("topic") && !key.equals("events") && !key.equals("replay")) {
                throw new IllegalArgumentException("worker spec '" + text + "': unknown key " + key + " (name, topic, events, replay)");
            }
            if (kv.put(key, part.substring(eq + 1).strip()) != null) {
                throw new IllegalArgumentException("worker spec '" + text + "': " + key + " given twice");
            }
        }
        return new WorkerEndpoint(kv.get("name"), kv.get("topic"), kv.get("events"), kv.getOrDefault("replay", ""));
    }
}
