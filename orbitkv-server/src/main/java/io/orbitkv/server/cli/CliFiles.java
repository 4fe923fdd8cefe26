package io.orbitkv.server.cli;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Reading the CLI's input files, with a named size budget: inputs are small descriptions, so a
 * file over {@value #MAX_INPUT_BYTES} bytes is a mistake (a model file passed by accident), not
 * something to load.
 */
final class CliFiles {

    /** Largest accepted input file: 64 MiB, about 16M tokens as CSV. */
    static final long MAX_INPUT_BYTES = 64L << 20;

    private CliFiles() {
    }

    static String read(Path path, String what) {
        try {
            if (!Files.isRegularFile(path)) throw new InputException(what + ": no such file: " + path);
            long size = Files.size(path);
            if (size > MAX_INPUT_BYTES) {
                throw new InputException(what + ": " + path + " is " + size + " bytes, more than " + MAX_INPUT_BYTES);
            }
            return Files.readString(path, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new InputException(what + ": cannot read " + path + ": " + e.getMessage());
        }
    }
}
