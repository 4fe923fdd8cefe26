package io.orbitkv.core.storage.ssd;

import io.orbitkv.testkit.Environment;

import io.orbitkv.core.storage.ssd.uring.Libc;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Both routes put the exact extent bytes at the exact place and read them back in one call
 * (short only at end of file), and the single-write
 * publication rule holds: any torn mix of an extent's header block and payload blocks is
 * dropped by recovery, never kept.
 */
class ExtentIoTest {

    private static final int PAYLOAD = 20_000; // 5 blocks padded, the last one partly padding

    @TempDir
    Path dir;

    @Test
    void aStoreOnLinuxMovesEachExtentWithOneVectoredCall() throws Exception {
        Environment.require(Libc.supported(), "libc downcalls (Linux x86_64/aarch64), for the pwritev route");
        try (SsdTestSupport s = SsdTestSupport.openRecovered(SsdTestSupport.smallConfig(dir, 2, 256))) {
            assertThat(s.store.extentIoRoute()).isEqualTo(ExtentIo.Route.VECTORED);
            s.writeCommitted(1, PAYLOAD);
            assertThat(s.readAndCheck(1, PAYLOAD)).isInstanceOf(ReadResult.Served.class);
        }
    }

    @ParameterizedTest
    @EnumSource(ExtentIo.Route.class)
    void writesHeaderThenPayloadBytesAtTheOffsetAndRecoveryKeepsThem(ExtentIo.Route route) throws Exception {
        SsdConfig config = SsdTestSupport.smallConfig(dir, 1, 256);
        Extent first = extent(1, 0, 1);
        Extent second = extent(2, first.endOffset(), 2);
        MemorySegment p1 = SsdTestSupport.payload(1, PAYLOAD);
        MemorySegment p2 = SsdTestSupport.payload(2, PAYLOAD);
        try (ExtentFiles files = ExtentFiles.open(config); ExtentIo writer = ExtentIo.open(files, route);
             Arena arena = Arena.ofConfined()) {
            Environment.require(route == ExtentIo.Route.TWO_CALLS || writer.route() == route, "pwritev in this libc");
            write(writer, arena, first, p1);
            write(writer, arena, second, p2);

            byte[] header = SsdTestSupport.readRaw(dir, 0, second.offset, ExtentLayout.HEADER_BYTES);
            assertThat(header).isEqualTo(encoded(arena, second).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
            byte[] payload = SsdTestSupport.readRaw(dir, 0, second.offset + ExtentLayout.HEADER_BYTES, PAYLOAD);
            assertThat(payload).isEqualTo(p2.asSlice(0, PAYLOAD).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));

            ScanResult scan = ExtentScanner.scan(files, config);
            assertThat(scan.live()).extracting(e -> e.key, e -> e.generation, e -> e.offset)
                    .containsExactlyInAnyOrder(
                            org.assertj.core.groups.Tuple.tuple(first.key, 1L, 0L),
                            org.assertj.core.groups.Tuple.tuple(second.key, 2L, first.endOffset()));
            assertThat(scan.report().dropped().values()).allMatch(n -> n == 0);
        }
    }

    @ParameterizedTest
    @EnumSource(ExtentIo.Route.class)
    void readsHeaderAndPayloadBackAndReportsAShortTailAtEndOfFile(ExtentIo.Route route) throws Exception {
        SsdConfig config = SsdTestSupport.smallConfig(dir, 1, 256);
        Extent e = extent(3, 0, 7);
        MemorySegment p = SsdTestSupport.payload(3, PAYLOAD);
        long padded = ExtentLayout.paddedPayloadBytes(PAYLOAD);
        try (ExtentFiles files = ExtentFiles.open(config); ExtentIo io = ExtentIo.open(files, route);
             Arena arena = Arena.ofConfined()) {
            Environment.require(route == ExtentIo.Route.TWO_CALLS || io.route() == route, "preadv in this libc");
            write(io, arena, e, p);
            MemorySegment header = arena.allocate(ExtentLayout.HEADER_BYTES, ExtentLayout.BLOCK_BYTES);
            MemorySegment payload = arena.allocate(padded, ExtentLayout.BLOCK_BYTES);

            ExtentIo.ReadBytes whole = io.read(0, 0, header, payload);
            assertThat(whole).isEqualTo(new ExtentIo.ReadBytes(ExtentLayout.HEADER_BYTES, (int) padded));
            assertThat(ExtentVerifier.header(header, whole.headerBytes(), e, config.maxPayloadBytes())).isEmpty();
            assertThat(ExtentVerifier.payload(payload, whole.payloadBytes(), e)).isEmpty();

            SsdTestSupport.truncate(dir, 0, ExtentLayout.HEADER_BYTES + 2L * ExtentLayout.BLOCK_BYTES);
            payload.fill((byte) 0);
            ExtentIo.ReadBytes cut = io.read(0, 0, header, payload);
            assertThat(cut).isEqualTo(new ExtentIo.ReadBytes(ExtentLayout.HEADER_BYTES, 2 * ExtentLayout.BLOCK_BYTES));
            assertThat(ExtentVerifier.payload(payload, cut.payloadBytes(), e)).contains(ExtentDamage.TRUNCATED);

            SsdTestSupport.truncate(dir, 0, 0);
            assertThat(io.read(0, 0, header, payload)).isEqualTo(new ExtentIo.ReadBytes(0, 0));
        }
    }

    @Test
    void aNewHeaderOverAnOldPayloadTailIsDropped() throws Exception {
        SsdConfig config = SsdTestSupport.smallConfig(dir, 1, 256);
        Extent old = extent(1, 0, 1);
        Extent fresh = extent(2, 0, 2);
        try (ExtentFiles files = ExtentFiles.open(config);
             ExtentIo writer = ExtentIo.open(files, ExtentIo.Route.VECTORED);
             Arena arena = Arena.ofConfined()) {
            write(writer, arena, old, SsdTestSupport.payload(1, PAYLOAD));
            long lastBlock = ExtentLayout.HEADER_BYTES + ExtentLayout.paddedPayloadBytes(PAYLOAD) - ExtentLayout.BLOCK_BYTES;
            byte[] oldTail = SsdTestSupport.readRaw(dir, 0, lastBlock, ExtentLayout.BLOCK_BYTES);
            write(writer, arena, fresh, SsdTestSupport.payload(2, PAYLOAD));
            // the crash persisted every block of the new write except the payload's last one
            SsdTestSupport.writeRaw(dir, 0, lastBlock, oldTail);

            RecoveryReport report = ExtentScanner.scan(files, config).report();
            assertThat(ExtentScanner.scan(files, config).live()).isEmpty();
            assertThat(report.dropped(ExtentDamage.BAD_PAYLOAD_CRC)).isEqualTo(1);
        }
    }

    @Test
    void anOldHeaderOverANewPayloadIsDropped() throws Exception {
        SsdConfig config = SsdTestSupport.smallConfig(dir, 1, 256);
        Extent old = extent(1, 0, 1);
        Extent fresh = extent(2, 0, 2);
        try (ExtentFiles files = ExtentFiles.open(config);
             ExtentIo writer = ExtentIo.open(files, ExtentIo.Route.VECTORED);
             Arena arena = Arena.ofConfined()) {
            write(writer, arena, old, SsdTestSupport.payload(1, PAYLOAD));
            byte[] oldHeader = SsdTestSupport.readRaw(dir, 0, 0, ExtentLayout.HEADER_BYTES);
            write(writer, arena, fresh, SsdTestSupport.payload(2, PAYLOAD));
            // the crash persisted the new payload but not the new header block
            SsdTestSupport.writeRaw(dir, 0, 0, oldHeader);

            ScanResult scan = ExtentScanner.scan(files, config);
            assertThat(scan.live()).isEmpty();
            assertThat(scan.report().dropped(ExtentDamage.BAD_PAYLOAD_CRC)).isEqualTo(1);
            assertThat(Arrays.stream(ExtentDamage.values()).mapToInt(d -> scan.report().dropped(d)).sum()).isEqualTo(1);
        }
    }

    private static Extent extent(int keyIndex, long offset, long generation) {
        MemorySegment p = SsdTestSupport.payload(keyIndex, PAYLOAD);
        return new Extent(SsdTestSupport.NS, SsdTestSupport.key(keyIndex), 0, offset, PAYLOAD,
                ExtentLayout.crc32c(p, PAYLOAD), generation, 0);
    }

    private static MemorySegment encoded(Arena arena, Extent e) {
        MemorySegment block = arena.allocate(ExtentLayout.HEADER_BYTES, ExtentLayout.BLOCK_BYTES);
        ExtentLayout.encodeHeader(block, e.header());
        return block;
    }

    private static void write(ExtentIo writer, Arena arena, Extent e, MemorySegment payload) throws Exception {
        writer.write(e.file, e.offset, encoded(arena, e),
                payload.asSlice(0, ExtentLayout.paddedPayloadBytes(e.payloadBytes)));
    }
}
