package io.orbitkv.core.storage.ssd;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.Size;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Recovery boundary property: write extents of random sizes, damage a random subset in random
 * ways, reopen. Exactly the undamaged ones are kept, the damaged ones are counted by reason and
 * none of them is served. jqwik prints the seed of a failing run.
 */
class SsdRecoveryProperties {

    enum Damage { NONE, HEADER_FIELD, PAYLOAD_BYTE, MAGIC }

    record Item(int payloadBytes, Damage damage, int where) {}

    @Property(tries = 12)
    void exactlyTheUndamagedExtentsAreRecovered(@ForAll("items") @Size(min = 1, max = 12) List<Item> items)
            throws Exception {
        Path dir = Files.createTempDirectory("orbitkv-ssd-prop-");
        try {
            SsdConfig config = SsdTestSupport.smallConfig(dir, 2, 512);
            long[] offsets = new long[items.size()];
            try (SsdTestSupport s = SsdTestSupport.openRecovered(config)) {
                long offset = 0;
                for (int i = 0; i < items.size(); i++) {
                    s.writeCommitted(i, items.get(i).payloadBytes());
                    offsets[i] = offset;
                    offset += ExtentLayout.footprintBytes(items.get(i).payloadBytes());
                }
            }
            Map<ExtentDamage, Integer> expected = new EnumMap<>(ExtentDamage.class);
            int intact = 0;
            for (int i = 0; i < items.size(); i++) {
                Item it = items.get(i);
                switch (it.damage()) {
                    case NONE -> intact++;
                    case HEADER_FIELD -> {
                        SsdTestSupport.flipByte(dir, 0, offsets[i] + 8 + it.where() % 88); // any field after the magic
                        expected.merge(ExtentDamage.BAD_HEADER_CRC, 1, Integer::sum);
                    }
                    case PAYLOAD_BYTE -> {
                        SsdTestSupport.flipByte(dir, 0, offsets[i] + ExtentLayout.HEADER_BYTES + it.where() % it.payloadBytes());
                        expected.merge(ExtentDamage.BAD_PAYLOAD_CRC, 1, Integer::sum);
                    }
                    case MAGIC -> SsdTestSupport.flipByte(dir, 0, offsets[i] + it.where() % 8);
                }
            }
            try (SsdTestSupport s = SsdTestSupport.open(config)) {
                RecoveryReport r = s.store.recover();
                assertThat(r.extentsKept()).isEqualTo(intact);
                assertThat(r.dropped()).isEqualTo(expected);
                for (int i = 0; i < items.size(); i++) {
                    ReadResult res = s.readAndCheck(i, items.get(i).payloadBytes());
                    if (items.get(i).damage() == Damage.NONE) {
                        assertThat(res).isInstanceOf(ReadResult.Served.class);
                    } else {
                        assertThat(res).as("damaged extent %d must not be indexed", i).isNull();
                    }
                }
            }
        } finally {
            try (var paths = Files.walk(dir)) {
                for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
            } catch (IOException ignored) {
                // best effort cleanup of a temp dir
            }
        }
    }

    @Provide
    Arbitrary<List<Item>> items() {
        Arbitrary<Item> item = net.jqwik.api.Combinators.combine(
                        Arbitraries.integers().between(1, 36_000), // 12 × 40 KiB footprints fit file 0
                        Arbitraries.of(Damage.class),
                        Arbitraries.integers().between(0, Integer.MAX_VALUE))
                .as(Item::new);
        return item.list();
    }
}
