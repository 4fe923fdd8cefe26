package io.orbitkv.state;

import java.util.Objects;

/**
 * The outcome of {@link RecoveryContractEncoding#decode(byte[])}: a contract, or why the bytes
 * are not one.
 *
 * <p>Values; immutable and thread-safe. Malformed input from a REGISTER frame is an expected
 * outcome, so it is a value the protocol boundary maps to an error code, not an exception.
 */
public sealed interface ContractDecoding {

    /** The bytes were a canonical contract encoding. */
    record Decoded(RecoveryContract contract) implements ContractDecoding {
        public Decoded {
            Objects.requireNonNull(contract, "contract");
        }
    }

    /** The bytes were not; {@code reason} names the offset and the problem. */
    record Malformed(String reason) implements ContractDecoding {
        public Malformed {
            Objects.requireNonNull(reason, "reason");
        }
    }
}
