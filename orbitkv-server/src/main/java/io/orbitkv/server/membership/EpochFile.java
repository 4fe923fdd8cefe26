package io.orbitkv.server.membership;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;

/**
 * The Manager's persistent epoch: a decimal number in {@code <stateDir>/cluster.epoch}, incremented
 * and made durable at each start; the new value is this process's incarnation.
 *
 * <p>Called once per start by the lifecycle thread, under the store lock (so two processes never
 * race on it). Invariant: the returned incarnation is greater than any earlier one of this state
 * directory, even across crashes: the new value is written to a temporary file, fsynced, and
 * renamed over the old one before it is used. A wiped directory starts again at 1, so a cluster
 * member takes its epoch through {@link EtcdMembership#startIncarnation}, which raises it above the
 * incarnation etcd holds for the node ({@link #nextAbove}).
 *
 * <p>Design note: a persistent counter rather than a timestamp, because clocks step backwards
 * (NTP, VM migration) and a repeated incarnation would let a stale stream be accepted as current.
 */
public final class EpochFile {

    /** File name inside the state directory. */
    public static final String NAME = "cluster.epoch";

    private EpochFile() {
    }

    /** Reads the previous epoch (0 if none), stores previous + 1 durably, and returns it. */
    public static long next(Path stateDir) throws IOException {
        return store(stateDir, previous(stateDir) + 1);
    }

    /**
     * Stores {@code max(previous, floor) + 1} durably and returns it: the next epoch above one
     * known elsewhere too (the incarnation etcd holds for this node when the directory was wiped).
     */
    static long nextAbove(Path stateDir, long floor) throws IOException {
        return store(stateDir, Math.max(previous(stateDir), floor) + 1);
    }

    /** The epoch stored now; 0 if there is none. */
    static long previous(Path stateDir) throws IOException {
        Path file = stateDir.resolve(NAME);
        long previous = 0;
        if (Files.exists(file)) {
            String text = Files.readString(file, StandardCharsets.UTF_8).strip();
            try {
                previous = Long.parseLong(text);
            } catch (NumberFormatException e) {
                throw new IOException(file + " is corrupt ('" + text + "'); refusing to guess an incarnation", e);
            }
            if (previous < 0) throw new IOException(file + " holds a negative epoch");
        }
        return previous;
    }

    private static long store(Path stateDir, long next) throws IOException {
        Files.createDirectories(stateDir);
        Path file = stateDir.resolve(NAME);
        Path tmp = stateDir.resolve(NAME + ".tmp");
        try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            ch.write(ByteBuffer.wrap((next + "\n").getBytes(StandardCharsets.UTF_8)));
            ch.force(true);
        }
        try {
            Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (AtomicMoveNotSupportedException e) {
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING);
        }
        try (FileChannel dir = FileChannel.open(stateDir, StandardOpenOption.READ)) {
            dir.force(true);
        } catch (IOException ignored) {
            // some file systems cannot fsync a directory; the rename is still ordered after the data
        }
        return next;
    }
}
