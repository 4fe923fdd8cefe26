package io.orbitkv.core.engine;

import io.orbitkv.core.storage.dram.DramEviction;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.protocol.SettleOutcome;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Under {@code dramEviction = chain} an engine session links the pages of one PUBLISH_RESERVE into
 * a chain, so a full DRAM tier evicts an old prompt from its last page, where LRU evicts its first
 * page and leaves the rest unreachable.
 */
class ManagerChainEvictionTest {

    private static final Namespace NS = ManagerFixture.namespace("model-a");
    /** 26 slots less 16 reserved and 4 evicted-leased: the index holds 6 pages. */
    private static final int SLOTS = 26;

    @TempDir
    Path dir;

    private ManagerFixture m;

    @AfterEach
    void close() {
        if (m != null) m.close();
    }

    private boolean resident(long prompt, long page) {
        if (!(m.store.dram().acquire(Client.key(NS, prompt, 0, page), m.namespaces.id(NamespaceDigest.ofBytes(NS.digest())).orElse(-1)) instanceof Lease lease)) return false;
        lease.release();
        return true;
    }

    private void fillAndEvictOne(DramEviction eviction) throws IOException {
        m = new ManagerFixture(dir, SLOTS, eviction);
        Client c = m.register("e1", 1, NS, ManagerFixture.FULL);
        assertThat(c.publish(1, 0, 0, 1, 2)).containsOnly(SettleOutcome.SEALED);
        assertThat(c.publish(2, 0, 0, 1, 2)).containsOnly(SettleOutcome.SEALED);
        assertThat(c.publish(3, 0, 0)).containsOnly(SettleOutcome.SEALED); // one eviction
        assertThat(m.store.dram().usage().residentImages()).isEqualTo(6);
    }

    @Test
    void theOldestPromptLosesItsLastPageAndKeepsItsPrefix() throws IOException {
        fillAndEvictOne(DramEviction.CHAIN);
        assertThat(resident(1, 0)).isTrue();
        assertThat(resident(1, 1)).isTrue();
        assertThat(resident(1, 2)).as("the old prompt's last page").isFalse();
    }

    @Test
    void underLruTheSameTrafficLosesThePromptsFirstPage() throws IOException {
        fillAndEvictOne(DramEviction.LRU);
        assertThat(resident(1, 0)).as("the old prompt's first page").isFalse();
        assertThat(resident(1, 2)).as("kept, and unreachable behind the gap").isTrue();
    }
}
