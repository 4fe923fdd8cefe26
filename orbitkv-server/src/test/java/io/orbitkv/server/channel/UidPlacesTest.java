package io.orbitkv.server.channel;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashSet;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The per-uid share, the total bound and displacement of the oldest silent holder. */
class UidPlacesTest {

    private final Set<String> silent = new HashSet<>();
    private final UidPlaces<String> places = new UidPlaces<>(4, 3, silent::contains);

    private UidPlaces.Admission<String> admit(String holder, int uid) {
        return places.admit(holder, uid);
    }

    @Test
    void oneUidHoldsAtMostItsShareAndAnotherUidAlwaysFindsAPlace() {
        for (String h : new String[] {"a1", "a2", "a3"}) assertThat(admit(h, 1)).isEqualTo(new UidPlaces.Admission.Placed<>(Optional.empty()));
        assertThat(admit("a4", 1)).isEqualTo(new UidPlaces.Admission.Refused<String>(UidPlaces.Refusal.UID_FULL));
        assertThat(admit("b1", 2)).isEqualTo(new UidPlaces.Admission.Placed<>(Optional.empty()));
        assertThat(admit("c1", 3)).as("every place held, none silent")
                .isEqualTo(new UidPlaces.Admission.Refused<String>(UidPlaces.Refusal.FULL));
        assertThat(places.held()).isEqualTo(4);
        assertThat(places.heldBy(1)).isEqualTo(3);
    }

    @Test
    void aNewcomerDisplacesTheOldestSilentHolderOfItsOwnUidAtItsShare() {
        admit("a1", 1);
        admit("a2", 1);
        admit("a3", 1);
        silent.add("a2");
        silent.add("a3");
        assertThat(admit("a4", 1)).isEqualTo(new UidPlaces.Admission.Placed<>(Optional.of("a2")));
        assertThat(places.leave("a2")).as("a displaced holder no longer holds a place").isFalse();
        assertThat(places.heldBy(1)).isEqualTo(3);
    }

    @Test
    void whenAllIsHeldANewcomerDisplacesASilentHolderOfTheLargestUidNeverAnotherUidsForItsOwnShare() {
        admit("a1", 1);
        admit("a2", 1);
        admit("b1", 2);
        admit("b2", 2);
        silent.add("b1");
        silent.add("a1");
        assertThat(admit("c1", 3)).as("a tie: the oldest silent one of a largest holder")
                .isEqualTo(new UidPlaces.Admission.Placed<>(Optional.of("a1")));
        assertThat(admit("b3", 2)).as("uid 2 is under its share; the set is full: b1 is the only silent one")
                .isEqualTo(new UidPlaces.Admission.Placed<>(Optional.of("b1")));
        assertThat(places.held()).isEqualTo(4);
        assertThat(places.leave("c1")).isTrue();
        assertThat(places.held()).isEqualTo(3);
    }
}
