package io.orbitkv.core.engine;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.SettleOutcome;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The names engines give their pages reach a {@link PublishObserver}: granted slots only, with the key they derive. */
class PublishObserverTest {

    static final Namespace NS = ManagerFixture.namespace("model-obs");

    @TempDir
    Path dir;
    ManagerFixture m;

    @AfterEach
    void close() {
        if (m != null) m.close();
    }

    record Reserved(String instance, StateKey key, KeyForm form, String name, int pageTokens) {
    }

    @Test
    void registrationsAndGrantedReservationsAreObservedWithTheEngineNameAndTheDerivedKey() throws Exception {
        m = ManagerFixture.open(dir);
        List<String> registered = new ArrayList<>();
        List<Reserved> reserved = new ArrayList<>();
        m.core.observePublishes(new PublishObserver() {
            @Override
            public synchronized void onRegistered(String instanceId, Namespace namespace) {
                registered.add(instanceId + "/" + namespace.modelId());
            }

            @Override
            public synchronized void onReserved(String instanceId, StateKey key, KeyForm form, byte[] name, int pageTokens) {
                reserved.add(new Reserved(instanceId, key, form, HexFormat.of().formatHex(name), pageTokens));
            }
        });
        Client c = m.register("engine-x", 1, NS, ManagerFixture.FULL);
        assertThat(c.publish(7, 0, 0, 1)).containsOnly(SettleOutcome.SEALED);
        // already resident: refused, so nothing is learned for it
        assertThat(c.publish(7, 0, 1)).doesNotContain(SettleOutcome.SEALED);

        assertThat(registered).containsExactly("engine-x/model-obs");
        assertThat(reserved).containsExactly(
                new Reserved("engine-x", Client.key(NS, 7, 0, 0), KeyForm.BLOCK_HASH, HexFormat.of().formatHex(Client.hash(7, 0, 0)),
                        ManagerFixture.PAGE_TOKENS),
                new Reserved("engine-x", Client.key(NS, 7, 0, 1), KeyForm.BLOCK_HASH, HexFormat.of().formatHex(Client.hash(7, 0, 1)),
                        ManagerFixture.PAGE_TOKENS));
    }
}
