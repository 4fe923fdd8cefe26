package io.orbitkv.core.fd;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;
import java.util.Set;

/**
 * Creates the Manager's own files ({@code 0600}) and directories ({@code 0700}) whatever the
 * process umask: the DRAM arena files, the SSD extent files, the ready file and the lock files
 * hold cache pages or say where they are, and other local users have no business reading them
 * (protocol §9.6: the trust boundary is the file mode).
 *
 * <p>Stateless; any thread.
 *
 * <p>Design note: each path is created with the owner-only mode as its creation attribute (so it is
 * never, even for a moment, wider than {@code 0600}) and then set again with {@code chmod}, which
 * the umask does not touch: a umask of {@code 0277} would otherwise leave a file the Manager cannot
 * write, and an existing file of an older run (created {@code 0644}) would keep its mode. Only
 * directories this class creates are changed; an existing directory (such as {@code /dev/shm}) keeps
 * its mode.
 */
public final class OwnerOnly {

    /** {@code rw-------}. */
    public static final Set<PosixFilePermission> FILE = PosixFilePermissions.fromString("rw-------");
    /** {@code rwx------}. */
    public static final Set<PosixFilePermission> DIRECTORY = PosixFilePermissions.fromString("rwx------");

    private static final FileAttribute<Set<PosixFilePermission>> FILE_ATTRIBUTE = PosixFilePermissions.asFileAttribute(FILE);
    private static final FileAttribute<Set<PosixFilePermission>> DIRECTORY_ATTRIBUTE =
            PosixFilePermissions.asFileAttribute(DIRECTORY);

    private OwnerOnly() {
    }

    /**
     * Creates {@code directory} and its missing parents, each new one {@code 0700}; existing ones
     * are left as they are.
     */
    public static void createDirectories(Path directory) throws IOException {
        Path absolute = directory.toAbsolutePath().normalize();
        if (Files.isDirectory(absolute)) return;
        Path parent = absolute.getParent();
        if (parent != null) createDirectories(parent);
        try {
            Files.createDirectory(absolute, DIRECTORY_ATTRIBUTE);
        } catch (FileAlreadyExistsException e) {
            if (!Files.isDirectory(absolute)) throw e;
            return; // made by another thread or process meanwhile: not ours to chmod
        }
        Files.setPosixFilePermissions(absolute, DIRECTORY);
    }

    /**
     * Opens {@code file} with {@code options} (which must include {@code CREATE}); a file created
     * here, and an existing one, ends with mode {@code 0600}.
     */
    public static FileChannel open(Path file, OpenOption... options) throws IOException {
        if (!Arrays.asList(options).contains(StandardOpenOption.CREATE)) {
            throw new IllegalArgumentException("OwnerOnly.open creates files: CREATE is required");
        }
        FileChannel channel = FileChannel.open(file, Set.of(options), FILE_ATTRIBUTE);
        try {
            if (!Files.getPosixFilePermissions(file, LinkOption.NOFOLLOW_LINKS).equals(FILE)) {
                Files.setPosixFilePermissions(file, FILE);
            }
        } catch (IOException | RuntimeException e) {
            channel.close();
            throw e;
        }
        return channel;
    }

    /** Writes {@code text} (UTF-8) to a new or truncated {@code file} of mode {@code 0600}. */
    public static void writeString(Path file, String text) throws IOException {
        try (FileChannel channel = open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            java.nio.ByteBuffer bytes = java.nio.ByteBuffer.wrap(text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
            while (bytes.hasRemaining()) channel.write(bytes);
        }
    }
}
