package io.orbitkv.core.engine;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.log.RateLimitedLog;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import java.util.function.LongUnaryOperator;

/**
 * The Manager logic's own threads: one platform tick thread that runs the registered duties every
 * {@code tickMillis}, and the virtual threads that I/O completions and delayed tasks hop to
 * ({@link #callbacks()}), so that an SSD worker, a copy thread or the tick thread never waits on a
 * session lock.
 *
 * <p>Every failure on these threads is visible: a duty or a callback that throws is counted in
 * {@code orbitkv.manager.background.errors} (tag {@code duty}) and logged at ERROR, rate-limited
 * per duty ("N more like this in the last 10 s"); the tick thread keeps running (a
 * {@code scheduleWithFixedDelay} task that throws would otherwise be cancelled for good).
 *
 * <p>Bounds: the tick thread is one thread; callbacks are one virtual thread per task, and their
 * number is bounded by the work that schedules them (each query operation, restore batch and SSD
 * read has at most a few completions in flight, and those are bounded by the operation, lease and
 * staging tables); the gauge {@code orbitkv.manager.callbacks.inflight} shows it.
 *
 * <p>Thread model: duties are added before {@link #start}; {@link #tick} may also be called by
 * tests with their own clock (then concurrently with the tick thread, so duties are thread-safe).
 */
final class Housekeeper implements AutoCloseable {

    /** One time-driven job; returns a count for the caller's interest (e.g. slots freed). */
    @FunctionalInterface
    interface Duty extends LongUnaryOperator {
    }

    private record Named(String name, Duty duty, Counter errors) {
    }

    private final long tickMillis;
    private final LongSupplier nanoClock;
    private final MeterRegistry registry;
    private final RateLimitedLog log = RateLimitedLog.tenSeconds(Housekeeper.class.getName());
    private final List<Named> duties = new ArrayList<>();
    private final List<Meter> meters = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final ConcurrentHashMap<String, Counter> callbackErrors = new ConcurrentHashMap<>();
    private final AtomicLong callbacksInFlight = new AtomicLong();
    private final ExecutorService callbacks;
    private final ScheduledExecutorService ticker;
    private final Executor asExecutor = task -> execute("callback", task);

    Housekeeper(long tickMillis, LongSupplier nanoClock, MeterRegistry registry) {
        if (tickMillis <= 0) throw new IllegalArgumentException("tickMillis: " + tickMillis);
        this.tickMillis = tickMillis;
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
        this.registry = Objects.requireNonNull(registry, "registry");
        this.callbacks = Executors.newThreadPerTaskExecutor(Thread.ofVirtual().name("orbitkv-callback-", 0).factory());
        this.ticker = Executors.newSingleThreadScheduledExecutor(
                Thread.ofPlatform().daemon().name("orbitkv-manager-tick").factory());
        meters.add(Gauge.builder("orbitkv.manager.callbacks.inflight", callbacksInFlight, AtomicLong::get)
                .description("callbacks queued or running on the Manager's callback threads").register(registry));
    }

    /** Adds {@code duty} to every tick, in the order added; only before {@link #start}. */
    void addDuty(String name, Duty duty) {
        duties.add(new Named(name, duty, errors(name)));
    }

    void start() {
        ticker.scheduleWithFixedDelay(() -> tick(nanoClock.getAsLong()), tickMillis, tickMillis, TimeUnit.MILLISECONDS);
    }

    /** Runs every duty at {@code nowNanos}, each guarded; returns the first duty's count. */
    long tick(long nowNanos) {
        long first = 0;
        for (int i = 0; i < duties.size(); i++) {
            Named d = duties.get(i);
            try {
                long n = d.duty().applyAsLong(nowNanos);
                if (i == 0) first = n;
            } catch (RuntimeException | Error e) {
                failed(d.name(), d.errors(), e);
                if (e instanceof VirtualMachineError) throw e;
            }
        }
        return first;
    }

    /**
     * Runs {@code task} on a callback thread (failures counted and logged under {@code duty}).
     *
     * @throws RejectedExecutionException after {@link #close}, as the executor it wraps would
     */
    void execute(String duty, Runnable task) {
        Counter errors = callbackErrors.computeIfAbsent(duty, this::errors);
        callbacksInFlight.incrementAndGet();
        try {
            callbacks.execute(() -> {
                try {
                    task.run();
                } catch (RuntimeException | Error e) {
                    failed(duty, errors, e);
                    if (e instanceof VirtualMachineError) throw e;
                } finally {
                    callbacksInFlight.decrementAndGet();
                }
            });
        } catch (RejectedExecutionException closing) {
            callbacksInFlight.decrementAndGet();
            throw closing;
        }
    }

    /**
     * Runs {@code task} on a callback thread after {@code delayNanos} (the tick thread only hands
     * it over); returns what cancels it.
     */
    Runnable schedule(String duty, Runnable task, long delayNanos) {
        ScheduledFuture<?> f;
        try {
            f = ticker.schedule(() -> {
                try {
                    execute(duty, task);
                } catch (RejectedExecutionException closing) {
                    // the Manager is closing: its close releases what the timer would have
                }
            }, delayNanos, TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException closing) {
            return () -> { };
        }
        return () -> f.cancel(false);
    }

    /**
     * The executor completions hop to: {@link #execute} under duty {@code callback} (a
     * {@code CompletableFuture} stage run here keeps its own failure in its future).
     */
    Executor callbacks() {
        return asExecutor;
    }

    /** Failures counted under {@code duty} so far. */
    long errors(String duty, boolean callback) {
        Counter c = callback ? callbackErrors.get(duty) : duties.stream().filter(d -> d.name().equals(duty))
                .map(Named::errors).findFirst().orElse(null);
        return c == null ? 0 : (long) c.count();
    }

    private Counter errors(String duty) {
        Counter c = Counter.builder("orbitkv.manager.background.errors").tag("duty", duty)
                .description("failures of the Manager's background duties and callbacks (each also logged, rate-limited)")
                .register(registry);
        meters.add(c);
        return c;
    }

    private void failed(String duty, Counter errors, Throwable e) {
        errors.increment();
        log.log(System.Logger.Level.ERROR, duty, "background duty '" + duty + "' failed; the Manager keeps serving"
                + " and retries it: " + e + (e.getStackTrace().length > 0 ? " at " + e.getStackTrace()[0] : ""));
    }

    /** Stops the tick thread now and the callbacks after their running tasks, removes the meters; idempotent. */
    @Override
    public void close() {
        ticker.shutdownNow();
        callbacks.shutdown();
        for (Meter m : meters) registry.remove(m);
        meters.clear();
    }
}
