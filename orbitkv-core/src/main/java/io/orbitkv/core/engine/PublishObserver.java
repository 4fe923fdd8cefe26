package io.orbitkv.core.engine;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.KeyForm;

/**
 * Learns, from the engine channel, the names engines give their pages: which instance registered
 * with which namespace, and which engine block hash (or client-derived StateKey) a reserved page's
 * key came from. The residency stream only carries keys (a SHA-256 the key's name cannot be
 * recovered from), so anything that reports residency in the engine's own terms (the KV events
 * publisher) needs this side channel.
 *
 * <p>Called on session threads ({@link #onReserved} under the session's lock): an implementation
 * must not block beyond a short lock of its own (offer to a bounded structure and count what it
 * drops) and must not throw.
 */
public interface PublishObserver {

    /** An observer that ignores everything (the default: KV events off). */
    PublishObserver NONE = new PublishObserver() {
        @Override
        public void onRegistered(String instanceId, Namespace namespace) {
        }

        @Override
        public void onReserved(String instanceId, StateKey key, KeyForm form, byte[] name, int pageTokens) {
        }
    };

    /** {@code instanceId} registered (any epoch) with {@code namespace}. */
    void onRegistered(String instanceId, Namespace namespace);

    /**
     * {@code instanceId} was granted a publish slot for {@code key}, which it named {@code name}
     * in form {@code form} (an engine block hash, or the 32-byte key itself); a page covers
     * {@code pageTokens} tokens. The page becomes resident only if the reservation is committed.
     */
    void onReserved(String instanceId, StateKey key, KeyForm form, byte[] name, int pageTokens);
}
