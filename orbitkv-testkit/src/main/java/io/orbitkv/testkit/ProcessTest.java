package io.orbitkv.testkit;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;

/**
 * A test class that starts other processes (a Manager JVM, an engine JVM, etcd, python3, openssl,
 * mount): tagged {@value #TAG}, so {@code bin/orbitkv test --unit} can leave it out, and given
 * {@value #MINUTES} minutes per test method instead of the default 60 s (a cluster test starts
 * etcd and several JVMs; on 2 loaded cores one took 57 s).
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Tag(ProcessTest.TAG)
@Timeout(value = ProcessTest.MINUTES, unit = TimeUnit.MINUTES)
public @interface ProcessTest {

    /** The JUnit tag of process tests. */
    String TAG = "process";

    /** The time limit of each test method, in minutes. */
    long MINUTES = 5;
}
