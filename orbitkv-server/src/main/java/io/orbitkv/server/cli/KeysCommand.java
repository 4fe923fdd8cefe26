package io.orbitkv.server.cli;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/**
 * {@code orbitkv keys}: the StateKeys of every full page of a token sequence, derived through the
 * project's token chain ({@code docs/state-contract.md}). Stateless; one run per instance.
 */
@Command(name = "keys", mixinStandardHelpOptions = true,
        description = "Print the StateKey of every full page of a token sequence (token chain).")
final class KeysCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--namespace", required = true, paramLabel = "NS.json", description = "namespace JSON file")
    Path namespaceFile;

    @Option(names = "--tokens", required = true, paramLabel = "FILE_OR_CSV",
            description = "comma-separated token ids, or a file holding them")
    String tokens;

    @Option(names = "--group", defaultValue = "0", paramLabel = "N", description = "state group id (default 0)")
    int group;

    @Option(names = "--extra", defaultValue = "", paramLabel = "HEX",
            description = "extra bytes hashed into every page, as hex (default none)")
    String extraHex;

    @Option(names = "--json", description = "print one JSON object instead of lines")
    boolean json;

    @Override
    public Integer call() {
        Namespace ns = StateJson.namespace(StateJson.parse(CliFiles.read(namespaceFile, "--namespace"), "--namespace"));
        if (group < 0) throw new InputException("--group must not be negative: " + group);
        byte[] extra = parseHex(extraHex);
        int[] ids = parseTokens(tokens);
        byte[] digest = ns.digest();
        List<StateKey> keys = StateKeys.forTokens(digest, group, ids, ns.pageTokens(), extra);
        PrintWriter out = spec.commandLine().getOut();
        if (json) {
            ObjectNode o = JsonNodeFactory.instance.objectNode();
            o.put("namespace_digest", HexFormat.of().formatHex(digest));
            o.put("group", group);
            o.put("page_tokens", ns.pageTokens());
            ArrayNode arr = o.putArray("keys");
            for (int i = 0; i < keys.size(); i++) arr.addObject().put("page", i).put("key", keys.get(i).toHex());
            out.println(o);
        } else {
            for (int i = 0; i < keys.size(); i++) out.println(i + " " + keys.get(i).toHex());
        }
        return 0;
    }

    private static boolean isRegularFile(String arg) {
        try {
            return !arg.isBlank() && Files.isRegularFile(Path.of(arg));
        } catch (java.nio.file.InvalidPathException e) {
            return false;
        }
    }

    static byte[] parseHex(String hex) {
        String h = hex.startsWith("0x") || hex.startsWith("0X") ? hex.substring(2) : hex;
        try {
            return HexFormat.of().parseHex(h);
        } catch (IllegalArgumentException e) {
            throw new InputException("--extra: not a hex string of whole bytes: \"" + hex + "\"");
        }
    }

    /** Token ids from a CSV string, or from a file holding one (commas and/or whitespace). */
    static int[] parseTokens(String arg) {
        boolean isFile = isRegularFile(arg);
        String text = isFile ? CliFiles.read(Path.of(arg), "--tokens") : arg;
        if (text.isBlank()) throw new InputException("--tokens: empty prompt (no token ids)");
        String[] parts = text.strip().split("[,\\s]+");
        int[] out = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            String p = parts[i];
            if (!p.matches("-?[0-9]+")) {
                throw new InputException("--tokens: token " + i + " is not an integer: \"" + p + "\""
                        + (isFile ? "" : " (and no such file exists)"));
            }
            long v;
            try {
                v = Long.parseLong(p);
            } catch (NumberFormatException e) {
                throw new InputException("--tokens: token " + i + " is out of range: " + p);
            }
            if (v < 0) throw new InputException("--tokens: token " + i + " is negative: " + v);
            if (v > Integer.MAX_VALUE) throw new InputException("--tokens: token " + i + " exceeds int32: " + v);
            out[i] = (int) v;
        }
        return out;
    }
}
