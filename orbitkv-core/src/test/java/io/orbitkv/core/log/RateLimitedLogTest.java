package io.orbitkv.core.log;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** One line per kind per window; the next line says how many were suppressed. */
class RateLimitedLogTest {

    static final long S = 1_000_000_000L;

    @Test
    void repeatsWithinTheWindowAreCountedAndReportedWithTheNextLine() {
        RateLimitedLog log = new RateLimitedLog(System.getLogger("test"), S * 10);
        assertThat(log.log(System.Logger.Level.INFO, "a", "first", 0)).isEqualTo("first");
        assertThat(log.log(System.Logger.Level.INFO, "a", "again", S * 5)).isNull();
        assertThat(log.log(System.Logger.Level.INFO, "a", "again", S * 10 - 1)).isNull();
        assertThat(log.log(System.Logger.Level.INFO, "b", "other kind", S * 10 - 1)).isEqualTo("other kind");
        assertThat(log.log(System.Logger.Level.INFO, "a", "later", S * 10)).isEqualTo("later (2 more like this in the last 10 s)");
        assertThat(log.log(System.Logger.Level.INFO, "a", "quiet", S * 30)).isEqualTo("quiet");
    }
}
