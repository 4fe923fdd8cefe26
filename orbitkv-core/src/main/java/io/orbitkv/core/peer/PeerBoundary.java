package io.orbitkv.core.peer;

import io.orbitkv.core.log.UnexpectedErrors;

import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;

/**
 * The one way the peer path calls across a layer: a call that returns a future of a value (a fetch
 * outcome, an authorization, a staging result) either answers that value or, when it throws or
 * its future completes exceptionally, answers {@code otherwise} after
 * {@link UnexpectedErrors#record} counted and logged the failure under the caller's layer and site.
 *
 * <p>Only for calls whose contract is "never throws, never completes exceptionally" (the
 * {@link PayloadTransport}, {@link PeerSource#authorize}, {@link PeerReader}): their expected
 * outcomes (an unreachable source, a broken stream, a refusal, a miss) are already values, so what
 * arrives here is a bug, and the caller answers the value it would answer for a failure. Stateless
 * and thread-safe; the returned future completes on the thread that completed the call's future.
 *
 * <p>Design note: one helper rather than a try/catch plus an {@code exceptionally} at each site,
 * so a site cannot handle one half (the synchronous throw) and forget the other (the exceptional
 * future), and no site can answer a miss without the count and the log.
 */
public final class PeerBoundary {

    private PeerBoundary() {
    }

    /**
     * Runs {@code call}; a {@code RuntimeException} it throws, or an exceptional completion of its
     * future, is recorded under {@code layer} and {@code site} and answered as {@code otherwise}.
     * The returned future never completes exceptionally (but for a {@link VirtualMachineError}).
     *
     * @param answer what {@code otherwise} means to the caller, for the log ("a miss")
     */
    public static <T> CompletableFuture<T> call(UnexpectedErrors.Layer layer, String site, String answer, T otherwise,
                                                Supplier<? extends CompletableFuture<? extends T>> call) {
        CompletableFuture<? extends T> started;
        try {
            started = Objects.requireNonNull(call.get(), "a call answered no future");
        } catch (RuntimeException e) {
            UnexpectedErrors.record(layer, site, answer, e);
            return CompletableFuture.completedFuture(otherwise);
        }
        return started.handle((value, failure) -> {
            if (failure == null) return value;
            UnexpectedErrors.record(layer, site, answer, cause(failure));
            return otherwise;
        });
    }

    /** {@code failure} without the {@link CompletionException} / {@link ExecutionException} wrapping it. */
    public static Throwable cause(Throwable failure) {
        Throwable t = failure;
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null) t = t.getCause();
        return t;
    }
}
