package io.orbitkv.core.storage.ssd;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Mounts a small filesystem for a test (needs root); skips the test with a clear message otherwise. */
final class Mounts implements AutoCloseable {

    private final Path mountPoint;

    private Mounts(Path mountPoint) {
        this.mountPoint = mountPoint;
    }

    /** {@code mount -t <type> -o <options> <type> <mountPoint>}; the test is skipped when that fails. */
    static Mounts mount(String type, String options, Path mountPoint) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("mount", "-t", type));
        if (!options.isEmpty()) cmd.addAll(List.of("-o", options));
        cmd.addAll(List.of(type, mountPoint.toString()));
        int rc = run(cmd);
        assumeTrue(rc == 0, "cannot mount " + type + " at " + mountPoint + " (rc=" + rc
                + "; needs root and mount rights): test skipped");
        return new Mounts(mountPoint);
    }

    private static int run(List<String> cmd) throws InterruptedException {
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            if (!p.waitFor(20, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return -1;
            }
            return p.exitValue();
        } catch (IOException e) {
            return -1;
        }
    }

    @Override
    public void close() throws InterruptedException {
        run(List.of("umount", mountPoint.toString()));
    }
}
