package io.orbitkv.core.cost;

import io.orbitkv.state.protocol.CompletionTarget;
import java.util.Objects;

/**
 * Identity of one estimate: what ran ({@code path}), which boundary was measured
 * ({@code kind}), on what ({@code resource} with incarnation), over which bytes
 * ({@code representation}, {@code shape}) and to which end ({@code target}). Never a request
 * id, a state key or a generation: those would make every entry single-use.
 */
public record CostKey(CostPath path, SampleKind kind, ResourceId resource, RepresentationFamily representation,
                      CompletionTarget target, Shape shape) {
    public CostKey {
        Objects.requireNonNull(path, "path");
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(resource, "resource");
        Objects.requireNonNull(representation, "representation");
        Objects.requireNonNull(target, "target");
        Objects.requireNonNull(shape, "shape");
    }

    public CostKey withPath(CostPath other) {
        return new CostKey(other, kind, resource, representation, target, shape);
    }

    public CostKey withKind(SampleKind other) {
        return new CostKey(path, other, resource, representation, target, shape);
    }
}
