package io.orbitkv.server.peer;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.peer.PeerRoutes;
import java.util.ArrayList;
import java.util.List;
import java.util.function.ToDoubleFunction;

/**
 * The peer-read figures of {@link PeerRoutes#status()} as Prometheus series
 * ({@code orbitkv_peer_*}): what {@code /status}'s {@code peer} shows, scrapeable. Each series
 * reads one status snapshot (a few atomics) per scrape; nothing is counted twice.
 *
 * <p>Registered by {@link ClusterPeers} for its lifetime and removed when it closes.
 */
final class PeerMeters {

    private PeerMeters() {
    }

    static List<Meter> register(MeterRegistry registry, PeerRoutes routes) {
        List<Meter> meters = new ArrayList<>();
        gauge(meters, registry, routes, "orbitkv.peer.tickets", "tickets this source holds (pages pinned for peers)",
                s -> s.tickets());
        gauge(meters, registry, routes, "orbitkv.peer.transfers.active", "transfers this source is sending now",
                s -> s.activeTransfers());
        gauge(meters, registry, routes, "orbitkv.peer.fetches.in.flight", "peer fetches this requester has in flight",
                s -> s.fetchesInFlight());
        gauge(meters, registry, routes, "orbitkv.peer.releases.pending", "ticket releases waiting to be acknowledged",
                s -> s.releasesPending());
        gauge(meters, registry, routes, "orbitkv.peer.remote.work.allowed",
                "1 while membership evidence allows new remote work, else 0", s -> s.remoteWorkAllowed() ? 1 : 0);
        String fetches = "peer fetches this requester ended, by outcome (staged into local DRAM, or missed)";
        counter(meters, registry, routes, "orbitkv.peer.fetches", "outcome", "staged", fetches, s -> s.fetchesStaged());
        counter(meters, registry, routes, "orbitkv.peer.fetches", "outcome", "missed", fetches, s -> s.fetchesMissed());
        String releases = "ticket releases that ended, by outcome (acknowledged, or abandoned after the retries)";
        counter(meters, registry, routes, "orbitkv.peer.releases", "outcome", "acked", releases, s -> s.releasesAcked());
        counter(meters, registry, routes, "orbitkv.peer.releases", "outcome", "abandoned", releases, s -> s.releasesAbandoned());
        counter(meters, registry, routes, "orbitkv.peer.tickets.expired", null, null,
                "tickets this source expired without a release", s -> s.ticketsExpired());
        return meters;
    }

    private static void gauge(List<Meter> meters, MeterRegistry registry, PeerRoutes routes, String name, String description,
                              ToDoubleFunction<PeerRoutes.Status> value) {
        meters.add(Gauge.builder(name, routes, r -> value.applyAsDouble(r.status())).description(description)
                .register(registry));
    }

    private static void counter(List<Meter> meters, MeterRegistry registry, PeerRoutes routes, String name, String tag,
                                String tagValue, String description, ToDoubleFunction<PeerRoutes.Status> value) {
        FunctionCounter.Builder<PeerRoutes> b = FunctionCounter.builder(name, routes, r -> value.applyAsDouble(r.status()))
                .description(description);
        if (tag != null) b = b.tag(tag, tagValue);
        meters.add(b.register(registry));
    }
}
