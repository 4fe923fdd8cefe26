package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.storage.residency.ResidencyEvent;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Map;

import static io.orbitkv.core.storage.ssd.SsdTestSupport.NS;
import static io.orbitkv.core.storage.ssd.SsdTestSupport.key;
import static io.orbitkv.core.storage.ssd.SsdTestSupport.payload;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Crash tests: damage the files the way a crash or a bad device would, reopen, and check that
 * exactly the intact extents come back and nothing damaged is ever served.
 */
class SsdRecoveryTest {

    private static final int PAYLOAD = 10_000; // footprint 16 KiB: extent k sits at offset k * 16 KiB of file 0
    private static final long EXTENT = 16 * 1024;

    @TempDir
    Path dir;

    private SsdConfig config() {
        return SsdTestSupport.smallConfig(dir, 2, 256);
    }

    private void writeSix() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(config())) {
            for (int k = 0; k < 6; k++) assertThat(s.writeCommitted(k, PAYLOAD)).isEqualTo(k + 1);
        }
    }

    @Test
    void cleanRestartKeepsEverythingAndResumesAfterTheNewest() throws Exception {
        writeSix();
        try (SsdTestSupport s = SsdTestSupport.open(config())) {
            RecoveryReport r = s.store.recover();
            assertThat(r.extentsKept()).isEqualTo(6);
            assertThat(r.droppedTotal()).isZero();
            assertThat(r.payloadBytesKept()).isEqualTo(6L * PAYLOAD);
            assertThat(r.footprintBytesKept()).isEqualTo(6 * EXTENT);
            assertThat(r.maxGeneration()).isEqualTo(6);
            assertThat(r.resumeFile()).isZero();
            assertThat(r.resumeOffset()).isEqualTo(6 * EXTENT);
            for (int k = 0; k < 6; k++) assertThat(s.readAndCheck(k, PAYLOAD)).isInstanceOf(ReadResult.Served.class);
            assertThat(s.events(ResidencyEvent.Kind.ADDED)).hasSize(6);
            assertThat(s.gauge("orbitkv.ssd.used")).isEqualTo(6 * EXTENT);
            assertThat(s.writeCommitted(6, PAYLOAD)).isEqualTo(7); // generations continue
        }
        try (SsdTestSupport s = SsdTestSupport.open(config())) {
            RecoveryReport r = s.store.recover();
            assertThat(r.extentsKept()).isEqualTo(7);
            assertThat(r.resumeOffset()).isEqualTo(7 * EXTENT); // the 7th went where the head resumed
        }
    }

    @Test
    void flippedPayloadFlippedHeaderAndTruncatedTailAreDroppedAndCountedByReason() throws Exception {
        writeSix();
        SsdTestSupport.flipByte(dir, 0, 2 * EXTENT + ExtentLayout.HEADER_BYTES + 1234);        // key 2 payload
        SsdTestSupport.flipByte(dir, 0, 3 * EXTENT + ExtentLayout.OFF_GENERATION);            // key 3 header field
        SsdTestSupport.truncate(dir, 0, 5 * EXTENT + ExtentLayout.HEADER_BYTES + PAYLOAD / 2); // key 5 half gone
        try (SsdTestSupport s = SsdTestSupport.open(config())) {
            RecoveryReport r = s.store.recover();
            assertThat(r.extentsKept()).isEqualTo(3);
            assertThat(r.dropped()).isEqualTo(Map.of(
                    ExtentDamage.BAD_PAYLOAD_CRC, 1, ExtentDamage.BAD_HEADER_CRC, 1, ExtentDamage.TRUNCATED, 1));
            assertThat(r.maxGeneration()).isEqualTo(6); // key 5's header is intact even though its payload is not
            assertThat(r.resumeOffset()).isEqualTo(5 * EXTENT); // after key 4, the newest kept
            for (int k : new int[] {0, 1, 4}) assertThat(s.readAndCheck(k, PAYLOAD)).isInstanceOf(ReadResult.Served.class);
            for (int k : new int[] {2, 3, 5}) assertThat(s.store.pin(key(k), SsdTestSupport.NS)).isInstanceOf(PinResult.Miss.class);
            assertThat(s.counter("orbitkv.ssd.corrupt.dropped")).isEqualTo(3);
            assertThat(s.writeCommitted(9, PAYLOAD)).isEqualTo(7);
            // the truncated file was extended again before the write: the new extent is readable
            assertThat(s.readAndCheck(9, PAYLOAD)).isInstanceOf(ReadResult.Served.class);
        }
    }

    @Test
    void aHalfWrittenExtentIsDroppedAndItsGenerationIsNotReused() throws Exception {
        writeSix();
        // A header announcing a full payload, followed by only half of it (the rest of the block range still zero).
        MemorySegment full = payload(42, PAYLOAD);
        byte[] header = new byte[ExtentLayout.HEADER_BYTES];
        ExtentLayout.encodeHeader(MemorySegment.ofArray(header),
                new ExtentHeader(NS, key(42), 7, PAYLOAD, ExtentLayout.crc32c(full, PAYLOAD)));
        byte[] half = full.asSlice(0, PAYLOAD / 2).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        SsdTestSupport.writeRaw(dir, 0, 6 * EXTENT, header);
        SsdTestSupport.writeRaw(dir, 0, 6 * EXTENT + ExtentLayout.HEADER_BYTES, half);
        try (SsdTestSupport s = SsdTestSupport.open(config())) {
            RecoveryReport r = s.store.recover();
            assertThat(r.extentsKept()).isEqualTo(6);
            assertThat(r.dropped()).isEqualTo(Map.of(ExtentDamage.BAD_PAYLOAD_CRC, 1));
            assertThat(r.maxGeneration()).isEqualTo(7);
            assertThat(r.resumeOffset()).isEqualTo(6 * EXTENT);
            assertThat(s.store.pin(key(42), SsdTestSupport.NS)).isInstanceOf(PinResult.Miss.class);
            assertThat(s.writeCommitted(6, PAYLOAD)).isEqualTo(8);
        }
    }

    @Test
    void aFlippedMagicIsNotAnExtentAtAll() throws Exception {
        writeSix();
        SsdTestSupport.flipByte(dir, 0, EXTENT); // first magic byte of key 1
        try (SsdTestSupport s = SsdTestSupport.open(config())) {
            RecoveryReport r = s.store.recover();
            assertThat(r.extentsKept()).isEqualTo(5);
            assertThat(r.droppedTotal()).isZero();
            assertThat(s.store.pin(key(1), SsdTestSupport.NS)).isInstanceOf(PinResult.Miss.class);
        }
    }

    @Test
    void theHigherGenerationOfADuplicatedKeyWins() throws Exception {
        writeSix();
        try (SsdTestSupport s = SsdTestSupport.openRecovered(config())) {
            assertThat(s.writeCommitted(2, PAYLOAD)).isEqualTo(7);
        }
        try (SsdTestSupport s = SsdTestSupport.open(config())) {
            RecoveryReport r = s.store.recover();
            assertThat(r.extentsKept()).isEqualTo(6);
            assertThat(r.extentsSuperseded()).isEqualTo(1);
            assertThat(((Pin) s.store.pin(key(2), SsdTestSupport.NS)).generation()).isEqualTo(7);
            assertThat(s.events(ResidencyEvent.Kind.ADDED)).hasSize(6);
        }
    }

    @Test
    void aWrappedRingRecoversOnlyTheSurvivorsAndResumesAtTheNewest() throws Exception {
        SsdConfig config = SsdTestSupport.smallConfig(dir, 2, 256);
        try (SsdTestSupport s = SsdTestSupport.openRecovered(config)) {
            for (int k = 0; k < 12; k++) s.writeCommitted(k, 60_000); // 8 slots: keys 0..3 overwritten
        }
        try (SsdTestSupport s = SsdTestSupport.open(config)) {
            RecoveryReport r = s.store.recover();
            assertThat(r.extentsKept()).isEqualTo(8);
            assertThat(r.droppedTotal()).isZero();
            assertThat(r.maxGeneration()).isEqualTo(12);
            assertThat(r.resumeFile()).isZero();
            assertThat(r.resumeOffset()).isEqualTo(4 * 64 * 1024);
            for (int k = 0; k < 4; k++) assertThat(s.store.contains(key(k))).isFalse();
            for (int k = 4; k < 12; k++) assertThat(s.readAndCheck(k, 60_000)).isInstanceOf(ReadResult.Served.class);
            s.writeCommitted(12, 60_000); // overwrites key 4, the oldest
            assertThat(s.store.contains(key(4))).isFalse();
        }
    }

    @Test
    void corruptionFoundByAPinnedReadDropsTheExtentOnce() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(config())) {
            s.writeCommitted(0, PAYLOAD);
            s.writeCommitted(1, PAYLOAD);
            Pin p0 = (Pin) s.store.pin(key(0), SsdTestSupport.NS);
            Pin p1 = (Pin) s.store.pin(key(1), SsdTestSupport.NS);
            SsdTestSupport.flipByte(dir, 0, ExtentLayout.HEADER_BYTES + 17);
            MemorySegment dst = SsdTestSupport.SHARED.allocate(p0.paddedPayloadBytes(), 4096);
            assertThat(s.store.read(p0, dst).join()).isEqualTo(new ReadResult.Corrupt(ExtentDamage.BAD_PAYLOAD_CRC));
            assertThat(s.store.read(p0, dst).join()).isEqualTo(new ReadResult.Corrupt(ExtentDamage.BAD_PAYLOAD_CRC));
            assertThat(s.store.contains(key(0))).isFalse();
            assertThat(s.counter("orbitkv.ssd.corrupt.dropped", "damage", "bad_payload_crc")).isEqualTo(1);

            // another valid extent copied over key 1's place: intact CRCs, wrong identity
            byte[] other = SsdTestSupport.readRaw(dir, 0, 0, (int) EXTENT);
            ExtentLayout.encodeHeader(MemorySegment.ofArray(other),
                    new ExtentHeader(NS, key(0), 99, PAYLOAD, ExtentLayout.crc32c(payload(0, PAYLOAD), PAYLOAD)));
            MemorySegment.copy(payload(0, PAYLOAD), 0, MemorySegment.ofArray(other), ExtentLayout.HEADER_BYTES, PAYLOAD);
            SsdTestSupport.writeRaw(dir, 0, EXTENT, other);
            assertThat(s.store.read(p1, dst).join()).isEqualTo(new ReadResult.Corrupt(ExtentDamage.IDENTITY_MISMATCH));
            assertThat(s.store.contains(key(1))).isFalse();
            assertThat(s.events(ResidencyEvent.Kind.REMOVED)).extracting(ResidencyEvent::key)
                    .containsExactly(key(0), key(1));
        }
    }
}
