package io.orbitkv.core.storage.residency;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.Test;

import java.util.List;

import static io.orbitkv.core.storage.residency.ResidencyEvent.Kind.ADDED;
import static io.orbitkv.core.storage.residency.ResidencyEvent.Kind.REMOVED;
import static org.assertj.core.api.Assertions.assertThat;

/** Retained ÷ needed bytes per namespace: each key once across tiers, needed only while retained. */
class RetentionLedgerTest {

    static StateKey key(int i) {
        byte[] b = new byte[32];
        b[0] = (byte) i;
        b[31] = 1;
        return StateKey.ofBytes(b);
    }

    static NamespaceDigest digest(int i) {
        byte[] b = new byte[32];
        b[5] = (byte) i;
        return NamespaceDigest.ofBytes(b);
    }

    @Test
    void retainedCountsEachKeyOnceAcrossTiers_neededOnlyWhatAHitLeased() {
        NamespaceTable table = new NamespaceTable(8);
        table.register(0, digest(0));
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        RetentionLedger ledger = new RetentionLedger(table, registry);
        for (int i = 0; i < 4; i++) {
            ledger.dram(0, key(i), ADDED, 1000);
            ledger.ssd(digest(0), key(i), ADDED, 1000);      // write-through: the same key on both tiers
        }
        assertThat(ledger.snapshot()).containsExactly(
                new RetentionLedger.NamespaceRetention(digest(0).toString(), 4000, 4, 0, 0, null));
        assertThat(ledger.amplification(0)).as("nothing needed yet").isZero();

        ledger.needed(0, List.of(key(3), key(3), key(9)));  // key 9 is not retained: ignored
        assertThat(ledger.amplification(0)).isEqualTo(4.0);
        assertThat(registry.get("orbitkv.retention.amplification.ratio").tag("namespace", digest(0).toString()).gauge().value())
                .isEqualTo(4.0);

        ledger.dram(0, key(3), REMOVED, 1000);               // still on SSD: still retained and needed
        assertThat(ledger.amplification(0)).isEqualTo(4.0);
        ledger.ssd(digest(0), key(3), REMOVED, 1000);        // gone from every tier
        assertThat(ledger.snapshot().getFirst().retainedBytes()).isEqualTo(3000);
        assertThat(ledger.snapshot().getFirst().neededBytes()).isZero();
        ledger.dram(0, key(3), ADDED, 1000);                 // back again: needed again only after a new hit
        assertThat(ledger.snapshot().getFirst().neededImages()).isZero();
    }

    @Test
    void namespacesAreSeparate_andRecoveredSsdExtentsNeverBindTheirDigest() {
        NamespaceTable table = new NamespaceTable(8);
        table.register(0, digest(0));
        RetentionLedger ledger = new RetentionLedger(table, null);
        ledger.dram(0, key(1), ADDED, 10);
        ledger.ssd(digest(7), key(1), ADDED, 30);            // same key bytes, another namespace, read from disk
        assertThat(table.id(digest(7))).as("only an engine's REGISTER binds an id").isEmpty();
        assertThat(ledger.snapshot()).hasSize(2);
        table.register(1, digest(7));                        // its engine registers later
        ledger.needed(1, List.of(key(1)));
        assertThat(ledger.amplification(0)).isZero();
        assertThat(ledger.amplification(1)).isEqualTo(1.0);
        ledger.ssd(digest(9), key(2), REMOVED, 5);           // a removal never creates a namespace
        assertThat(table.id(digest(9))).isEmpty();
    }
}
