package io.orbitkv.core.peer;

/**
 * The life of one ticket at the source, with its single transition function {@link #on}.
 *
 * <pre>
 *            BEGIN                 END (last)
 *  GRANTED ---------> SENDING ------------------> GRANTED
 *     |                  |  RELEASE / EXPIRE / REQUESTER_GONE
 *     | RELEASE          v
 *     | EXPIRE        DRAINING --END (last)--> FREED
 *     | REQUESTER_GONE                           ^
 *     +------------------------------------------+
 * </pre>
 *
 * <p>The rule the machine exists for: a ticket's pin is freed (state {@link #FREED}) only when
 * no transfer is reading it. A release, window expiry or requester loss that arrives while a
 * transfer is running only moves the ticket to {@link #DRAINING}: no new transfer may start,
 * and the last transfer's end frees it.
 */
public enum TicketState {
    /** Authorized and pinned; no transfer is reading the pinned bytes. */
    GRANTED,
    /** At least one transfer is reading the pinned bytes. */
    SENDING,
    /** Freeing was asked for while transfers run; freed when the last one ends. */
    DRAINING,
    /** The pin has been released; terminal. */
    FREED;

    /** What can happen to a ticket. */
    public enum Event {
        /** A transfer starts reading the pinned bytes. */
        BEGIN,
        /** A transfer stopped reading (finished, failed or cancelled). */
        END,
        /** The requester released the ticket. */
        RELEASE,
        /** The ticket's window passed ({@code onTick}). */
        EXPIRE,
        /** Membership says the requester's incarnation is gone. */
        REQUESTER_GONE
    }

    /**
     * The state after {@code event}, given how many transfers are reading once the event is
     * applied ({@code transfersAfter}). {@link Event#BEGIN} outside GRANTED/SENDING is refused by
     * returning the state unchanged; callers check {@link #acceptsTransfer()} first.
     */
    public TicketState on(Event event, int transfersAfter) {
        if (transfersAfter < 0) throw new IllegalArgumentException("transfersAfter: " + transfersAfter);
        return switch (this) {
            case GRANTED -> switch (event) {
                case BEGIN -> SENDING;
                case END -> GRANTED;
                case RELEASE, EXPIRE, REQUESTER_GONE -> FREED;
            };
            case SENDING -> switch (event) {
                case BEGIN -> SENDING;
                case END -> transfersAfter == 0 ? GRANTED : SENDING;
                case RELEASE, EXPIRE, REQUESTER_GONE -> DRAINING;
            };
            case DRAINING -> switch (event) {
                case END -> transfersAfter == 0 ? FREED : DRAINING;
                case BEGIN, RELEASE, EXPIRE, REQUESTER_GONE -> DRAINING;
            };
            case FREED -> FREED;
        };
    }

    /** Whether a new transfer may start reading. */
    public boolean acceptsTransfer() {
        return switch (this) {
            case GRANTED, SENDING -> true;
            case DRAINING, FREED -> false;
        };
    }
}
