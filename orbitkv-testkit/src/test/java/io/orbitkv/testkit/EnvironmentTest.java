package io.orbitkv.testkit;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.opentest4j.TestAbortedException;

class EnvironmentTest {

    @Test
    void aPresentRequirementLetsTheTestRun() {
        assertThatCode(() -> Environment.require(true, "anything")).doesNotThrowAnyException();
    }

    @Test
    void aMissingRequirementFailsUnderTheSwitchAndSkipsWithoutIt() {
        if (Environment.strict()) {
            assertThatThrownBy(() -> Environment.require(false, "a binary at /nowhere"))
                    .isInstanceOf(AssertionError.class)
                    .hasMessageContaining("a binary at /nowhere").hasMessageContaining(Environment.SWITCH);
        } else {
            assertThatThrownBy(() -> Environment.require(false, "a binary at /nowhere"))
                    .isInstanceOf(TestAbortedException.class).hasMessageContaining("a binary at /nowhere");
        }
    }

    @Test
    void theSystemPropertyTurnsTheSwitchOn() {
        String before = System.getProperty(Environment.PROPERTY);
        System.setProperty(Environment.PROPERTY, "true");
        try {
            assertThatThrownBy(() -> Environment.require(false, "root for mount(8)")).isInstanceOf(AssertionError.class);
        } finally {
            if (before == null) System.clearProperty(Environment.PROPERTY);
            else System.setProperty(Environment.PROPERTY, before);
        }
    }
}
