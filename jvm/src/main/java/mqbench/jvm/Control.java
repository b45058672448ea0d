package mqbench.jvm;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/** The line protocol with the relay (harness/runner/jvm.py), one line per event.
 *  relay -> JVM (stdin): {@code clock} | {@code start <t0 ns>} | {@code release} (a backlog case's consumers
 *  may receive: harness/runner/_backlog.py) | {@code stop}; end of input means stop.
 *  JVM -> relay (stdout): {@code hello} | {@code clock <ns>} | {@code outcomes on|off} (a producer asked to
 *  watch outcomes, before {@code ready}) | {@code ready} | {@code subscribed} | {@code progress <n>} |
 *  {@code outcome <first> <count> 1|0} (sends acknowledged / refused) | {@code done <n> <error>} |
 *  {@code error <message>}.
 *  Nothing else may write to stdout (the clients' logging is off: slf4j-nop). */
final class Control {
    private final PrintStream out;
    private final CountDownLatch started = new CountDownLatch(1);
    private final CountDownLatch released = new CountDownLatch(1);
    private volatile boolean stopped;
    private volatile long t0;

    Control() {
        out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);  // a library printing to System.out must not break the protocol
        Thread reader = new Thread(this::read, "mqbench-control");
        reader.setDaemon(true);
        reader.start();
    }

    private void read() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.equals("clock")) {
                    say("clock " + System.nanoTime());
                } else if (line.startsWith("start ")) {
                    t0 = Long.parseLong(line.substring(6).trim());
                    started.countDown();
                } else if (line.equals("release")) {
                    released.countDown();
                } else if (line.equals("stop")) {
                    stopped = true;
                    started.countDown();
                    released.countDown();
                }
            }
        } catch (Exception e) {
            // fall through: the relay is gone
        }
        // End of input: the relay is gone (killed, or its kill of this JVM was cut short), told to stop or
        // not. Stop, and make sure this JVM does not outlive it even if a send or a client's close blocks
        // for good (a JeroMQ context with unsent messages waits in term()).
        stopped = true;
        started.countDown();
        released.countDown();
        try {
            Thread.sleep(5000);
        } catch (InterruptedException e) {
            // halt anyway
        }
        Runtime.getRuntime().halt(3);
    }

    synchronized void say(String line) {
        out.println(line.replace('\n', ' '));
    }

    boolean stopped() {
        return stopped;
    }

    boolean startSet() {
        return started.getCount() == 0;
    }

    /** The common start stamp; only valid once {@link #startSet}. */
    long t0() {
        return t0;
    }

    /** Wait for the start; false when stopped first. */
    boolean awaitStart() throws InterruptedException {
        started.await();
        return !stopped;
    }

    boolean releasedSet() {
        return released.getCount() == 0;
    }

    /** A backlog case's consumer: wait until the relay releases the consumers; false when stopped first. */
    boolean awaitRelease() throws InterruptedException {
        released.await();
        return !stopped;
    }

    boolean awaitStart(long ms) throws InterruptedException {
        return started.await(ms, TimeUnit.MILLISECONDS);
    }

    /** Block until stop (the producer keeps its connection open until the consumers are done). */
    void awaitStop() throws InterruptedException {
        while (!stopped) {
            Thread.sleep(50);
        }
    }
}
