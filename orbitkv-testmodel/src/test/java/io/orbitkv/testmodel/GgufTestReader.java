package io.orbitkv.testmodel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** An independent GGUF v3 parser for the tests: reads back what {@link GgufWriter} wrote. */
final class GgufTestReader {

    record TensorInfo(String name, long[] dims, int type, long offset) {
    }

    final int magic;
    final int version;
    final Map<String, Object> metadata = new LinkedHashMap<>();
    final List<TensorInfo> tensors = new ArrayList<>();
    final long dataStart;
    private final ByteBuffer in;

    GgufTestReader(byte[] file) {
        in = ByteBuffer.wrap(file).order(ByteOrder.LITTLE_ENDIAN);
        magic = in.getInt();
        version = in.getInt();
        long tensorCount = in.getLong();
        long kvCount = in.getLong();
        for (long i = 0; i < kvCount; i++) {
            String key = str();
            metadata.put(key, value(in.getInt()));
        }
        for (long i = 0; i < tensorCount; i++) {
            String name = str();
            long[] dims = new long[in.getInt()];
            for (int d = 0; d < dims.length; d++) dims[d] = in.getLong();
            tensors.add(new TensorInfo(name, dims, in.getInt(), in.getLong()));
        }
        long alignment = ((Number) metadata.getOrDefault("general.alignment", 32)).longValue();
        dataStart = (in.position() + alignment - 1) / alignment * alignment;
    }

    float[] floats(TensorInfo t) {
        long n = 1;
        for (long d : t.dims()) n *= d;
        float[] out = new float[(int) n];
        ByteBuffer.wrap(in.array(), (int) (dataStart + t.offset()), out.length * 4).order(ByteOrder.LITTLE_ENDIAN)
                .asFloatBuffer().get(out);
        return out;
    }

    private String str() {
        byte[] b = new byte[Math.toIntExact(in.getLong())];
        in.get(b);
        return new String(b, StandardCharsets.UTF_8);
    }

    private Object value(int type) {
        return switch (type) {
            case 4 -> Integer.toUnsignedLong(in.getInt());
            case 5 -> in.getInt();
            case 6 -> in.getFloat();
            case 7 -> in.get() != 0;
            case 8 -> str();
            case 9 -> {
                int elementType = in.getInt();
                long count = in.getLong();
                List<Object> items = new ArrayList<>();
                for (long i = 0; i < count; i++) items.add(value(elementType));
                yield items;
            }
            default -> throw new IllegalStateException("unexpected gguf type " + type);
        };
    }
}
