package io.orbitkv.state;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.junit.jupiter.api.Test;

/** The canonical contract encoding round-trips and refuses every non-canonical input. */
class RecoveryContractEncodingProperties {

    static RecoveryContract randomContract(Random r) {
        List<StateGroup> groups = new ArrayList<>();
        for (int i = 0, n = 1 + r.nextInt(RecoveryContractEncoding.MAX_GROUPS); i < n; i++) {
            int id = i * 5 + r.nextInt(5);
            groups.add(switch (r.nextInt(3)) {
                case 0 -> new StateGroup.Full(id);
                case 1 -> new StateGroup.SlidingWindow(id, 1 + r.nextInt(Integer.MAX_VALUE), r.nextInt(Integer.MAX_VALUE));
                default -> new StateGroup.Recurrent(id);
            });
        }
        return new RecoveryContract(1 + r.nextInt(Integer.MAX_VALUE), groups);
    }

    @Property(tries = 300)
    void roundTripsAndEveryProperPrefixIsMalformed(@ForAll long seed) {
        RecoveryContract contract = randomContract(new Random(seed));
        byte[] bytes = RecoveryContractEncoding.canonicalBytes(contract);
        assertThat(bytes).hasSize(16 + 16 * contract.groups().size());
        assertThat(RecoveryContractEncoding.decode(bytes)).isEqualTo(new ContractDecoding.Decoded(contract));
        for (int n = 0; n < bytes.length; n++) {
            assertThat(RecoveryContractEncoding.decode(Arrays.copyOf(bytes, n))).isInstanceOf(ContractDecoding.Malformed.class);
        }
        assertThat(RecoveryContractEncoding.decode(Arrays.copyOf(bytes, bytes.length + 1)))
                .isInstanceOf(ContractDecoding.Malformed.class);
    }

    @Property(tries = 500)
    void anyDecodedCorruptionReencodesToTheSameBytes(@ForAll long seed) {
        Random r = new Random(seed);
        byte[] bytes = RecoveryContractEncoding.canonicalBytes(randomContract(r));
        bytes[r.nextInt(bytes.length)] ^= (byte) (1 + r.nextInt(255));
        if (RecoveryContractEncoding.decode(bytes) instanceof ContractDecoding.Decoded(RecoveryContract c)) {
            assertThat(RecoveryContractEncoding.canonicalBytes(c)).isEqualTo(bytes);
        }
    }

    @Test
    void refusesNonZeroUnusedWordsDuplicateIdsAndUnknownKinds() {
        RecoveryContract contract = new RecoveryContract(16, List.of(new StateGroup.Full(0), new StateGroup.Recurrent(1)));
        byte[] bytes = RecoveryContractEncoding.canonicalBytes(contract);
        ByteBuffer le = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        byte[] window = bytes.clone();
        ByteBuffer.wrap(window).order(ByteOrder.LITTLE_ENDIAN).putInt(16 + 8, 4);
        assertThat(RecoveryContractEncoding.decode(window)).isEqualTo(
                new ContractDecoding.Malformed("unused words of group at offset 16 must be zero"));
        byte[] duplicate = bytes.clone();
        ByteBuffer.wrap(duplicate).order(ByteOrder.LITTLE_ENDIAN).putInt(32 + 4, 0);
        assertThat(RecoveryContractEncoding.decode(duplicate)).isInstanceOfSatisfying(ContractDecoding.Malformed.class,
                m -> assertThat(m.reason()).contains("duplicate group id 0"));
        le.putInt(32, 9);
        assertThat(RecoveryContractEncoding.decode(bytes)).isInstanceOfSatisfying(ContractDecoding.Malformed.class,
                m -> assertThat(m.reason()).contains("unknown group kind 9"));
    }
}
