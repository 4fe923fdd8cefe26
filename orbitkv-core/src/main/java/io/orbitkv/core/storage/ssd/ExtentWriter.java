package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.storage.ssd.uring.Libc;

import java.io.IOException;
import java.lang.foreign.MemorySegment;

/**
 * Puts one extent on disk: its header block and its padded payload, as <b>one</b> positional
 * gathering write ({@code pwritev} of [header, payload] at the extent's offset) where libc is
 * reachable, else as two positional {@link ExtentFiles} writes (payload, then header).
 *
 * <p>Owns one read-write file descriptor per ring file (opened with O_DIRECT when the store
 * runs in {@link IoMode#DIRECT}), closed by {@link #close()}. The files themselves belong to
 * {@link ExtentFiles}, which created them; this class never creates, extends or truncates one.
 *
 * <p>Thread model: {@link #write} is thread-safe (positional writes on shared descriptors; the
 * store's I/O workers call it concurrently for disjoint extents). {@link #close()} runs once,
 * after the workers stopped.
 *
 * <p>Invariants: a write covers exactly {@code [offset, offset + 4096 + padded payload)}; both
 * buffers are 4 KiB-aligned multiples of 4 KiB in DIRECT mode (checked); a short write is
 * continued from where it stopped until every byte is written or an error is returned.
 *
 * <p>Design note: the benchmark measured the two dependent writes (payload, then header) at
 * 0.85–0.93 of fio's single write per block (256 KiB and 2 MiB, QD 1 and 16): the second write
 * waits a whole device round trip (~60–100 µs on the test VM) for 4 KiB. One {@code pwritev}
 * makes it one request, and keeps the zero-copy property (the payload goes from the caller's
 * aligned slot, the header from its own block). {@code FileChannel} has no positional gathering
 * write, hence the FFM downcall (one confined arena of 56 bytes per call, well under 1 µs).
 * Crash safety does not depend on the order of the two parts: see {@link ExtentLayout}'s
 * publication rule.
 */
final class ExtentWriter implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(ExtentWriter.class.getName());

    /** How extents reach the files. */
    enum Route {
        /** One {@code pwritev} of [header, payload] per extent. */
        GATHERING,
        /** Two positional writes: payload, then header. */
        TWO_WRITES
    }

    private final ExtentFiles files;
    /** One read-write descriptor per ring file on the GATHERING route; empty on TWO_WRITES. */
    private final int[] fds;

    private ExtentWriter(ExtentFiles files, int[] fds) {
        this.files = files;
        this.fds = fds;
    }

    /**
     * Opens a descriptor per ring file for the gathering route; falls back to
     * {@link Route#TWO_WRITES} (logged) when the platform or an open refuses.
     */
    static ExtentWriter open(ExtentFiles files, Route wanted) {
        if (wanted == Route.TWO_WRITES || !Libc.supported()) return new ExtentWriter(files, new int[0]);
        int[] fds = new int[files.fileCount()];
        for (int i = 0; i < fds.length; i++) {
            String path = files.directory().resolve(ExtentFiles.fileName(i)).toString();
            int fd = Libc.openReadWrite(path, files.mode() == IoMode.DIRECT);
            if (fd < 0) {
                for (int j = 0; j < i; j++) Libc.close(fds[j]);
                LOG.log(System.Logger.Level.WARNING, "SSD store {0}: open({1}) for pwritev failed (errno {2}); "
                        + "extents are written as two writes", files.directory(), path, -fd);
                return new ExtentWriter(files, new int[0]);
            }
            fds[i] = fd;
        }
        return new ExtentWriter(files, fds);
    }

    Route route() {
        return fds.length == 0 ? Route.TWO_WRITES : Route.GATHERING;
    }

    /**
     * Writes {@code header} (one 4 KiB block) at {@code offset} of ring file {@code file} and
     * {@code payload} (padded, block multiple) right after it.
     *
     * @throws IOException on any failure; ENOSPC carries the text {@link ExtentFiles#isNoSpace} knows
     */
    void write(int file, long offset, MemorySegment header, MemorySegment payload) throws IOException {
        if (header.byteSize() != ExtentLayout.HEADER_BYTES) {
            throw new IllegalArgumentException("header must be one block: " + header.byteSize());
        }
        switch (route()) {
            case TWO_WRITES -> {
                files.write(file, offset + ExtentLayout.HEADER_BYTES, payload);
                files.write(file, offset, header);
            }
            case GATHERING -> gather(file, offset, header, payload);
        }
    }

    private void gather(int file, long offset, MemorySegment header, MemorySegment payload) throws IOException {
        files.checkAligned(offset, header);
        files.checkAligned(offset + ExtentLayout.HEADER_BYTES, payload);
        long total = header.byteSize() + payload.byteSize();
        long done = 0;
        while (done < total) {
            long n = done < header.byteSize()
                    ? Libc.pwritev(fds[file], header.asSlice(done), payload, offset + done)
                    : Libc.pwritev(fds[file], payload.asSlice(done - header.byteSize()), MemorySegment.NULL,
                            offset + done);
            if (n == -Libc.ENOSPC) throw new IOException("pwritev: No space left on device");
            if (n < 0) throw new IOException("pwritev of " + total + " B at " + offset + " failed: errno " + (-n));
            if (n == 0) throw new IOException("pwritev wrote nothing at " + (offset + done));
            done += n;
        }
    }

    @Override
    public void close() {
        for (int fd : fds) Libc.close(fd);
    }
}
