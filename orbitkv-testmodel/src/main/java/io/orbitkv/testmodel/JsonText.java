package io.orbitkv.testmodel;

/**
 * Just enough JSON writing for the model files: string quoting. Stateless.
 *
 * <p>Design note: the module stays JDK-only (the server's fat jar and the bench carry it), and
 * the files it writes are small fixed shapes, so a JSON library would be all cost.
 */
final class JsonText {

    private JsonText() {
    }

    /** {@code s} as a JSON string literal, with quotes. */
    static String quote(String s) {
        StringBuilder out = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                    else out.append(c);
                }
            }
        }
        return out.append('"').toString();
    }
}
