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
    final Counter framesIn;
    final Counter framesOut;
    final Counter internalErrors;
    final Counter completionsDropped;
    final Counter truncatedAtClose;
    private final Map<ErrorCode, Counter> refusedFrames = new EnumMap<>(ErrorCode.class);

    ChannelMetrics(MeterRegistry registry) {
        accepted = registry.counter("orbitkv.channel.connections.accepted");
        refusedBusy = registry.counter("orbitkv.channel.connections.refused", "reason", "max_connections");
        framesIn = registry.counter("orbitkv.channel.frames.in");
        framesOut = registry.counter("orbitkv.channel.frames.out");
        internalErrors = registry.counter("orbitkv.channel.internal.errors");
        completionsDropped = registry.counter("orbitkv.channel.completions.dropped");
        truncatedAtClose = registry.counter("orbitkv.channel.truncated.frames");
        for (ErrorCode code : ErrorCode.values()) {
            refusedFrames.put(code, registry.counter("orbitkv.channel.refused.frames", "code", code.name()));
        }
    }

    /** A frame the decoder refused with {@code code}. */
    void refused(ErrorCode code) {
        refusedFrames.get(code).increment();
    }
}
