package io.orbitkv.core.catalog;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.core.storage.residency.ResidencyEvent;
import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** A node id is {@code [A-Za-z0-9_.-]{1,64}}, for a member and for catalog evidence alike. */
class MemberTest {

    private static final Pattern DOCUMENTED = Pattern.compile("[A-Za-z0-9_.-]{1,64}");

    @Test
    void nodeIdsAreJudgedAsTheDocumentedPatternJudgesThem() {
        List<String> ids = List.of("a", "node-1", "Z.9_x", "x".repeat(64), "", "x".repeat(65), "a b", "a/b",
                "é", "a:1", "ümlaut", "-", ".", "_", "a\n", "\u0661");
        for (String id : ids) {
            boolean legal = DOCUMENTED.matcher(id).matches();
            if (legal) {
                assertThat(Member.requireNodeId(id)).isEqualTo(id);
                assertThat(new Member(id, "h:1", 1).nodeId()).isEqualTo(id);
                assertThat(new Holder(id, 1, ResidencyEvent.Medium.DRAM, 1).nodeId()).isEqualTo(id);
            } else {
                assertThatThrownBy(() -> Member.requireNodeId(id)).as("'%s'", id).isInstanceOf(IllegalArgumentException.class);
                assertThatThrownBy(() -> new Member(id, "h:1", 1)).isInstanceOf(IllegalArgumentException.class);
                assertThatThrownBy(() -> new Holder(id, 1, ResidencyEvent.Medium.DRAM, 1)).isInstanceOf(IllegalArgumentException.class);
            }
        }
        assertThatThrownBy(() -> Member.requireNodeId(null)).isInstanceOf(NullPointerException.class);
    }
}
