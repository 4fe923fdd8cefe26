package io.orbitkv.reliability.fuzz;

import io.orbitkv.reliability.manager.CampaignEngine;
import io.orbitkv.server.cli.InputException;
import io.orbitkv.server.cli.StateJson;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.NamespaceDecoding;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * Target {@code namespace}: the namespace's two encodings. First input byte even: the canonical
 * binary form REGISTER carries ({@link Namespace#decode}), whose refusals are
 * {@link NamespaceDecoding.Malformed} values, never exceptions; property: a decoded namespace's
 * {@link Namespace#canonicalBytes} are exactly the input. Odd: the JSON form the CLI reads
 * ({@link StateJson#namespace}), whose documented refusal is {@link InputException}; property: a
 * namespace read from JSON survives its binary round trip.
 *
 * <p>Drives the server's own JSON reader through its public entry points, not a copy.
 */
public final class NamespaceFuzzTarget implements FuzzTarget {

    @Override
    public void fuzzOne(byte[] input) {
        if (input.length == 0) return;
        byte[] body = FuzzTarget.body(input);
        if ((input[0] & 1) == 0) {
            if (Namespace.decode(body) instanceof NamespaceDecoding.Decoded(Namespace ns)) {
                FuzzTarget.check(Arrays.equals(ns.canonicalBytes(), body), "a decoded namespace is not canonical");
            }
            return;
        }
        Namespace ns;
        try {
            ns = StateJson.namespace(StateJson.parse(new String(body, StandardCharsets.UTF_8), "fuzz"));
        } catch (InputException e) {
            return;
        }
        FuzzTarget.check(Namespace.decode(ns.canonicalBytes()) instanceof NamespaceDecoding.Decoded(Namespace back) && back.equals(ns),
                "a namespace read from JSON does not survive its binary round trip");
    }

    @Override
    public List<Seed> seeds() {
        String json = """
                {"model_id":"reliability","revision":"r1","weights_digest":"sha256:w","tokenizer_digest":"sha256:t",
                 "adapter_id":"","dtype":"bf16","kv_layout":"nhd","page_tokens":16,"tp_size":1,"tp_rank":0,
                 "pp_size":1,"pp_rank":0,"format_version":1}""";
        byte[] binary = CampaignEngine.NAMESPACE.canonicalBytes();
        return List.of(
                new Seed("binary", FuzzTarget.tagged(0, binary)),
                new Seed("binary-truncated", FuzzTarget.tagged(0, Arrays.copyOf(binary, binary.length - 3))),
                new Seed("json", FuzzTarget.tagged(1, json.getBytes(StandardCharsets.UTF_8))),
                new Seed("json-unknown-field", FuzzTarget.tagged(1, json.replace("\"dtype\"", "\"d_type\"").getBytes(StandardCharsets.UTF_8))));
    }
}
