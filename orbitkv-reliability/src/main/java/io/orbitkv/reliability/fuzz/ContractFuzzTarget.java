package io.orbitkv.reliability.fuzz;

import io.orbitkv.server.cli.InputException;
import io.orbitkv.server.cli.StateJson;
import io.orbitkv.state.ContractDecoding;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.RecoveryContractEncoding;
import io.orbitkv.state.StateGroup;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * Target {@code contract}: the recovery contract's two encodings. First input byte even: the
 * canonical binary form REGISTER carries ({@link RecoveryContractEncoding#decode}), whose refusals
 * are {@link ContractDecoding.Malformed} values; property: a decoded contract re-encodes to
 * exactly the input. Odd: the JSON form the CLI reads ({@link StateJson#contract}), documented
 * refusal {@link InputException}; property: a contract read from JSON survives its binary round
 * trip.
 *
 * <p>Drives the server's own JSON reader through its public entry points, not a copy.
 */
public final class ContractFuzzTarget implements FuzzTarget {

    @Override
    public void fuzzOne(byte[] input) {
        if (input.length == 0) return;
        byte[] body = FuzzTarget.body(input);
        if ((input[0] & 1) == 0) {
            if (RecoveryContractEncoding.decode(body) instanceof ContractDecoding.Decoded(RecoveryContract c)) {
                FuzzTarget.check(Arrays.equals(RecoveryContractEncoding.canonicalBytes(c), body), "a decoded contract is not canonical");
            }
            return;
        }
        RecoveryContract c;
        try {
            c = StateJson.contract(StateJson.parse(new String(body, StandardCharsets.UTF_8), "fuzz"));
        } catch (InputException e) {
            return;
        }
        FuzzTarget.check(RecoveryContractEncoding.decode(RecoveryContractEncoding.canonicalBytes(c))
                instanceof ContractDecoding.Decoded(RecoveryContract back) && back.equals(c),
                "a contract read from JSON does not survive its binary round trip");
    }

    @Override
    public List<Seed> seeds() {
        RecoveryContract hybrid = new RecoveryContract(16, List.of(new StateGroup.Full(0), new StateGroup.SlidingWindow(1, 128, 16),
                new StateGroup.Recurrent(2)));
        String json = """
                {"page_tokens":16,"groups":[{"id":0,"kind":"full"},{"id":1,"kind":"sliding_window","window":128,"sink":16},
                 {"id":2,"kind":"recurrent"}]}""";
        return List.of(
                new Seed("binary-hybrid", FuzzTarget.tagged(0, RecoveryContractEncoding.canonicalBytes(hybrid))),
                new Seed("json-hybrid", FuzzTarget.tagged(1, json.getBytes(StandardCharsets.UTF_8))),
                new Seed("json-window-without-size", FuzzTarget.tagged(1, json.replace("\"window\":128,", "").getBytes(StandardCharsets.UTF_8))));
    }
}
