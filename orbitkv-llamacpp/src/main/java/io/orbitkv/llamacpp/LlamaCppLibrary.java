package io.orbitkv.llamacpp;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Locale;

/**
 * Finds the native llama.cpp library: {@code libjllama.so} bundled in {@code de.kherud:llama:4.2.0}
 * (llama.cpp {@value LlamaCppAbi#BUILD_TAG} linked in, its C API exported), extracted from the
 * class path into a cache directory once and reused.
 *
 * <p>Stateless. The cache file is named by the SHA-256 of the bundled bytes, written to a
 * temporary name and moved into place atomically, so concurrent JVMs (the parity gates start
 * engine processes) never load a half-written file and another bundle never shadows this one.
 *
 * <p>Design note: only Linux x86-64 is bundled in the way this adapter was checked against
 * (the struct layouts of {@link LlamaCppAbi} come from that build); other platforms fail here
 * with their name rather than later with a wrong offset. The default cache directory is
 * {@code $java.io.tmpdir/orbitkv-llamacpp}; {@code -Dorbitkv.llamacpp.cache=DIR} moves it.
 * The library is about 5.4 MiB; extraction takes ~20 ms and happens once per cache directory.
 */
public final class LlamaCppLibrary {

    /** The class-path resource of the bundled library. */
    public static final String RESOURCE = "de/kherud/llama/Linux/x86_64/libjllama.so";

    private LlamaCppLibrary() {
    }

    /** The extracted library under the default cache directory. */
    public static Path extract() {
        String dir = System.getProperty("orbitkv.llamacpp.cache",
                Path.of(System.getProperty("java.io.tmpdir"), "orbitkv-llamacpp").toString());
        return extract(Path.of(dir));
    }

    /** The extracted library under {@code cacheDir}, extracting it if this bundle is not there yet. */
    public static Path extract(Path cacheDir) {
        String os = System.getProperty("os.name").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch");
        if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            throw new IllegalStateException("the llama.cpp adapter supports Linux x86-64 only, not " + os + "/" + arch);
        }
        byte[] bytes;
        try (InputStream in = LlamaCppLibrary.class.getClassLoader().getResourceAsStream(RESOURCE)) {
            if (in == null) throw new IllegalStateException(RESOURCE + " is not on the class path (de.kherud:llama:4.2.0)");
            bytes = in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Path target = cacheDir.resolve(sha256(bytes).substring(0, 16)).resolve("libjllama.so");
        try {
            if (Files.exists(target) && Files.size(target) == bytes.length) return target;
            Files.createDirectories(target.getParent());
            Path tmp = Files.createTempFile(target.getParent(), "libjllama", ".tmp");
            Files.write(tmp, bytes);
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            return target;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot extract " + RESOURCE + " to " + target, e);
        }
    }

    private static String sha256(byte[] bytes) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
