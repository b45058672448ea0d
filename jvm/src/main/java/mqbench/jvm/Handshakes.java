package mqbench.jvm;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
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
    static final long REDIAL_MS = 2000;  // connected this long without a handshake: dialled again
    static final long HANDSHAKE_WAIT_MS = 30_000;  // then go on: the binder may be gone (its own error says so)
    private static final AtomicInteger MONITORS = new AtomicInteger();  // inproc names, unique in the JVM

    private Handshakes() {
    }

    /** Connect {@code s} to each of {@code endpoints} and return once every connection has completed its
     *  handshake, dialling again one that has been connected for {@link #REDIAL_MS} without (see the class
     *  comment); after {@link #HANDSHAKE_WAIT_MS} it returns all the same and says which are missing on stderr.
     *
     *  <p>The limit runs from the TCP connection, not the dial: a dial refused until its binder listens is
     *  JeroMQ's to retry, and a handshake that completed as the limit passed must not be taken for the new
     *  dial's. A dropped connection's handshake can still be reported after the redial, so a handshake counts
     *  only after a connection of the current dial: the old session is ended (JeroMQ's {@code term}) before
     *  the new one starts (its {@code plug}), in that order on the IO thread, and a connection is reported
     *  before its engine runs ({@code TcpConnecter.outEvent}). With more than one IO thread the two sessions
     *  may run on different threads and that order is no longer certain. */
    static void connect(ZContext ctx, ZMQ.Socket s, List<String> endpoints) {
        String address = "inproc://mqbench-monitor-" + MONITORS.incrementAndGet();
        s.monitor(address, ZMQ.EVENT_CONNECTED | ZMQ.EVENT_HANDSHAKE_PROTOCOL);
        ZMQ.Socket monitor = ctx.createSocket(SocketType.PAIR);
        try {
            monitor.connect(address);
            monitor.setReceiveTimeOut(50);
            Set<String> waiting = new HashSet<>(endpoints);  // not yet handshaken
            Map<String, Long> connected = new HashMap<>();  // endpoint -> when the current dial connected
            for (String e : endpoints) {
                s.connect(e);
            }
            long giveUp = System.nanoTime() + HANDSHAKE_WAIT_MS * 1_000_000L;
            while (!waiting.isEmpty() && System.nanoTime() < giveUp) {
                ZMQ.Event event = ZMQ.Event.recv(monitor);
                if (event != null && waiting.contains(event.getAddress())) {
                    if (event.getEvent() == ZMQ.EVENT_CONNECTED) {
                        connected.put(event.getAddress(), System.nanoTime());
                    } else if (connected.remove(event.getAddress()) != null) {
                        waiting.remove(event.getAddress());
                    }  // else the handshake of a connection dropped by a redial
                }
                long now = System.nanoTime();
                for (Iterator<Map.Entry<String, Long>> it = connected.entrySet().iterator(); it.hasNext(); ) {
                    Map.Entry<String, Long> e = it.next();
                    if (now - e.getValue() > REDIAL_MS * 1_000_000L) {
                        s.disconnect(e.getKey());
                        s.connect(e.getKey());
                        it.remove();
                    }
                }
            }
            if (!waiting.isEmpty()) {
                System.err.println("jeromq: no handshake with " + waiting + " in "
                        + HANDSHAKE_WAIT_MS / 1000 + " s; going on");
            }
        } finally {
            s.monitor(null, 0);
            ctx.destroySocket(monitor);
        }
    }
}
