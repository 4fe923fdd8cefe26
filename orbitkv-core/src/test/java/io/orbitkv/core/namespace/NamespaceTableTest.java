package io.orbitkv.core.namespace;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.OptionalInt;
import io.orbitkv.state.NamespaceDigest;
import org.junit.jupiter.api.Test;

/** On-demand binding shares REGISTER's id space: lowest free id, never a second id for a digest, bounded. */
class NamespaceTableTest {

    static NamespaceDigest digest(long n) {
        return new NamespaceDigest(n, 1, 2, 3);
    }

    @Test
    void bindTakesTheLowestFreeIdKeepsAnExistingOneAndStopsWhenFull() {
        NamespaceTable t = new NamespaceTable(3);
        assertThat(t.register(0, digest(10))).isEqualTo(NamespaceTable.Registration.REGISTERED);
        assertThat(t.bind(digest(10))).isEqualTo(OptionalInt.of(0));
        assertThat(t.bind(digest(11))).isEqualTo(OptionalInt.of(1));
        assertThat(t.bind(digest(11))).isEqualTo(OptionalInt.of(1));
        assertThat(t.register(1, digest(11))).isEqualTo(NamespaceTable.Registration.ALREADY_REGISTERED);
        assertThat(t.register(1, digest(12))).as("a bound id is taken").isEqualTo(NamespaceTable.Registration.CONFLICT);
        assertThat(t.bind(digest(12))).isEqualTo(OptionalInt.of(2));
        assertThat(t.bind(digest(13))).as("full").isEmpty();
        assertThat(t.digest(2)).contains(digest(12));
    }
}
