package io.orbitkv.server.daemon;

import io.orbitkv.core.fd.OwnerOnly;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Optional;

/**
 * The exclusive claim of one Manager on one store: an OS file lock ({@code fcntl} via
 * {@link FileChannel#tryLock()}) on {@code <ssdDir>/manager.lock}, whose content is the holder's
 * pid.
 *
 * <p>Owns the lock file's channel while held. Thread model: acquired and released by the
 * daemon's lifecycle thread; {@link #close()} is idempotent. Invariant: while an instance is
 * open, no other process can acquire the lock on the same file; the lock dies with the process,
 * so a Manager killed with SIGKILL leaves a file that the next one simply locks again (a stale
 * file is never mistaken for a live holder).
 *
 * <p>Design note: an OS lock rather than "file exists" or "pid alive" checks: both of those
 * misjudge after a crash (stale file) or pid reuse, while the kernel drops a lock exactly when
 * its holder dies.
 */
public final class StoreLock implements AutoCloseable {

    private final Path file;
    private final FileChannel channel;
    private final FileLock lock;
    private boolean closed;

    private StoreLock(Path file, FileChannel channel, FileLock lock) {
        this.file = file;
        this.channel = channel;
        this.lock = lock;
    }

    /**
     * Locks {@code file} (creating it and its directory) and writes this process's pid into it;
     * empty if another process holds it.
     *
     * @throws IOException if the file cannot be created or opened
     */
    public static Optional<StoreLock> tryAcquire(Path file) throws IOException {
        Path parent = file.toAbsolutePath().getParent();
        if (parent != null) OwnerOnly.createDirectories(parent);
        FileChannel ch = OwnerOnly.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE);
        FileLock lock;
        try {
            lock = ch.tryLock();
        } catch (OverlappingFileLockException e) {
            lock = null;
        } catch (IOException | RuntimeException e) {
            ch.close();
            throw e;
        }
        if (lock == null) {
            ch.close();
            return Optional.empty();
        }
        ch.truncate(0);
        ch.write(ByteBuffer.wrap((ProcessHandle.current().pid() + "\n").getBytes(StandardCharsets.US_ASCII)), 0);
        ch.force(false);
        return Optional.of(new StoreLock(file, ch, lock));
    }

    /** The pid written in {@code file} by its holder, if it holds a number. */
    public static Optional<Long> holderPid(Path file) {
        try {
            return Optional.of(Long.parseLong(Files.readString(file).strip()));
        } catch (IOException | NumberFormatException e) {
            return Optional.empty();
        }
    }

    /** The lock file. */
    public Path file() {
        return file;
    }

    /** Deletes the lock file, then releases the lock. Idempotent. */
    @Override
    public synchronized void close() throws IOException {
        if (closed) return;
        closed = true;
        try {
            Files.deleteIfExists(file);
        } finally {
            try {
                lock.release();
            } finally {
                channel.close();
            }
        }
    }
}
