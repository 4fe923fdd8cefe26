package io.orbitkv.testkit;

import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestExecutionExceptionHandler;

/**
 * Adds the seed and the command that replays it to the failure of any test that used
 * {@link TestSeed#get()}: the failure is rethrown as an {@link AssertionError} whose message
 * starts with the original one and whose cause is the original throwable.
 *
 * <p>Registered for every test of a module that depends on this one, through
 * {@code META-INF/services} and {@code junit.jupiter.extensions.autodetection.enabled=true} (set
 * in the parent pom's Surefire configuration).
 */
public final class SeedInFailures implements BeforeEachCallback, TestExecutionExceptionHandler {

    @Override
    public void beforeEach(ExtensionContext context) {
        TestSeed.reset();
    }

    @Override
    public void handleTestExecutionException(ExtensionContext context, Throwable failure) throws Throwable {
        if (!TestSeed.takeUsed()) throw failure;
        String rerun = "./mvnw -B verify -pl <module> -am -Dsurefire.failIfNoSpecifiedTests=false -Dtest='"
                + context.getRequiredTestClass().getSimpleName() + "#" + context.getRequiredTestMethod().getName()
                + "' -D" + TestSeed.PROPERTY + "=" + Long.toString(peek());
        AssertionError withSeed = new AssertionError(failure.getMessage() + "\n[" + TestSeed.describe() + "; " + rerun + "]",
                failure);
        withSeed.setStackTrace(failure.getStackTrace());
        throw withSeed;
    }

    private static long peek() {
        long seed = TestSeed.get();
        TestSeed.reset();
        return seed;
    }
}
