package io.orbitkv.router.daemon;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One engine worker the router routes to, and where its KV events come from: the Manager's (or
 * engine's) PUB endpoint, the topic of its events (the engine instance id a Manager publishes
 * under, docs/kv-events.md) and, optionally, the replay endpoint that repairs gaps.
 *
 * <p>Optionally, the worker's Manager cluster endpoint ({@code manager=HOST:PORT}, its
 * {@code --cluster-listen}) and the namespace digest its engine registers ({@code namespace=} 64
 * hex): the router then sends that Manager a remote prepare of each request routed to the worker
 * (docs/routing.md "Preparing the chosen worker").
 *
 * <p>Written on the command line as
 * {@code name=W,topic=T,events=tcp://H:P[,replay=tcp://H:P][,manager=H:P][,namespace=HEX]}.
 *
 * @param manager   the Manager's cluster endpoint {@code host:port}; empty: no remote prepares
 * @param namespace the namespace digest as 64 hex characters; empty: requests must name theirs
 */
public record WorkerEndpoint(String name, String topic, String eventsEndpoint, String replayEndpoint, String manager,
                             String namespace) {

    /** A worker without remote prepares. */
    public WorkerEndpoint(String name, String topic, String eventsEndpoint, String replayEndpoint) {
        this(name, topic, eventsEndpoint, replayEndpoint, "", "");
    }

    public WorkerEndpoint {
        if (manager == null) manager = "";
        if (!manager.isEmpty() && !manager.matches("[^:/,]+:[0-9]{1,5}")) {
            throw new IllegalArgumentException("worker " + name + ": manager= must be HOST:PORT, not " + manager);
        }
        if (namespace == null) namespace = "";
        if (!namespace.isEmpty() && !namespace.matches("[0-9a-fA-F]{64}")) {
            throw new IllegalArgumentException("worker " + name + ": namespace= must be 64 hex characters (a SHA-256 digest)");
        }
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

    private static final List<String> KEYS = List.of("name", "topic", "events", "replay", "manager", "namespace");

    /** Parses {@code name=W,topic=T,events=tcp://H:P[,replay=tcp://H:P][,manager=H:P][,namespace=HEX]}. */
    public static WorkerEndpoint parse(String text) {
        Map<String, String> kv = new LinkedHashMap<>();
        for (String part : text.split(",")) {
            int eq = part.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("worker spec '" + text + "': expected KEY=VALUE, got '" + part + "'");
            String key = part.substring(0, eq).strip();
            if (!KEYS.contains(key)) {
                throw new IllegalArgumentException("worker spec '" + text + "': unknown key " + key + " (" + String.join(", ", KEYS) + ")");
            }
            if (kv.put(key, part.substring(eq + 1).strip()) != null) {
                throw new IllegalArgumentException("worker spec '" + text + "': " + key + " given twice");
            }
        }
        return new WorkerEndpoint(kv.get("name"), kv.get("topic"), kv.get("events"), kv.getOrDefault("replay", ""),
                kv.getOrDefault("manager", ""), kv.getOrDefault("namespace", ""));
    }
}
