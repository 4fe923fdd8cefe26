package io.orbitkv.core.storage.ssd;

import io.orbitkv.testkit.Environment;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;


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
        Environment.require(rc == 0, "mount(8) of " + type + " at " + mountPoint + " (rc=" + rc
                + "; needs root and mount rights)");
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
    public void close() {
        try {
            run(List.of("umount", mountPoint.toString()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // close() keeps the interrupt for the caller
        }
    }
}
