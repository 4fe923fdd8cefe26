package io.orbitkv.client;

import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import java.util.List;
import java.util.Objects;

/**
 * The session REGISTERED opened: the Manager's incarnation id for it, the registered epoch, the
 * Manager's limits and the arena files the client has mapped (index {@code i} is a lease's or a
 * grant's arena index {@code i}). Value.
 */
public record Registration(long incarnationId, long epoch, ProtocolLimits limits, List<Reply.ArenaFile> arenas) {

    public Registration {
        Objects.requireNonNull(limits, "limits");
        arenas = List.copyOf(arenas);
    }

    static Registration of(Reply.Registered r) {
        return new Registration(r.incarnationId(), r.epoch(), r.limits(), r.arenas());
    }
}
