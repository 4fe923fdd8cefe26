package io.orbitkv.core.peer;

import org.junit.jupiter.api.Test;

import java.util.OptionalInt;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class SentChecksumsTest {

    @Test
    void anImageSentOnceAnswersItsChecksumAndAnotherImageNone() {
        SentChecksums c = new SentChecksums();
        assertThat(c.get(41)).isEmpty();
        c.put(41, 0xCAFE_F00D);
        assertThat(c.get(41)).isEqualTo(OptionalInt.of(0xCAFE_F00D));
        assertThat(c.get(42)).as("image ids are never reused: another id is another image").isEmpty();
    }

    @Test
    void theTableStaysWithinItsBound() {
        SentChecksums c = new SentChecksums(64);
        for (long image = 1; image <= 10_000; image++) c.put(image, (int) image);
        assertThat(c.size()).isLessThanOrEqualTo(64);
        long remembered = 0;
        for (long image = 1; image <= 10_000; image++) {
            OptionalInt crc = c.get(image);
            if (crc.isPresent()) {
                assertThat(crc.getAsInt()).as("a remembered entry is its own image's").isEqualTo((int) image);
                remembered++;
            }
        }
        assertThat(remembered).isBetween(1L, 64L);
    }

    @Test
    void aTableOfNoEntriesIsRefused() {
        assertThatThrownBy(() -> new SentChecksums(0)).isInstanceOf(IllegalArgumentException.class);
    }
}
