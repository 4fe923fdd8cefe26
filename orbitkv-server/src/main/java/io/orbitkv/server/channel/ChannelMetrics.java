package io.orbitkv.server.channel;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.state.protocol.ErrorCode;
import java.util.EnumMap;
import java.util.Map;

/**
 * The transport's counters, registered once per {@link ChannelServer} under
 * {@code orbitkv.channel.*} (Prometheus: {@code orbitkv_channel_*_total}).
 *
 * <p>Thread-safe (Micrometer counters); immutable references after construction.
 */
final class ChannelMetrics {

    final Counter accepted;
    final Counter refusedBusy;
    final Counter refusedUnregistered;
    final Counter refusedUnregisteredPerUid;
    final Counter displaced;
    final Counter registerTimeouts;
    final Counter framesIn;
    final Counter framesOut;
    final Counter internalErrors;
    final Counter completionsDropped;
    final Counter truncatedAtClose;
    private final Map<ErrorCode, Counter> refusedFrames = new EnumMap<>(ErrorCode.class);

    ChannelMetrics(MeterRegistry registry) {
        accepted = counter(registry, "orbitkv.channel.connections.accepted", "engine connections accepted");
        refusedBusy = Counter.builder("orbitkv.channel.connections.refused").tag("reason", "max_connections")
                .description("engine connections refused (answered BUSY and closed)").register(registry);
        refusedUnregistered = Counter.builder("orbitkv.channel.connections.refused").tag("reason", "max_unregistered")
                .description("engine connections refused (answered BUSY and closed)").register(registry);
        refusedUnregisteredPerUid = Counter.builder("orbitkv.channel.connections.refused")
                .tag("reason", "max_unregistered_per_uid")
                .description("engine connections refused (answered BUSY and closed)").register(registry);
        displaced = counter(registry, "orbitkv.channel.connections.displaced",
                "connections that sent nothing for 1 s (unregistered, or waiting to be refused) closed with BUSY for a newcomer");
        registerTimeouts = counter(registry, "orbitkv.channel.register.timeouts",
                "connections closed with REGISTER_TIMEOUT: not REGISTERED within the registration deadline");
        framesIn = counter(registry, "orbitkv.channel.frames.in", "frames received from engines");
        framesOut = counter(registry, "orbitkv.channel.frames.out", "frames sent to engines");
        internalErrors = counter(registry, "orbitkv.channel.internal.errors", "session bugs answered INTERNAL");
        completionsDropped = counter(registry, "orbitkv.channel.completions.dropped",
                "COMPLETION events dropped because the connection's outbound queue was full");
        truncatedAtClose = counter(registry, "orbitkv.channel.truncated.frames", "connections closed inside a frame");
        for (ErrorCode code : ErrorCode.values()) {
            refusedFrames.put(code, Counter.builder("orbitkv.channel.refused.frames").tag("code", code.name())
                    .description("frames the decoder refused, by error code").register(registry));
        }
    }

    private static Counter counter(MeterRegistry registry, String name, String description) {
        return Counter.builder(name).description(description).register(registry);
    }

    /** A frame the decoder refused with {@code code}. */
    void refused(ErrorCode code) {
        refusedFrames.get(code).increment();
    }
}
