package io.orbitkv.core.storage.publish;

/** Outcome of {@link PublishPipeline#publish}: queued for sealing, or refused at once. */
public sealed interface PublishResult {

    /** In the seal queue; {@code queuedBytes} is the queue's byte total including this block. */
    record Queued(long queuedBytes) implements PublishResult {}

    /** The seal queue would exceed {@code sealQueueBytes} (or is closed); counted, nothing queued. */
    record Busy() implements PublishResult {}
}
