package io.orbitkv.state.protocol;

/**
 * One engine-channel frame's body, as a value: a {@link Request} a client sends or a
 * {@link Reply} (including the asynchronous COMPLETION and ERROR) the Manager sends. The header's
 * request id travels beside the frame ({@link FrameEncoder#encode}, {@link DecodeResult.Decoded}),
 * not inside it, so one value can be sent under any id.
 *
 * <p>Values; immutable and thread-safe. Every record validates in its compact constructor, so a
 * frame that exists is internally consistent: the decoder builds frames only through those
 * constructors and reports a refusal as MALFORMED. What the constructors cannot know (the
 * {@link ProtocolLimits} of a deployment, whether an id is live) is checked by the decoder and
 * the Manager respectively.
 */
public sealed interface Frame permits Request, Reply {

    /** The header type this frame travels as. */
    FrameType type();
}
