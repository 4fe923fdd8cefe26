package io.orbitkv.state;

import java.util.Objects;

/**
 * Why candidate boundary {@code boundaryTokens} is not legal: the first group (in contract order)
 * that cannot be recovered there, and the first thing it lacks.
 *
 * <p>Value; immutable and thread-safe. The reason is structured (page and role, or checkpoint)
 * and only rendered as text on demand, so a selection that refuses thousands of candidates
 * builds no strings.
 *
 * @param boundaryTokens the rejected candidate boundary, in tokens
 * @param groupId        the first group that blocks it
 * @param reason         what that group lacks
 */
public record Rejection(long boundaryTokens, int groupId, Reason reason) {

    public Rejection {
        Objects.requireNonNull(reason, "reason");
    }

    /** What a group lacks at a boundary. */
    public sealed interface Reason {

        /** One line of text, e.g. {@code "window page 63 not available"}. */
        String describe();
    }

    /** Why a page was needed. */
    public enum Role {
        /** a full-attention prefix page in {@code [origin, t)} */
        PREFIX,
        /** a sliding-window page in {@code [max(origin, t-W), t)} */
        WINDOW,
        /** a page covering one of the first S (sink) tokens */
        SINK
    }

    /** The lowest needed page that is not available. */
    public record MissingPage(long pageIndex, Role role) implements Reason {
        public MissingPage {
            Objects.requireNonNull(role, "role");
        }

        @Override
        public String describe() {
            String what = switch (role) {
                case PREFIX -> "prefix page ";
                case WINDOW -> "window page ";
                case SINK -> "sink page ";
            };
            return what + pageIndex + " not available";
        }
    }

    /** No checkpoint exists exactly at the boundary. */
    public record MissingCheckpoint(long boundaryTokens) implements Reason {
        @Override
        public String describe() {
            return "no checkpoint at token " + boundaryTokens;
        }
    }
}
