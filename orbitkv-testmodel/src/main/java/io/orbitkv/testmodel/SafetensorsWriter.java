package io.orbitkv.testmodel;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Writes a model's weights as one F32 safetensors file.
 *
 * <pre>
 *   u64 LE  header length N (a multiple of 8)
 *   N       JSON header: {"name":{"dtype":"F32","shape":[..],"data_offsets":[begin,end]}, ...,
 *                         "__metadata__":{"format":"pt"}}, right-padded with spaces
 *   ...     tensor data, F32 little-endian, in canonical order, offsets relative to here
 * </pre>
 *
 * <p>Stateless; one call writes one file. Design note: the header is padded to 8 bytes so every
 * tensor starts 8-aligned in a memory map (Jlama maps the file and views floats in place).
 */
public final class SafetensorsWriter {

    private SafetensorsWriter() {
    }

    /** Writes {@code weights} to {@code file} and returns the file's size in bytes. */
    public static long write(TinyLlamaWeights weights, Path file) throws IOException {
        StringBuilder json = new StringBuilder("{");
        long offset = 0;
        for (LlamaTensor t : weights.tensors()) {
            json.append(JsonText.quote(t.hfName())).append(":{\"dtype\":\"F32\",\"shape\":[");
            long[] shape = t.hfShape();
            for (int i = 0; i < shape.length; i++) json.append(i == 0 ? "" : ",").append(shape[i]);
            json.append("],\"data_offsets\":[").append(offset).append(',').append(offset + t.bytes()).append("]},");
            offset += t.bytes();
        }
        json.append("\"__metadata__\":{\"format\":\"pt\"}}");
        while (json.length() % 8 != 0) json.append(' ');
        byte[] header = json.toString().getBytes(StandardCharsets.UTF_8);
        try (OutputStream out = new BufferedOutputStream(Files.newOutputStream(file), 1 << 16)) {
            out.write(ByteBuffer.allocate(Long.BYTES).order(ByteOrder.LITTLE_ENDIAN).putLong(header.length).array());
            out.write(header);
            for (LlamaTensor t : weights.tensors()) out.write(TinyLlamaWeights.littleEndian(weights.hfValues(t)));
        }
        return Long.BYTES + header.length + offset;
    }
}
