package io.orbitkv.testkit;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;

/**
 * A many-thread stress test in one JVM: tagged {@value #TAG} and given {@value #MINUTES} minutes
 * per test method instead of the default 60 s (they run a few seconds alone, and much longer when
 * the 2 cores are shared with a parallel build).
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Tag(StressTest.TAG)
@Timeout(value = StressTest.MINUTES, unit = TimeUnit.MINUTES)
public @interface StressTest {

    /** The JUnit tag of stress tests. */
    String TAG = "stress";

    /** The time limit of each test method, in minutes. */
    long MINUTES = 3;
}
