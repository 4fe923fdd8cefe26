package io.orbitkv.server.config;

/**
 * A configuration file or override that cannot be used: unreadable, not JSON, an unknown key, or
 * a value out of range. The message names the source and the key; the CLI prints it as one line
 * and exits with status 2.
 */
public final class ConfigException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public ConfigException(String message) {
        super(message, null, false, false);
    }
}
