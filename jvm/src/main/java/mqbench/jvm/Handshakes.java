package mqbench.jvm;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** JeroMQ connections that are known to work: JeroMQ 0.6.0's poller can lose a new connection's registration
 *  when the connecter's and the engine's handles of one channel meet in one pass ({@code zmq.poll.Poller.run}:
 *  the connecter's cancel takes the engine's key). That connection then never reads: the peer's greeting
 *  waits in the kernel, and a PUSH queues everything for it in its pipe (one topic in about ten 72-role runs
 *  here went unread so). A connection is known to work once its ZMTP handshake has completed, which the
 *  socket's monitor says. Used by the JVM worker's connecting roles and the bare loop, whose peers are JeroMQ
 *  binders; not by the interop peer: a peer that sends its whole greeting at once (mqcore does) can have
 *  it read by the lost connection's first, direct read, which reports the protocol all the same, so its
 *  tests watch the handshake from mqcore's side and have the peer dial again (the race is JeroMQ's,
 *  described in zeromq/jeromq pull request 1022; here about one connection in ten to twenty). */
final class Handshakes {
    static final long REDIAL_MS = 2000;  // a connection without a handshake by then is dialled again
    static final long HANDSHAKE_WAIT_MS = 30_000;  // then go on: the binder may be gone (its own error says so)
    private static final AtomicInteger MONITORS = new AtomicInteger();  // inproc names, unique in the JVM

    private Handshakes() {
    }

    /** Connect {@code s} to each of {@code endpoints} and return once every connection has completed its
     *  handshake, dialling again one that has not within {@link #REDIAL_MS} (see the class comment); after
     *  {@link #HANDSHAKE_WAIT_MS} it returns all the same and says which are missing on stderr. */
    static void connect(ZContext ctx, ZMQ.Socket s, List<String> endpoints) {
        String address = "inproc://mqbench-monitor-" + MONITORS.incrementAndGet();
        s.monitor(address, ZMQ.EVENT_HANDSHAKE_PROTOCOL);
        ZMQ.Socket monitor = ctx.createSocket(SocketType.PAIR);
        try {
            monitor.connect(address);
            monitor.setReceiveTimeOut(50);
            Map<String, Long> dialled = new HashMap<>();  // endpoint -> when it was last dialled, until handshaken
            for (String e : endpoints) {
                s.connect(e);
                dialled.put(e, System.nanoTime());
            }
            long giveUp = System.nanoTime() + HANDSHAKE_WAIT_MS * 1_000_000L;
            while (!dialled.isEmpty() && System.nanoTime() < giveUp) {
                ZMQ.Event event = ZMQ.Event.recv(monitor);
                if (event != null) {
                    dialled.remove(event.getAddress());
                }
                long now = System.nanoTime();
                for (Map.Entry<String, Long> e : dialled.entrySet()) {
                    if (now - e.getValue() > REDIAL_MS * 1_000_000L) {
                        s.disconnect(e.getKey());
                        s.connect(e.getKey());
                        e.setValue(now);
                    }
                }
            }
            if (!dialled.isEmpty()) {
                System.err.println("jeromq: no handshake with " + dialled.keySet() + " in "
                        + HANDSHAKE_WAIT_MS / 1000 + " s; going on");
            }
        } finally {
            s.monitor(null, 0);
            ctx.destroySocket(monitor);
        }
    }
}
