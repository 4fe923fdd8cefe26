package io.orbitkv.engine;

import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;

import java.util.List;

/**
 * The recovery contract every adapter of a full-attention (Llama) model registers: one
 * {@code full} state group holding all layers' K and V.
 *
 * <p>Stateless. Invariant: restoring to boundary {@code t} needs every page {@code [0, t/P)} of
 * group {@value #GROUP}; there is no window or recurrent state to checkpoint.
 *
 * <p>Design note: shared by the Jlama and llama.cpp adapters so {@link OrbitKvPageStore} can
 * query and publish without knowing the engine; engines still never share pages, because their
 * namespaces (dtype, kv_layout) differ.
 */
public final class FullAttention {

    /** The one state group: all layers' K and V. */
    public static final int GROUP = 0;

    private FullAttention() {
    }

    /** One {@code full} group of {@code pageTokens}-token pages. */
    public static RecoveryContract contract(int pageTokens) {
        return new RecoveryContract(pageTokens, List.of(new StateGroup.Full(GROUP)));
    }
}
