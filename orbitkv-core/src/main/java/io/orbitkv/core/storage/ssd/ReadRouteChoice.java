package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.ResourceId;
import io.orbitkv.core.storage.ssd.uring.UringReader;

import java.io.IOException;
import java.util.function.IntFunction;

/**
 * The read route a store ends up with, decided once at {@link SsdStore#open} from
 * {@link SsdConfig#readPath()} and the io_uring capability: {@link Positional} or {@link Uring},
 * each with the observation helper that knows whether the other route is eligible for shadow
 * comparisons.
 *
 * <p>Rules: {@code positional} never sets up the io_uring route (with observations on it probes
 * a one-entry ring, closed at once, to know whether io_uring is an eligible alternative);
 * {@code uring} fails closed with an {@link IOException} naming the kernel's reason;
 * {@code auto} takes io_uring when it can be set up and positional reads otherwise.
 */
sealed interface ReadRouteChoice {

    SsdReadObservations observations();

    record Positional(SsdReadObservations observations) implements ReadRouteChoice {}

    record Uring(UringReadRoute route, SsdReadObservations observations) implements ReadRouteChoice {}

    static ReadRouteChoice choose(SsdStore store, SsdConfig config, ExtentFiles files, SsdMetrics metrics,
                                  CostObserver observer, ResourceId resource,
                                  IntFunction<UringReader.Open> opener) throws IOException {
        System.Logger log = System.getLogger(SsdStore.class.getName());
        return switch (config.readPath()) {
            case POSITIONAL -> new Positional(new SsdReadObservations(observer, resource,
                    observer.enabled() && probe(opener)));
            case URING, AUTO -> {
                SsdReadObservations withUring = new SsdReadObservations(observer, resource, true);
                yield switch (UringReadRoute.open(store, config, files, metrics, withUring, opener)) {
                    case UringReadRoute.Open.Opened(UringReadRoute route) -> new Uring(route, withUring);
                    case UringReadRoute.Open.Unavailable(String reason) -> {
                        if (config.readPath() == ReadPath.URING) throw UringReadRoute.unavailable(config, reason);
                        log.log(System.Logger.Level.INFO, "SSD store {0}: io_uring unavailable ({1}); positional reads",
                                config.directory(), reason);
                        yield new Positional(new SsdReadObservations(observer, resource, false));
                    }
                };
            }
        };
    }

    /** Whether io_uring can be set up now (a one-entry ring, closed again). */
    private static boolean probe(IntFunction<UringReader.Open> opener) {
        return switch (opener.apply(1)) {
            case UringReader.Open.Opened(UringReader r) -> {
                r.close();
                yield true;
            }
            case UringReader.Open.Unavailable(String ignored) -> false;
        };
    }
}
