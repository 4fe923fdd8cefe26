package io.orbitkv.reliability.manager;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/** {@code jcmd} of this JVM's JDK against a Manager process: its answer as text, within 60 s. */
public final class Jcmd {

    private Jcmd() {
    }

    /**
     * Runs {@code jcmd <pid> <command>} and returns what it printed.
     *
     * @throws IOException when it does not answer within 60 s or exits non-zero (the text says why)
     */
    public static String run(long pid, String command) throws IOException, InterruptedException {
        Process jcmd = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(),
                Long.toString(pid), command).redirectErrorStream(true).start();
        String out = new String(jcmd.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!jcmd.waitFor(60, TimeUnit.SECONDS) || jcmd.exitValue() != 0) {
            jcmd.destroyForcibly();
            throw new IOException("jcmd " + pid + " " + command + " failed: " + out);
        }
        return out;
    }
}
