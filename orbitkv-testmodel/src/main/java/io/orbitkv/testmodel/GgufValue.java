package io.orbitkv.testmodel;

import java.util.List;

/**
 * One GGUF metadata value, tagged with its {@code gguf_type} code.
 *
 * <p>Values; immutable. Only the types a llama.cpp loader reads from a Llama model are here.
 */
public sealed interface GgufValue {

    /** The {@code gguf_type} code written before the value. */
    int typeCode();

    int UINT32 = 4;
    int INT32 = 5;
    int FLOAT32 = 6;
    int BOOL = 7;
    int STRING = 8;
    int ARRAY = 9;

    /** Unsigned 32-bit integer (held in an int, written as its 4 bytes). */
    record U32(int value) implements GgufValue {
        public U32 {
            if (value < 0) throw new IllegalArgumentException("u32 value out of int range: " + value);
        }

        public int typeCode() {
            return UINT32;
        }
    }

    /** 32-bit float. */
    record F32(float value) implements GgufValue {
        public int typeCode() {
            return FLOAT32;
        }
    }

    /** Boolean, one byte. */
    record Bool(boolean value) implements GgufValue {
        public int typeCode() {
            return BOOL;
        }
    }

    /** UTF-8 string: u64 length + bytes. */
    record Str(String value) implements GgufValue {
        public int typeCode() {
            return STRING;
        }
    }

    /** Array of strings. */
    record StrArray(List<String> values) implements GgufValue {
        public StrArray {
            values = List.copyOf(values);
        }

        public int typeCode() {
            return ARRAY;
        }
    }

    /** Array of 32-bit floats. */
    record F32Array(float[] values) implements GgufValue {
        public F32Array {
            values = values.clone();
        }

        public int typeCode() {
            return ARRAY;
        }
    }

    /** Array of signed 32-bit integers. */
    record I32Array(int[] values) implements GgufValue {
        public I32Array {
            values = values.clone();
        }

        public int typeCode() {
            return ARRAY;
        }
    }
}
