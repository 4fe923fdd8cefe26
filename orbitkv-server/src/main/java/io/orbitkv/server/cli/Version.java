package io.orbitkv.server.cli;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;
import picocli.CommandLine;

/**
 * What {@code orbitkv --version} prints: the build's version and the git commit it was built from,
 * read from {@code version.properties}, which the build fills in (Maven resource filtering; the
 * commit comes from {@code git describe} at build time, "unknown" without git).
 *
 * <p>Design note: the commit is fixed at build time, not looked up when the command runs, because
 * a release tree has no {@code .git} to ask; a resource in the jar travels with it.
 */
public final class Version implements CommandLine.IVersionProvider {

    /** The version and commit of this build. */
    public record Build(String version, String commit) {
    }

    /** Reads this jar's {@code version.properties}. */
    public static Build build() {
        Properties p = new Properties();
        try (InputStream in = Version.class.getResourceAsStream("version.properties")) {
            if (in == null) throw new IllegalStateException("version.properties is missing from the OrbitKV jar");
            p.load(in);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read version.properties", e);
        }
        return new Build(p.getProperty("version", "unknown"), p.getProperty("commit", "unknown"));
    }

    @Override
    public String[] getVersion() {
        Build b = build();
        return new String[] {
            "orbitkv " + b.version() + " (commit " + b.commit() + ")",
            "Java " + Runtime.version() + " (" + System.getProperty("java.vendor", "unknown vendor") + ")"
        };
    }
}
