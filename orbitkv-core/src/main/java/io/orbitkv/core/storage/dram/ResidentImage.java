package io.orbitkv.core.storage.dram;

/**
 * The index's value for one resident key: where its bytes are and which image they are.
 *
 * <p>Immutable; one per resident block, so it is kept to four primitives (32 bytes with the
 * object header on a compressed-oops heap). The page itself ({@link PageKey}: namespace id and
 * key) is the Caffeine entry's key.
 *
 * @param slot        global slot number in the {@link SlotTable}
 * @param lengthBytes bytes of the image in its slot
 * @param namespaceId the Manager's small id of the image's namespace (its leases and the retention ledger)
 * @param imageId     unique per tier, assigned at reservation; the residency generation
 */
record ResidentImage(int slot, int lengthBytes, int namespaceId, long imageId) {
}
