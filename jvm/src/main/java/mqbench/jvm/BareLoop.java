package mqbench.jvm;

import java.util.List;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** A bare JeroMQ PUSH/PULL loop, nothing stamped or recorded: the floor {@code mqbench calibrate} measures the
 *  harness's jeromq row against (harness/calibrate.py), as the bare pyzmq and mqcore loops are for theirs.
 *
 *  <pre>
 *  java -cp mqbench-jvm.jar mqbench.jvm.BareLoop push ENDPOINT MESSAGES SIZE [DISTINCT]
 *                                                          binds, prints "bound", sends, prints "cpu SECONDS"
 *  java -cp mqbench-jvm.jar mqbench.jvm.BareLoop pull ENDPOINT MESSAGES        connects, receives, prints
 *                                                                              "rate MSGS_PER_S cpu SECONDS"
 *  </pre>
 *  The sender cycles through DISTINCT arrays (default 1) made before its loop, each with its own first 8
 *  bytes: as many as the harness's sender hands the library in turn (harness.runner._send.distinct_messages),
 *  so that the bare loop differs from the harness's case in the stamping and recording only.
 *  The topology is the harness's (the producer binds, the consumer connects). The rate is the receiver's, as
 *  the harness defines it: (n - 1) / (last receipt - first receipt), by {@code System.nanoTime()}; cpu is the
 *  process's CPU time (every thread, the JIT's and collector's too) over the loop. A receive that waits 30 s ends the run with status 1 ("timeout"). */
public final class BareLoop {
    private static final int TIMEOUT_MS = 30_000;

    private BareLoop() {
    }

    public static void main(String[] args) {
        if (args.length < 3 || !(args[0].equals("pull") || (args[0].equals("push") && (args.length == 4 || args.length == 5)))) {
            System.err.println("usage: BareLoop pull ENDPOINT MESSAGES | push ENDPOINT MESSAGES SIZE [DISTINCT]");
            System.exit(2);
        }
        long n = Long.parseLong(args[2]);
        try (ZContext ctx = new ZContext(1)) {
            if (args[0].equals("pull")) {
                System.exit(pull(ctx, args[1], n));
            }
            push(ctx, args[1], n, Integer.parseInt(args[3]), args.length == 5 ? Integer.parseInt(args[4]) : 1);
        }
        System.exit(0);
    }

    private static int pull(ZContext ctx, String endpoint, long n) {
        ZMQ.Socket s = ctx.createSocket(SocketType.PULL);
        s.setReceiveTimeOut(TIMEOUT_MS);
        Handshakes.connect(ctx, s, List.of(endpoint));  // before the clock starts: at the first message
        if (s.recv() == null) {
            System.out.println("timeout");
            return 1;
        }
        long first = System.nanoTime();
        long cpu = cpuNanos();
        for (long i = 1; i < n; i++) {
            if (s.recv() == null) {
                System.out.println("timeout");
                return 1;
            }
        }
        long last = System.nanoTime();
        cpu = cpuNanos() - cpu;
        System.out.println("rate " + ((n - 1) * 1e9 / (last - first)) + " cpu " + (cpu / 1e9));
        return 0;
    }

    private static void push(ZContext ctx, String endpoint, long n, int size, int distinct) {
        ZMQ.Socket s = ctx.createSocket(SocketType.PUSH);
        s.setLinger(TIMEOUT_MS);  // everything queued is sent before the context closes
        s.bind(endpoint);
        System.out.println("bound");
        System.out.flush();
        byte[][] msgs = new byte[Math.max(1, distinct)][];
        for (int m = 0; m < msgs.length; m++) {
            msgs[m] = new byte[size];
            for (int b = 0; b < Math.min(8, size); b++) {
                msgs[m][b] = (byte) (m >>> (8 * b));
            }
        }
        long cpu = cpuNanos();
        int next = 0;
        for (long i = 0; i < n; i++) {
            s.send(msgs[next], 0);
            if (++next == msgs.length) {
                next = 0;
            }
        }
        s.close();  // with its linger: everything queued leaves first
        System.out.println("cpu " + ((cpuNanos() - cpu) / 1e9));
        System.out.flush();
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
                .getOperatingSystemMXBean()).getProcessCpuTime();
    }
}
