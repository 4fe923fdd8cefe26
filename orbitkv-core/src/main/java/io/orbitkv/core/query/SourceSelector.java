package io.orbitkv.core.query;

import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.Selection;
import io.orbitkv.core.cost.Shape;
import io.orbitkv.core.cost.SourceMedium;
import io.orbitkv.core.cost.SourceOffer;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.state.StateKey;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * Which source stages one page that local DRAM does not hold, and how a refused source hands
 * over to the next: local SSD first, then peers (the route order), unless guarded selection
 * ({@link CostObserver#select}) measures another equal-coverage source faster by the margin.
 *
 * <p>Owns nothing but the observer reference; each {@link #stage} call owns its ordered route
 * list until its future completes. Thread model: thread-safe; {@link #stage} never blocks (the
 * estimator lookup is a try-lock) and continues on whatever thread completes a route's future.
 *
 * <p>Invariants: the chosen source still acquires and admits authoritatively (this class only
 * orders the attempts); a route that ends {@link Attempt#REJECTED} before any payload byte was
 * submitted hands over to the next route in the default order; a route that ends
 * {@link Attempt#FAILED} after submitting payload ends the page as a miss for this operation,
 * and no further route, of any medium, is tried; each route is tried at most once per call.
 *
 * <p>Design note: a failure after submission means the copy we trusted was bad or the device
 * broke mid-read; retrying on another medium inside the same operation would double the
 * page's latency (0.2 ms SSD + 0.3 ms peer per 2 MiB) while the boundary could simply shrink
 * by one page, which the operation's replan already does. A refusal costs no bytes, so the
 * next route is the cheaper answer there. With selection off this is one list of two routes
 * and one extra branch per staged page.
 */
public final class SourceSelector {

    /** How one route's attempt ended. */
    public enum Attempt {
        /** A lease the caller owns. */
        SERVED,
        /** Refused before any payload byte was submitted (absent, busy, unauthorized): try the next route. */
        REJECTED,
        /** Failed after payload submission started: a miss for this operation, no other route. */
        FAILED
    }

    /** One source able to bring a page into local DRAM. */
    public interface Route {
        /** Its route key, medium and coverage when it is measured; empty when it cannot compete. */
        Optional<SourceOffer> offer();

        /** Starts staging; never completes exceptionally. */
        CompletableFuture<StageResult> stage();
    }

    private final CostObserver observer;

    public SourceSelector(CostObserver observer) {
        this.observer = Objects.requireNonNull(observer, "observer");
    }

    /**
     * Shape of a one-page staging whose image pads to {@code paddedPayloadBytes}: the extent's
     * footprint in one fragment, as {@code SsdStore.readRouteKey} keys local reads, so that a
     * peer fetch of the same page competes on the same shape.
     */
    public static Shape pageShape(long paddedPayloadBytes) {
        return Shape.of(ExtentLayout.HEADER_BYTES + paddedPayloadBytes, 1);
    }

    /** The shape of a one-page staging of an image of {@code lengthBytes}. */
    public static Shape imageShape(int lengthBytes) {
        return pageShape(ExtentLayout.paddedPayloadBytes(lengthBytes));
    }

    /**
     * The routes able to stage {@code key} for a session in {@code scope}, in route order:
     * local ({@code store.stage}: DRAM, else SSD), then peers ({@code remote.fetch}). When
     * selection is on and local SSD indexes the page, local SSD offers its read route key for
     * {@code stagingBytes} of padded payload and the peers offer theirs on the same shape.
     */
    public static List<Route> routes(TieredStore store, RemotePages remote, StateKey key, SessionScope scope,
                                     long stagingBytes) {
        boolean measured = store.costObserver().selectionEnabled() && stagingBytes > 0 && store.onSsd(key, scope.digest());
        Optional<SourceOffer> localOffer = measured
                ? Optional.of(new SourceOffer(store.ssdReadRouteKey(stagingBytes), SourceMedium.SSD, 1))
                : Optional.empty();
        Optional<Shape> shape = measured ? Optional.of(pageShape(stagingBytes)) : Optional.empty();
        Route local = new Route() {
            @Override
            public Optional<SourceOffer> offer() {
                return localOffer;
            }

            @Override
            public CompletableFuture<StageResult> stage() {
                return store.stage(key, scope.namespaceId());
            }
        };
        Route peers = new Route() {
            @Override
            public Optional<SourceOffer> offer() {
                return shape.flatMap(s -> remote.offer(key, scope, s));
            }

            @Override
            public CompletableFuture<StageResult> stage() {
                return remote.fetch(key, scope);
            }
        };
        return List.of(local, peers);
    }

    /** Classifies a route's result (see {@link Attempt}). */
    public static Attempt attempt(StageResult result) {
        return switch (result) {
            case StageResult.Staged s -> Attempt.SERVED;
            case StageResult.Busy b -> Attempt.REJECTED;
            case StageResult.Miss m -> switch (m.reason()) {
                case NOT_FOUND, UNKNOWN_NAMESPACE, CLOSED -> Attempt.REJECTED;
                case CORRUPT, EVICTED, IO_ERROR -> Attempt.FAILED;
            };
        };
    }

    /**
     * The attempt order: {@code defaultOrder} unchanged unless the first route and an
     * alternative both offer and the observer answers {@link Selection.Switch}; then the chosen
     * route first and the rest in default order.
     */
    public List<Route> order(List<Route> defaultOrder) {
        if (defaultOrder.size() < 2 || !observer.selectionEnabled()) return defaultOrder;
        Optional<SourceOffer> first = defaultOrder.getFirst().offer();
        if (first.isEmpty()) return defaultOrder;
        List<SourceOffer> offers = new ArrayList<>(defaultOrder.size() - 1);
        List<Route> offering = new ArrayList<>(defaultOrder.size() - 1);
        for (Route r : defaultOrder.subList(1, defaultOrder.size())) {
            Optional<SourceOffer> o = r.offer();
            if (o.isEmpty()) continue;
            offers.add(o.get());
            offering.add(r);
        }
        if (offers.isEmpty()) return defaultOrder;
        return switch (observer.select(first.get(), offers)) {
            case Selection.Keep k -> defaultOrder;
            case Selection.Switch s -> {
                Route chosen = offering.get(offers.indexOf(new SourceOffer(s.chosen().key(), s.chosen().medium(),
                        s.chosen().coveragePages())));
                List<Route> ordered = new ArrayList<>(defaultOrder.size());
                ordered.add(chosen);
                for (Route r : defaultOrder) if (r != chosen) ordered.add(r);
                yield ordered;
            }
        };
    }

    /**
     * Stages from the routes in {@link #order}: the first SERVED or FAILED result, or the last
     * REJECTED one when every route refused. Never completes exceptionally.
     */
    public CompletableFuture<StageResult> stage(List<Route> defaultOrder, StageResult nothing) {
        return next(order(defaultOrder), 0, nothing).exceptionally(t -> {
            unexpected("SourceSelector.stage", t);
            return nothing;
        });
    }

    private static CompletableFuture<StageResult> next(List<Route> routes, int index, StageResult last) {
        if (index >= routes.size()) return CompletableFuture.completedFuture(last);
        CompletableFuture<StageResult> started;
        try {
            started = routes.get(index).stage();
        } catch (RuntimeException e) {
            unexpected("SourceSelector.next", e);
            return CompletableFuture.completedFuture(last);
        }
        return started.thenCompose(result -> switch (attempt(result)) {
            case SERVED, FAILED -> CompletableFuture.completedFuture(result);
            case REJECTED -> next(routes, index + 1, result);
        });
    }

    /**
     * The query layer's error boundary for stagings: a route or a fetch that threw, or a future
     * that completed exceptionally although its contract says it never does, is a bug; it is
     * counted and logged ({@link UnexpectedErrors}) and the caller answers the page as a miss.
     */
    static void unexpected(String site, Throwable error) {
        UnexpectedErrors.record(UnexpectedErrors.Layer.QUERY, site, "a miss", error);
    }
}
