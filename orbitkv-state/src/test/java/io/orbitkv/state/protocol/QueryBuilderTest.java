package io.orbitkv.state.protocol;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

/** {@link Request.Query.Builder}: defaults, fields by name, and the record's refusals. */
class QueryBuilderTest {

    private static final Hashes TWO_PAGES = Hashes.of(List.of(new byte[32], new byte[32]));

    @Test
    void defaultsAreTheShortConstructorsAndEveryFieldIsSetByName() {
        Request.Query plain = Request.Query.builder(1, 33).group(0, KeyForm.BLOCK_HASH, TWO_PAGES).build();
        assertThat(plain).isEqualTo(new Request.Query(1, 0, CompletionTarget.HOST_READY, 33, 0,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, TWO_PAGES))));
        Request.Query full = Request.Query.builder(7, 40).revision(2).target(CompletionTarget.ENGINE_RESTORE)
                .originTokens(16).prefillTokensPerSecond(9000).peerWaitMillis(250)
                .group(0, KeyForm.BLOCK_HASH, TWO_PAGES).group(1, KeyForm.STATE_KEY, TWO_PAGES).build();
        assertThat(full).isEqualTo(new Request.Query(7, 2, CompletionTarget.ENGINE_RESTORE, 40, 16, 9000, 250,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, TWO_PAGES),
                        new Request.QueryGroup(1, KeyForm.STATE_KEY, TWO_PAGES))));
    }

    @Test
    void aQueryWithoutGroupsOrBreakingAnInvariantIsRefused() {
        assertThatThrownBy(() -> Request.Query.builder(1, 33).build())
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at least one group");
        assertThatThrownBy(() -> Request.Query.builder(1, 33).originTokens(33).group(0, KeyForm.BLOCK_HASH, TWO_PAGES).build())
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("must be below prompt_tokens");
        assertThatThrownBy(() -> Request.Query.builder(0, 33).group(0, KeyForm.BLOCK_HASH, TWO_PAGES).build())
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("operation_id");
        assertThatThrownBy(() -> Request.Query.builder(1, 33).group(0, KeyForm.BLOCK_HASH, TWO_PAGES)
                .group(0, KeyForm.BLOCK_HASH, TWO_PAGES).build()).isInstanceOf(IllegalArgumentException.class);
    }
}
