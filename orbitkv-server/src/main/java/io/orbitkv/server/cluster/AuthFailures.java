package io.orbitkv.server.cluster;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.log.RateLimitedLog;
import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;

/**
 * Every cluster authentication failure this node sees, on both sides, counted in
 * {@code orbitkv_cluster_auth_failures_total{side, reason}} and logged at most once per reason per
 * 10 s (with "N more like this in the last 10 s").
 *
 * <p>Owns its counters and log. Thread-safe (Micrometer counters; the log is synchronized); called
 * from gRPC transport threads and the membership thread. Bounded: reasons are a fixed enum, and
 * the log keys by reason (one line per 10 s each), not by peer, so a storm of refusals from many
 * addresses costs the same.
 *
 * <p>Design note: a member with a wrong token used to fail silently (17,285 refused pushes in
 * 25 s, nothing logged); one line per 10 s per reason names the problem at once and the counter
 * gives its rate, without a log line per refused RPC.
 */
public final class AuthFailures {

    /** Why a call failed authentication, and on which side. */
    public enum Reason {
        /** Server side: a caller named no cluster or another cluster. */
        WRONG_CLUSTER("server", "wrong_cluster", "a caller names another cluster: give every member the same clusterId"),
        /** Server side: a caller of this cluster sent no token or a wrong one. */
        BAD_TOKEN("server", "bad_token",
                "a caller of this cluster holds another token: give every member the same clusterTokenFile contents"),
        /** Client side: a peer refused this node's credentials (UNAUTHENTICATED). */
        REFUSED_BY_PEER("client", "refused_by_peer",
                "that peer refuses this node's token: compare this clusterTokenFile with the other members'"),
        /** Client side: a peer accepted this node's token but could not prove it holds the token itself. */
        BAD_PROOF("client", "bad_proof",
                "that peer accepted this node's token but cannot prove it holds it: its clusterTokenFile differs");

        final String side;
        final String tag;
        /** What the operator should do about it, appended to the log line. */
        final String action;

        Reason(String side, String tag, String action) {
            this.side = side;
            this.tag = tag;
            this.action = action;
        }
    }

    private final Map<Reason, Counter> counters = new EnumMap<>(Reason.class);
    private final RateLimitedLog log = RateLimitedLog.tenSeconds(AuthFailures.class.getName());

    public AuthFailures(MeterRegistry registry) {
        Objects.requireNonNull(registry, "registry");
        for (Reason r : Reason.values()) {
            counters.put(r, Counter.builder("orbitkv_cluster_auth_failures").tag("side", r.side).tag("reason", r.tag)
                    .description("cluster calls that failed authentication (server: refused here; client: refused by or unproven peer)")
                    .register(registry));
        }
    }

    /** Counts and logs (rate-limited) one failure; {@code detail} names the peer and the call. */
    public void record(Reason reason, String detail) {
        counters.get(reason).increment();
        log.log(System.Logger.Level.WARNING, reason.name(), "cluster authentication failure (" + reason.tag + "): " + detail
                + "; " + reason.action);
    }

    /** Failures of {@code reason} so far. */
    public long count(Reason reason) {
        return (long) counters.get(reason).count();
    }
}
