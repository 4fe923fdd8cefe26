package io.orbitkv.server.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The fenced code blocks of one section of a Markdown document (the README, or a doc under
 * {@code docs/}), read from the file when a test runs, so a test that runs them runs what the
 * document shows, not a copy that can drift. Also the stand-in for {@code bin/orbitkv} that such
 * tests put where the blocks expect the launcher.
 *
 * <p>A section runs from its heading line to the next heading of the same or a higher level. A
 * block opens with a line of three backticks and an optional info string ({@code sh}, {@code python},
 * none) and closes with a bare line of three backticks. Stateless; every method is a pure function
 * of its arguments, except {@link #standInLauncher}, which writes the file it is given.
 */
public final class ReadmeBlocks {

    private ReadmeBlocks() {
    }

    /** One fenced block: its info string ("" for none) and its lines, each ending in a newline. */
    public record Block(String info, String text) {
        public boolean isShell() {
            return info.equals("sh");
        }
    }

    /** The project's README.md, found from a module's working directory (Surefire runs tests there). */
    public static String readme() throws IOException {
        return Files.readString(Path.of("..", "README.md"));
    }

    /**
     * The fenced blocks of the section whose heading line is exactly {@code heading} (e.g.
     * {@code "## Quick start"}), in document order.
     *
     * @throws IllegalArgumentException if there is no such section or a block is not closed
     */
    public static List<Block> section(String markdown, String heading) {
        int level = heading.indexOf(' ');
        if (level < 1 || !heading.substring(0, level).chars().allMatch(c -> c == '#')) {
            throw new IllegalArgumentException("not a Markdown heading: " + heading);
        }
        List<String> lines = markdown.lines().toList();
        int start = lines.indexOf(heading);
        if (start < 0) throw new IllegalArgumentException("no section '" + heading + "'");
        List<Block> blocks = new ArrayList<>();
        String info = null;
        StringBuilder text = new StringBuilder();
        for (String line : lines.subList(start + 1, lines.size())) {
            if (info == null && isHeadingAtOrAbove(line, level)) break;
            if (info == null && line.startsWith("```")) {
                info = line.substring(3).strip();
                text.setLength(0);
            } else if (info != null && line.equals("```")) {
                blocks.add(new Block(info, text.toString()));
                info = null;
            } else if (info != null) {
                text.append(line).append('\n');
            }
        }
        if (info != null) throw new IllegalArgumentException("a block of section '" + heading + "' is not closed");
        return blocks;
    }

    /** The {@code sh} blocks of the section, in order, joined by newlines: the script they make together. */
    public static String shScript(String markdown, String heading) {
        StringBuilder script = new StringBuilder();
        int blocks = 0;
        for (Block b : section(markdown, heading)) {
            if (b.isShell()) {
                script.append(b.text());
                blocks++;
            }
        }
        if (blocks == 0) throw new IllegalArgumentException("section '" + heading + "' has no sh block");
        return script.toString();
    }

    private static boolean isHeadingAtOrAbove(String line, int level) {
        int hashes = 0;
        while (hashes < line.length() && line.charAt(hashes) == '#') hashes++;
        return hashes >= 1 && hashes <= level && line.length() > hashes && line.charAt(hashes) == ' ';
    }

    /**
     * Writes {@code file}: a stand-in for {@code bin/orbitkv} that runs the same CLI over this
     * JVM's class path with the launcher's JVM flags ({@code bin/orbitkv} would build the jar
     * inside the Maven build that runs the test; its {@code build} step has nothing to do here).
     * {@code java ARGS} runs this JVM's {@code java} with the same class path, as the launcher
     * runs it with the OrbitKV jar.
     */
    public static Path standInLauncher(Path file) throws IOException {
        String java = quote(ProcessHandle.current().info().command().orElseThrow());
        String flags = " --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow"
                + " -Xmx192m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto";
        String cp = quote(System.getProperty("java.class.path"));
        String script = "#!/usr/bin/env bash\n"
                + "# bin/orbitkv over the test classpath: the jar is built after the tests, so 'build' has nothing to do\n"
                + "[ \"${1:-}\" = build ] && exit 0\n"
                + "if [ \"${1:-}\" = java ]; then shift; exec " + java + flags + " -cp " + cp + " \"$@\"; fi\n"
                + "exec " + java + flags + " -cp " + cp + " io.orbitkv.server.cli.OrbitKvCli \"$@\"\n";
        Files.createDirectories(file.toAbsolutePath().getParent());
        Files.writeString(file, script);
        if (!file.toFile().setExecutable(true)) throw new IOException("cannot make " + file + " executable");
        return file;
    }

    private static String quote(String s) {
        return "'" + s.replace("'", "'\\''") + "'";
    }
}
