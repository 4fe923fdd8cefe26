package io.orbitkv.testmodel;

/**
 * One weight tensor of a generated model: its names in both formats, its shape and how its
 * values are drawn.
 *
 * <p>Immutable value. {@code rows x cols} is the HF (row-major, PyTorch) shape; a vector has
 * {@code rows == 1}. GGUF lists dimensions fastest-first, so the same tensor is
 * {@code [cols, rows]} there ({@link #ggufDims()}).
 *
 * @param index         position in the model's canonical tensor order (also seeds its values)
 * @param hfName        safetensors name, e.g. {@code model.layers.0.self_attn.q_proj.weight}
 * @param ggufName      GGUF name, e.g. {@code blk.0.attn_q.weight}
 * @param rows          output features (1 for a vector)
 * @param cols          input features
 * @param std           standard deviation of the normal init; 0 means "all ones" (norm weights)
 * @param ropeHeads     for Q and K projections, the head count whose rows llama.cpp wants
 *                      interleaved (see {@link TinyLlamaWeights#ggufValues}); 0 otherwise
 * @param vector        whether the tensor is one-dimensional
 */
public record LlamaTensor(int index, String hfName, String ggufName, int rows, int cols,
                          double std, int ropeHeads, boolean vector) {

    public LlamaTensor {
        if (index < 0 || rows <= 0 || cols <= 0 || std < 0 || ropeHeads < 0) {
            throw new IllegalArgumentException("bad tensor " + hfName);
        }
        if (vector && rows != 1) throw new IllegalArgumentException("a vector has one row: " + hfName);
    }

    /** Number of elements. */
    public long elements() {
        return (long) rows * cols;
    }

    /** Size of the F32 data in bytes. */
    public long bytes() {
        return elements() * Float.BYTES;
    }

    /** HF/safetensors shape, slowest dimension first. */
    public long[] hfShape() {
        return vector ? new long[] {cols} : new long[] {rows, cols};
    }

    /** GGUF dimensions, fastest dimension first. */
    public long[] ggufDims() {
        return vector ? new long[] {cols} : new long[] {cols, rows};
    }
}
