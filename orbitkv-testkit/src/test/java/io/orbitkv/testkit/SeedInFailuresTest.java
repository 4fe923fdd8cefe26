package io.orbitkv.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;

class SeedInFailuresTest {

    @Test
    void aRandomizedTestsFailureNamesTheSeedAndTheCommandThatReplaysIt() {
        Throwable failure = runAndGetFailure(SeedSamples.UsesTheSeed.class);
        assertThat(failure).isInstanceOf(AssertionError.class)
                .hasMessageContaining("a randomized check")
                .hasMessageContaining("-Dorbitkv.seed=" + TestSeed.get())
                .hasMessageContaining("-Dtest='UsesTheSeed#fails'");
        assertThat(failure.getCause()).hasMessageContaining("a randomized check");
    }

    @Test
    void aTestThatDrewNoSeedFailsWithItsOwnMessageOnly() {
        Throwable failure = runAndGetFailure(SeedSamples.IgnoresTheSeed.class);
        assertThat(failure).hasMessageContaining("a plain check").hasMessageNotContaining("orbitkv.seed");
    }

    @Test
    void theSeedIsOnePerJvm() {
        assertThat(TestSeed.get()).isEqualTo(TestSeed.get());
        assertThat(TestSeed.describe()).contains("-Dorbitkv.seed=" + TestSeed.get());
    }

    private static Throwable runAndGetFailure(Class<?> testClass) {
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request()
                .selectors(selectClass(testClass))
                .configurationParameter("junit.jupiter.extensions.autodetection.enabled", "true")
                .build();
        List<Throwable> failures = new ArrayList<>();
        LauncherFactory.create().execute(request, new TestExecutionListener() {
            @Override
            public void executionFinished(TestIdentifier id, TestExecutionResult result) {
                if (id.isTest() && result.getStatus() == TestExecutionResult.Status.FAILED) {
                    failures.add(result.getThrowable().orElseThrow());
                }
            }
        });
        assertThat(failures).as("failures of " + testClass.getSimpleName()).hasSize(1);
        return failures.getFirst();
    }
}
