package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.fd.OwnerOnly;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Owns the ring's files: their channels, the I/O mode chosen for them, and the positional
 * read/write/zero-fill primitives every other class goes through.
 *
 * <p>Thread model: channels are shared; positional {@code read}/{@code write} on a
 * {@link FileChannel} are safe from many threads at once. Which thread may touch which byte
 * range is decided by the owners above (the ring reserves ranges, pins protect them); this class
 * keeps no mutable state after {@link #open}.
 *
 * <p>Invariants: {@code channels.length == fileCount}; in {@link IoMode#DIRECT} every buffer
 * passed in is 4 KiB aligned, and every offset and length a multiple of 4096 (checked here,
 * since the kernel answers a violation with a bare EINVAL).
 *
 * <p>Design note: the O_DIRECT decision is made by opening the first file with
 * {@code ExtendedOpenOption.DIRECT} and watching it fail, not by reading the filesystem type:
 * support is per filesystem and per kernel (tmpfs accepts O_DIRECT since Linux 6.6, ramfs and
 * many FUSE filesystems still refuse it), and the open is the only authoritative answer.
 * Preallocation writes zeros (no {@code fallocate} from Java without reaching the file
 * descriptor): at 1–2 GB/s that is 30–60 ms per 64 MiB file, paid once, and it makes the space
 * real so ENOSPC surfaces at preallocation, not halfway through an extent.
 */
final class ExtentFiles implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(ExtentFiles.class.getName());

    private final Path directory;
    private final long fileSizeBytes;
    private final IoMode mode;
    private final FileChannel[] channels;

    private ExtentFiles(Path directory, long fileSizeBytes, IoMode mode, FileChannel[] channels) {
        this.directory = directory;
        this.fileSizeBytes = fileSizeBytes;
        this.mode = mode;
        this.channels = channels;
    }

    /** File name of ring file {@code index}. */
    static String fileName(int index) {
        return String.format(Locale.ROOT, "extents-%04d.dat", index);
    }

    /**
     * Opens (creating if missing, never truncating) the ring files in the configured directory
     * and chooses the I/O mode. Fails when O_DIRECT is refused and fallback is not allowed.
     */
    static ExtentFiles open(SsdConfig config) throws IOException {
        OwnerOnly.createDirectories(config.directory());
        IoMode mode = chooseMode(config);
        List<FileChannel> opened = new ArrayList<>();
        try {
            for (int i = 0; i < config.fileCount(); i++) {
                opened.add(OwnerOnly.open(config.directory().resolve(fileName(i)), options(mode)));
            }
        } catch (IOException | RuntimeException e) {
            for (FileChannel ch : opened) closeQuietly(ch);
            throw e;
        }
        return new ExtentFiles(config.directory(), config.fileSizeBytes(), mode, opened.toArray(FileChannel[]::new));
    }

    @SuppressWarnings("try") // the probe channel is opened only to see O_DIRECT accepted
    private static IoMode chooseMode(SsdConfig config) throws IOException {
        Path first = config.directory().resolve(fileName(0));
        try (FileChannel ignored = OwnerOnly.open(first, options(IoMode.DIRECT))) {
            long blockSize = Files.getFileStore(first).getBlockSize();
            if (ExtentLayout.BLOCK_BYTES % blockSize != 0) {
                throw new IOException("filesystem block size " + blockSize + " does not divide 4096 at " + first);
            }
            LOG.log(System.Logger.Level.INFO, "SSD store {0}: O_DIRECT I/O", config.directory());
            return IoMode.DIRECT;
        } catch (IOException | UnsupportedOperationException e) {
            if (!config.allowBufferedFallback()) {
                throw new IOException("SSD store " + config.directory() + ": the filesystem refuses O_DIRECT ("
                        + e.getMessage() + ") and allowBufferedFallback is false", e);
            }
            LOG.log(System.Logger.Level.WARNING,
                    "SSD store {0}: O_DIRECT refused ({1}); using buffered I/O as configured",
                    config.directory(), e.getMessage());
            return IoMode.BUFFERED;
        }
    }

    /**
     * {@code com.sun.nio.file.ExtendedOpenOption.DIRECT}, looked up by name: the type lives in
     * {@code jdk.unsupported}, and javac's "internal proprietary API" warning on a direct reference
     * cannot be suppressed in a build that compiles with {@code -Werror}.
     */
    static final OpenOption DIRECT = directOption();

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static OpenOption directOption() {
        try {
            Class<? extends Enum> type = (Class<? extends Enum>) Class.forName("com.sun.nio.file.ExtendedOpenOption");
            return (OpenOption) Enum.valueOf(type, "DIRECT");
        } catch (ClassNotFoundException e) {
            throw new ExceptionInInitializerError("this JDK has no jdk.unsupported module: " + e);
        }
    }

    private static OpenOption[] options(IoMode mode) {
        return switch (mode) {
            case DIRECT -> new OpenOption[] {StandardOpenOption.CREATE, StandardOpenOption.READ,
                    StandardOpenOption.WRITE, DIRECT};
            case BUFFERED -> new OpenOption[] {StandardOpenOption.CREATE, StandardOpenOption.READ,
                    StandardOpenOption.WRITE};
        };
    }

    IoMode mode() {
        return mode;
    }

    int fileCount() {
        return channels.length;
    }

    long fileSizeBytes() {
        return fileSizeBytes;
    }

    Path directory() {
        return directory;
    }

    /** Current length of file {@code file} in bytes (shorter than configured until preallocated). */
    long currentSize(int file) throws IOException {
        return channels[file].size();
    }

    /**
     * Reads up to {@code buffer.byteSize()} bytes at {@code position}; returns the bytes read,
     * fewer only at end of file.
     */
    int read(int file, long position, MemorySegment buffer) throws IOException {
        checkAligned(position, buffer);
        ByteBuffer bb = buffer.asByteBuffer();
        FileChannel ch = channels[file];
        while (bb.hasRemaining()) {
            int n = ch.read(bb, position + bb.position());
            // A short read ends at end of file; in DIRECT mode the next position would be unaligned.
            if (n <= 0 || (mode == IoMode.DIRECT && bb.position() % ExtentLayout.BLOCK_BYTES != 0)) break;
        }
        return bb.position();
    }

    /** Writes all of {@code buffer} at {@code position}. */
    void write(int file, long position, MemorySegment buffer) throws IOException {
        checkAligned(position, buffer);
        ByteBuffer bb = buffer.asByteBuffer();
        FileChannel ch = channels[file];
        while (bb.hasRemaining()) {
            ch.write(bb, position + bb.position());
        }
    }

    /**
     * Extends file {@code file} to the configured size by writing zeros from its current end,
     * using {@code zeros} (an aligned, zero-filled buffer). On ENOSPC the file is cut back to
     * its previous length, releasing what was written, and {@code false} is returned.
     */
    boolean preallocate(int file, MemorySegment zeros) throws IOException {
        FileChannel ch = channels[file];
        long before = ch.size();
        long start = ExtentLayout.roundUpToBlock(before);
        try {
            for (long pos = start; pos < fileSizeBytes; pos += zeros.byteSize()) {
                long chunk = Math.min(zeros.byteSize(), fileSizeBytes - pos);
                write(file, pos, zeros.asSlice(0, chunk));
            }
            return true;
        } catch (IOException e) {
            if (!isNoSpace(e)) throw e;
            ch.truncate(before);
            LOG.log(System.Logger.Level.WARNING, "SSD store {0}: no space to preallocate {1} ({2} B)",
                    directory, fileName(file), fileSizeBytes);
            return false;
        }
    }

    /** True when {@code e} is the kernel's ENOSPC (the JDK reports it by its strerror text). */
    static boolean isNoSpace(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            String m = t.getMessage();
            if (m != null && m.contains("No space left on device")) return true;
        }
        return false;
    }

    /** Throws unless, in DIRECT mode, {@code position}, the address and the length are 4 KiB multiples. */
    void checkAligned(long position, MemorySegment buffer) {
        if (mode == IoMode.DIRECT && (position % ExtentLayout.BLOCK_BYTES != 0
                || buffer.address() % ExtentLayout.BLOCK_BYTES != 0
                || buffer.byteSize() % ExtentLayout.BLOCK_BYTES != 0)) {
            throw new IllegalArgumentException("O_DIRECT needs 4 KiB alignment: position=" + position
                    + " address=" + buffer.address() + " length=" + buffer.byteSize());
        }
    }

    @Override
    public void close() {
        for (FileChannel ch : channels) closeQuietly(ch);
    }

    private static void closeQuietly(FileChannel ch) {
        try {
            ch.close();
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "closing extent file failed", e);
        }
    }
}
