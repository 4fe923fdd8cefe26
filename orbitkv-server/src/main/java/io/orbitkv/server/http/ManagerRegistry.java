package io.orbitkv.server.http;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.core.instrument.config.MeterFilter;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.lang.management.ManagementFactory;
import java.lang.management.OperatingSystemMXBean;

/**
 * Builds the Manager's Prometheus registry: the JVM and process binders, with the two meters
 * whose Micrometer names break Prometheus' conventions fixed, so {@code promtool check metrics}
 * passes on {@code /metrics}.
 *
 * <p>Micrometer exports process CPU time as {@code process_cpu_time_ns_total} (nanoseconds; the
 * convention is base units, and Prometheus' own client calls it {@code process_cpu_seconds_total})
 * and the processor count as {@code system_cpu_count} (a gauge with a {@code _count} suffix, which
 * reads as half of a summary). The first is replaced by a seconds counter over the same MXBean
 * value, the second renamed {@code system_cpu_cores}. Nothing else is renamed: dashboards
 * built for Micrometer's JVM meters keep working.
 */
public final class ManagerRegistry {

    private ManagerRegistry() {
    }

    /** A new registry with the JVM, class loader, processor and uptime meters bound. */
    public static PrometheusMeterRegistry create() {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        registry.config()
                .meterFilter(MeterFilter.deny(id -> id.getName().equals("process.cpu.time")))
                .meterFilter(new MeterFilter() {
                    @Override
                    public Meter.Id map(Meter.Id id) {
                        return id.getName().equals("system.cpu.count") ? id.withName("system.cpu.cores") : id;
                    }
                });
        new JvmMemoryMetrics().bindTo(registry);
        new JvmThreadMetrics().bindTo(registry);
        new ClassLoaderMetrics().bindTo(registry);
        new ProcessorMetrics().bindTo(registry);
        new UptimeMetrics().bindTo(registry);
        OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean sun) {
            FunctionCounter.builder("process.cpu", sun, b -> Math.max(0, b.getProcessCpuTime()) / 1e9)
                    .baseUnit("seconds").description("CPU time the Manager process used").register(registry);
        }
        return registry;
    }
}
