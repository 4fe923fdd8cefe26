package io.orbitkv.bench.storage;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class FioTest {

    /** A terse v3 line with the given read (KiB, ms) and write (KiB, ms) totals; other fields are junk. */
    private static String terse(long readKib, long readMs, long writeKib, long writeMs) {
        String[] f = new String[130];
        Arrays.fill(f, "7");
        f[0] = "3";
        f[1] = "fio-3.33";
        f[2] = "orbitkv-baseline";
        f[5] = Long.toString(readKib);
        f[6] = "999999"; // fio's rounded bandwidth: must not be used
        f[8] = Long.toString(readMs);
        f[46] = Long.toString(writeKib);
        f[47] = "999999";
        f[49] = Long.toString(writeMs);
        return String.join(";", f);
    }

    @Test
    void readThroughputComesFromBytesAndRuntime() {
        String out = terse(2_000_000, 2000, 0, 0);
        assertThat(Fio.parseBytesPerSecond(out, Fio.Pattern.RANDREAD)).isEqualTo(2_000_000 * 1024.0 / 2.0);
    }

    @Test
    void writeThroughputReadsTheWriteFields() {
        String out = terse(0, 0, 3_000_000, 1500);
        assertThat(Fio.parseBytesPerSecond(out, Fio.Pattern.WRITE)).isEqualTo(3_000_000 * 1024.0 / 1.5);
    }

    @Test
    void warningLinesAreSkippedAndNoResultIsNaN() {
        String out = "note: both iodepth >= 1 and synchronous I/O engine are selected\n" + terse(1024, 1000, 0, 0);
        assertThat(Fio.parseBytesPerSecond(out, Fio.Pattern.RANDREAD)).isEqualTo(1024 * 1024.0);
        assertThat(Fio.parseBytesPerSecond("fio: engine io_uring not loadable", Fio.Pattern.RANDREAD)).isNaN();
        assertThat(Fio.parseBytesPerSecond(terse(1024, 0, 0, 0), Fio.Pattern.RANDREAD)).isNaN();
    }

    @Test
    void depthIsJobsForPsyncAndIodepthForAsyncEngines() {
        Fio.Job job = new Fio.Job(Path.of("/x/extents-0000.dat"), 0, 266240 * 10, 266240, 16, Fio.Pattern.RANDREAD, 2);
        assertThat(Fio.command(job, Fio.Engine.PSYNC))
                .contains("--numjobs=16", "--iodepth=1", "--ioengine=psync", "--direct=1", "--bs=266240",
                        "--size=2662400", "--offset=0", "--rw=randread", "--filename=/x/extents-0000.dat");
        assertThat(Fio.command(job, Fio.Engine.IO_URING)).contains("--numjobs=1", "--iodepth=16", "--ioengine=io_uring");
        assertThat(Fio.command(job, Fio.Engine.LIBAIO)).contains("--numjobs=1", "--iodepth=16", "--ioengine=libaio");
    }

    @Test
    void jobsRefuseUnalignedBlocksAndOffsets() {
        Path f = Path.of("/x");
        assertThatThrownBy(() -> new Fio.Job(f, 0, 1 << 20, 1000, 1, Fio.Pattern.WRITE, 1))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Fio.Job(f, 512, 1 << 20, 4096, 1, Fio.Pattern.WRITE, 1))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Fio.Job(f, 0, 4096, 8192, 1, Fio.Pattern.WRITE, 1))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
