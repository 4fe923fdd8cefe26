package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.storage.ssd.uring.Libc;

import java.io.IOException;
import java.lang.foreign.MemorySegment;

/**
 * Moves one whole extent, header block and padded payload, with <b>one</b> positional vectored
 * system call where libc is reachable: {@code pwritev} of [header, payload] to write it,
 * {@code preadv} into [header, payload] to read it. Elsewhere (route {@link Route#TWO_CALLS})
 * it makes two positional {@link ExtentFiles} calls: payload then header to write, header then
 * payload to read.
 *
 * <p>Owns one read-write file descriptor per ring file (opened with O_DIRECT when the store
 * runs in {@link IoMode#DIRECT}), closed by {@link #close()}. The files themselves belong to
 * {@link ExtentFiles}, which created them; this class never creates, extends or truncates one.
 *
 * <p>Thread model: {@link #write} and {@link #read} are thread-safe (positional calls on shared
 * descriptors; the store's I/O workers call them concurrently for disjoint buffers).
 * {@link #close()} runs once, after the workers stopped.
 *
 * <p>Invariants: an extent occupies exactly {@code [offset, offset + 4096 + padded payload)};
 * both buffers are 4 KiB-aligned multiples of 4 KiB in DIRECT mode (checked); a short write is
 * continued until every byte is written or an error is returned; a short read is continued
 * until end of file (or, in DIRECT mode, an unaligned stop) and reported as such, never padded.
 *
 * <p>Design note: the benchmark measured the two dependent calls per extent at 0.85–0.93 of
 * fio's writes and 0.60–0.70 of fio's QD 1 reads (256 KiB and 2 MiB): the second call waits a
 * whole device round trip (~60–100 µs on the test VM) for or after 4 KiB. One vectored call
 * makes it one request and keeps zero copy (the payload goes to or from the caller's aligned
 * slot, the header to or from its own block). {@code FileChannel} has no positional vectored
 * call, hence the FFM downcall (one confined arena of 56 bytes per call, well under 1 µs).
 * Crash safety does not depend on the order of the two parts: see {@link ExtentLayout}'s
 * publication rule.
 */
final class ExtentIo implements ExtentDevice, AutoCloseable {

    private static final System.Logger LOG = System.getLogger(ExtentIo.class.getName());

    /** How extents reach and leave the files. */
    enum Route {
        /** One {@code pwritev} / {@code preadv} of [header, payload] per extent. */
        VECTORED,
        /** Two positional calls: payload then header (write), header then payload (read). */
        TWO_CALLS
    }

    private final ExtentFiles files;
    /** One read-write descriptor per ring file on the VECTORED route; empty on TWO_CALLS. */
    private final int[] fds;

    private ExtentIo(ExtentFiles files, int[] fds) {
        this.files = files;
        this.fds = fds;
    }

    /**
     * Opens a descriptor per ring file for the gathering route; falls back to
     * {@link Route#TWO_CALLS} (logged) when the platform or an open refuses.
     */
    static ExtentIo open(ExtentFiles files, Route wanted) {
        if (wanted == Route.TWO_CALLS || !Libc.supported()) return new ExtentIo(files, new int[0]);
        int[] fds = new int[files.fileCount()];
        for (int i = 0; i < fds.length; i++) {
            String path = files.directory().resolve(ExtentFiles.fileName(i)).toString();
            int fd = Libc.openReadWrite(path, files.mode() == IoMode.DIRECT);
            if (fd < 0) {
                for (int j = 0; j < i; j++) Libc.close(fds[j]);
                LOG.log(System.Logger.Level.WARNING, "SSD store {0}: open({1}) for pwritev failed (errno {2}); "
                        + "extents are written as two writes", files.directory(), path, -fd);
                return new ExtentIo(files, new int[0]);
            }
            fds[i] = fd;
        }
        return new ExtentIo(files, fds);
    }

    Route route() {
        return fds.length == 0 ? Route.TWO_CALLS : Route.VECTORED;
    }

    /**
     * Writes {@code header} (one 4 KiB block) at {@code offset} of ring file {@code file} and
     * {@code payload} (padded, block multiple) right after it.
     *
     * @throws IOException on any failure; ENOSPC carries the text {@link ExtentFiles#isNoSpace} knows
     */
    @Override
    public void write(int file, long offset, MemorySegment header, MemorySegment payload) throws IOException {
        if (header.byteSize() != ExtentLayout.HEADER_BYTES) {
            throw new IllegalArgumentException("header must be one block: " + header.byteSize());
        }
        switch (route()) {
            case TWO_CALLS -> {
                files.write(file, offset + ExtentLayout.HEADER_BYTES, payload);
                files.write(file, offset, header);
            }
            case VECTORED -> gather(file, offset, header, payload);
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

    /**
     * Reads the header block at {@code offset} of ring file {@code file} into {@code header} and
     * the padded payload after it into {@code payload}; counts are short only at end of file.
     */
    @Override
    public ReadBytes read(int file, long offset, MemorySegment header, MemorySegment payload) throws IOException {
        if (header.byteSize() != ExtentLayout.HEADER_BYTES) {
            throw new IllegalArgumentException("header must be one block: " + header.byteSize());
        }
        return switch (route()) {
            case TWO_CALLS -> {
                int h = files.read(file, offset, header);
                int p = h < header.byteSize() ? 0 : files.read(file, offset + ExtentLayout.HEADER_BYTES, payload);
                yield new ReadBytes(h, p);
            }
            case VECTORED -> scatter(file, offset, header, payload);
        };
    }

    private ReadBytes scatter(int file, long offset, MemorySegment header, MemorySegment payload) throws IOException {
        files.checkAligned(offset, header);
        files.checkAligned(offset + ExtentLayout.HEADER_BYTES, payload);
        long headerSize = header.byteSize();
        long total = headerSize + payload.byteSize();
        long done = 0;
        while (done < total) {
            long n = done < headerSize
                    ? Libc.preadv(fds[file], header.asSlice(done), payload, offset + done)
                    : Libc.preadv(fds[file], payload.asSlice(done - headerSize), MemorySegment.NULL, offset + done);
            if (n < 0) throw new IOException("preadv of " + total + " B at " + offset + " failed: errno " + (-n));
            if (n == 0) break; // end of file
            done += n;
            if (files.mode() == IoMode.DIRECT && done % ExtentLayout.BLOCK_BYTES != 0) break;
        }
        return new ReadBytes((int) Math.min(done, headerSize), (int) Math.max(0, done - headerSize));
    }

    @Override
    public void close() {
        for (int fd : fds) Libc.close(fd);
    }
}
